"""Per-core throughput of the ImageNet training and eval preprocessing, one process.

  python benchmarks/input_pipeline.py [--images 64] [--size 224]

Fabricates JPEGs of ImageNet's typical size (375x500, quality 90, natural-looking
content) and times, per image on one core, decode + crop + resize by:
* `lfpe`: what lfpe's loader does with ImageNet's config. Train: `inception_crop(224,
  antialias=False)` on the undecoded JPEG, decoding only its window (TurboJPEG,
  lfpe/data/jpeg.py) and resizing as big_vision (bilinear without antialiasing); eval:
  Pillow's full decode (what `tfds.data_source` does without TensorFlow),
  `ResizeSmall(256)` + `CentralCrop(224)`;
* `lfpe_antialias`: the same with `inception_crop`'s default antialiased resize;
* `lfpe_full_decode`: that on Pillow's full decode (lfpe's train path before crop decoding);
* `pil_numpy`: Pillow decode, crop and bilinear resize in C, then `np.asarray`;
* `pil_draft`: the same, with Pillow's `draft` decoding the JPEG at a reduced DCT scale
  that still covers the crop (the trick of decoders that decode at reduced scale);
* `tf_data` (only where TensorFlow is installed; lfpe does not need it): big_vision's
  `decode_jpeg_and_inception_crop` recipe (`sample_distorted_bounding_box`, then
  `decode_and_crop_jpeg` and a bilinear resize) and its `decode|resize_small|central_crop`
  eval, in a `tf.data` pipeline held to one thread.
Prints a Markdown table to paste into benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import io
import math
import time
from collections.abc import Callable

import numpy as np
import PIL.Image

from benchmarks.timing import machine
from lfpe import resolution
from lfpe.data import image_ops, jpeg

SHAPE = (375, 500)


def fabricate(count: int, seed: int = 0) -> list[bytes]:
  """`count` JPEGs of SHAPE: smooth colour fields with edges and noise (JPEG-typical)."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[: SHAPE[0], : SHAPE[1]] / max(SHAPE)
  out = []
  for _ in range(count):
    f = rng.uniform(2, 12, (3, 2))
    image = np.stack([np.sin(f[c, 0] * x + f[c, 1] * y + rng.uniform(0, 6)) for c in range(3)], -1)
    image = 127 * (image + 1) + rng.normal(0, 12, (*SHAPE, 3))
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    out.append(buffer.getvalue())
  return out


def lfpe_train(
  data: bytes, rng: np.random.Generator, size: int, crop_decode: bool = True, antialias=False
):
  """`inception_crop` as the loader runs it: on the encoded JPEG (decoding only the crop
  window, lfpe/data/jpeg.py), or with `crop_decode=False` on Pillow's full decode."""
  image = jpeg.Encoded(data) if crop_decode else np.asarray(PIL.Image.open(io.BytesIO(data)))
  op = image_ops.InceptionCrop(size, antialias=antialias)
  return op.random_map({"image": image}, rng)["image"]


def lfpe_eval(data: bytes, rng: np.random.Generator, size: int) -> np.ndarray:
  del rng
  image = np.asarray(PIL.Image.open(io.BytesIO(data)).convert("RGB"))
  element = image_ops.ResizeSmall(round(size * 256 / 224)).map({"image": image})
  return image_ops.CentralCrop(size).map(element)["image"]


def _pil(data: bytes, rng: np.random.Generator, size: int, draft: bool, train: bool):
  image = PIL.Image.open(io.BytesIO(data))
  width, height = image.size
  if train:
    top, left, h, w = resolution.crop_window(rng, height, width)  # inception_crop's draw
  else:  # the central square of the resize-256 + crop-224 eval
    side = round(min(height, width) * 224 / 256)
    top, left, h, w = (height - side) // 2, (width - side) // 2, side, side
  if draft:  # decode at 1/2, 1/4 or 1/8 scale while the crop stays >= size pixels
    scale = min(h / size, w / size)
    factor = 8 if scale >= 8 else 4 if scale >= 4 else 2 if scale >= 2 else 1
    if factor > 1:
      image.draft("RGB", (width // factor, height // factor))
      ratio = image.size[0] / width
      top, left, h, w = (round(v * ratio) for v in (top, left, h, w))
  image = image.convert("RGB").resize(
    (size, size), PIL.Image.BILINEAR, (left, top, left + w, top + h)
  )
  return np.asarray(image)


def tf_data_rate(files: list[bytes], size: int, train: bool) -> float | None:
  """Images/s of the `tf_data` path on one thread (best of three passes), or None without TF."""
  try:
    import tensorflow as tf  # noqa: PLC0415
  except ImportError:
    return None

  def inception(data):
    begin, crop, _ = tf.image.sample_distorted_bounding_box(
      tf.image.extract_jpeg_shape(data),
      tf.zeros([0, 0, 4]),
      area_range=(0.05, 1.0),
      min_object_covered=0,
      use_image_if_no_bounding_boxes=True,
    )
    window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
    return tf.image.resize(tf.image.decode_and_crop_jpeg(data, window, channels=3), [size, size])

  def central(data):
    image = tf.image.decode_jpeg(data, channels=3)
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    small = tf.cast(tf.round(shape * round(size * 256 / 224) / tf.reduce_min(shape)), tf.int32)
    image = tf.image.resize(image, small, antialias=True)
    top, left = (small[0] - size) // 2, (small[1] - size) // 2
    return image[top : top + size, left : left + size]

  options = tf.data.Options()
  options.threading.private_threadpool_size = 1
  options.threading.max_intra_op_parallelism = 1
  dataset = tf.data.Dataset.from_tensor_slices(files).map(inception if train else central)
  dataset = dataset.with_options(options)
  best = math.inf
  for _ in range(3):
    start = time.perf_counter()
    for out in dataset.as_numpy_iterator():
      assert out.shape == (size, size, 3), out.shape
    best = min(best, time.perf_counter() - start)
  return len(files) / best


PATHS: dict[str, Callable] = {
  "lfpe": lambda d, r, s, train: (lfpe_train if train else lfpe_eval)(d, r, s),
  "lfpe_antialias": lambda d, r, s, train: (
    lfpe_train(d, r, s, antialias=True) if train else lfpe_eval(d, r, s)
  ),
  "lfpe_full_decode": lambda d, r, s, train: (
    lfpe_train(d, r, s, crop_decode=False, antialias=True) if train else lfpe_eval(d, r, s)
  ),
  "pil_numpy": lambda d, r, s, train: _pil(d, r, s, draft=False, train=train),
  "pil_draft": lambda d, r, s, train: _pil(d, r, s, draft=True, train=train),
}


def images_per_second(path: Callable, files: list[bytes], size: int, train: bool) -> float:
  """Best of three passes over `files` (one core, one process)."""
  best = math.inf
  for repeat in range(3):
    rng = np.random.default_rng(repeat)
    start = time.perf_counter()
    for data in files:
      out = path(data, rng, size, train)
    best = min(best, time.perf_counter() - start)
    assert out.shape == (size, size, 3), out.shape
  return len(files) / best


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--images", type=int, default=64)
  parser.add_argument("--size", type=int, default=224)
  args = parser.parse_args()
  files = fabricate(args.images)
  crop = "TurboJPEG" if jpeg.available() else "none: Pillow decodes whole images"
  print(f"{datetime.date.today()}; {machine()}; Pillow {PIL.__version__}; crop decode: {crop}")
  print(f"{args.images} JPEGs {SHAPE[0]}x{SHAPE[1]} (quality 90) -> {args.size}, one core\n")
  print("| path | train (Inception crop) img/s | eval (resize + central crop) img/s |")
  print("|---|---|---|")
  for name, path in PATHS.items():
    train = images_per_second(path, files, args.size, train=True)
    evaluation = images_per_second(path, files, args.size, train=False)
    print(f"| `{name}` | {train:.0f} | {evaluation:.0f} |")
  train, evaluation = (tf_data_rate(files, args.size, train=t) for t in (True, False))
  if train is not None:
    print(f"| `tf_data` (big_vision's ops) | {train:.0f} | {evaluation:.0f} |")


if __name__ == "__main__":
  main()
