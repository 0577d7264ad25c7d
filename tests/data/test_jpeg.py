"""Crop decoding (lfpe/data/jpeg.py): the window equals Pillow's full decode cut to it, on
TurboJPEG's path and on Pillow's; `inception_crop` and the loader take encoded images."""

import io

import numpy as np
import PIL.Image
import pytest

from lfpe import data as data_lib
from lfpe.data import image_ops, jpeg, ops, pipeline, standins


def _encode(image: np.ndarray, fmt: str = "JPEG", **kw) -> bytes:
  buffer = io.BytesIO()
  PIL.Image.fromarray(image.squeeze()).save(buffer, fmt, **kw)
  return buffer.getvalue()


def _pillow(data: bytes, mode: str = "RGB") -> np.ndarray:
  return np.asarray(PIL.Image.open(io.BytesIO(data)).convert(mode))


WINDOWS = [(0, 0, 75, 100), (3, 5, 40, 37), (17, 32, 58, 64), (74, 99, 1, 1), (10, 0, 1, 100)]


@pytest.mark.parametrize("subsampling", [0, 1, 2])  # 4:4:4, 4:2:2, 4:2:0
def test_turbojpeg_window_equals_pillows_full_decode_cut(subsampling):
  """Exact, including windows whose edges fall on iMCU boundaries (where chroma upsampling
  needs the column beyond) and random ones."""
  assert jpeg.available(), "the turbojpeg wheel (lfpe[train]) should provide TurboJPEG 3"
  data = _encode(standins.photo(75, 100), quality=90, subsampling=subsampling)
  image, full = jpeg.Encoded(data), _pillow(data)
  assert jpeg.size(image) == (75, 100)
  rng = np.random.default_rng(subsampling)
  windows = list(WINDOWS)
  for _ in range(40):
    top, left = rng.integers(0, 75), rng.integers(0, 100)
    windows.append((top, left, rng.integers(1, 76 - top), rng.integers(1, 101 - left)))
  for top, left, h, w in windows:
    window = jpeg.decode_crop(image, top, left, h, w)
    assert window.shape == (h, w, 3) and window.dtype == np.uint8
    np.testing.assert_array_equal(window, full[top : top + h, left : left + w])


def test_gray_jpeg_to_rgb_and_colour_to_gray():
  gray = _encode(standins.photo(40, 60)[..., :1], quality=95)
  window = jpeg.decode_crop(jpeg.Encoded(gray), 5, 9, 20, 30)
  np.testing.assert_array_equal(window, _pillow(gray)[5:25, 9:39])
  colour = _encode(standins.photo(40, 60), quality=95, subsampling=0)
  window = jpeg.decode_crop(jpeg.Encoded(colour, channels=1), 5, 9, 20, 30)
  np.testing.assert_array_equal(window[..., 0], _pillow(colour, "L")[5:25, 9:39])
  window = jpeg.decode_crop(jpeg.Encoded(gray, channels=1), 5, 9, 20, 30)
  np.testing.assert_array_equal(window[..., 0], _pillow(gray, "L")[5:25, 9:39])


def test_png_and_a_missing_library_fall_back_to_pillow_exactly(monkeypatch):
  png = _encode(standins.photo(30, 40), "PNG")
  np.testing.assert_array_equal(
    jpeg.decode_crop(jpeg.Encoded(png), 2, 3, 10, 20), _pillow(png)[2:12, 3:23]
  )
  data = _encode(standins.photo(30, 40), quality=90)
  monkeypatch.setenv("LFPE_TURBOJPEG", "/nonexistent/libturbojpeg.so")
  jpeg._turbo.cache_clear()
  try:
    assert not jpeg.available()
    window = jpeg.decode_crop(jpeg.Encoded(data), 2, 3, 10, 20)
    np.testing.assert_array_equal(window, _pillow(data)[2:12, 3:23])
  finally:
    monkeypatch.delenv("LFPE_TURBOJPEG")
    jpeg._turbo.cache_clear()
  assert jpeg.available()


def test_progressive_and_cmyk_jpegs_give_pillows_pixels():
  """Progressive: TurboJPEG's partial decode; CMYK (which it cannot turn into RGB): Pillow."""
  progressive = _encode(standins.photo(75, 100), quality=90, progressive=True)
  buffer = io.BytesIO()
  PIL.Image.fromarray(standins.photo(75, 100)).convert("CMYK").save(buffer, "JPEG", quality=90)
  for data in (progressive, buffer.getvalue()):
    for top, left, h, w in WINDOWS:
      window = jpeg.decode_crop(jpeg.Encoded(data), top, left, h, w)
      np.testing.assert_array_equal(window, _pillow(data)[top : top + h, left : left + w])


@pytest.mark.parametrize("window", [(-1, 0, 5, 5), (0, 0, 31, 5), (0, 38, 5, 3), (0, 0, 0, 4)])
def test_a_window_outside_the_image_is_refused(window):
  with pytest.raises(ValueError, match="outside the 30x40 image"):
    jpeg.decode_crop(jpeg.Encoded(_encode(standins.photo(30, 40))), *window)


def test_inception_crop_of_the_encoded_image_is_the_crop_of_the_decoded_one():
  data = _encode(standins.photo(120, 90, seed=3), quality=92)  # 4:2:0
  for op in (image_ops.InceptionCrop(32), image_ops.InceptionCrop(32, antialias=False)):
    for seed in range(5):  # the same draws: the same window
      rng = np.random.default_rng(seed)
      encoded = op.random_map({"image": jpeg.Encoded(data)}, rng)["image"]
      decoded = op.random_map({"image": _pillow(data)}, np.random.default_rng(seed))["image"]
      assert encoded.shape == decoded.shape == (32, 32, 3)
      np.testing.assert_array_equal(encoded, decoded)
  # A crop already of the output size is not resized: uint8 pixels on both paths.
  data = _encode(standins.photo(32, 32), quality=92)
  op = image_ops.InceptionCrop(32, area_min=1.0)  # the whole image
  encoded = op.random_map({"image": jpeg.Encoded(data)}, np.random.default_rng(0))["image"]
  assert encoded.dtype == np.uint8 and encoded.shape == (32, 32, 3)
  np.testing.assert_array_equal(encoded, _pillow(data))


class SmallImagenet(standins.Imagenet2012, skip_registration=True):
  name = "imagenet2012"  # TFDS names a subclass after itself otherwise
  SIZES = tuple((48 + 8 * i, 64 - 4 * i) for i in range(8))


def test_the_training_loader_reads_jpegs_undecoded_and_crops_them(tmp_path, mesh):
  SmallImagenet(data_dir=str(tmp_path)).download_and_prepare()
  cfg = data_lib.default_config("imagenet2012")
  cfg.update(data_dir=str(tmp_path), image_size=24, augment="inception_crop(24)|flip_lr")
  cfg.update(eval_preprocess="resize_small(28)|central_crop(24)")
  resolved = data_lib.config.resolve(cfg)
  assert ops.takes_encoded(resolved.ops(train=True)) and not ops.takes_encoded(resolved.ops(False))
  source = pipeline._data_source("imagenet2012", "train", str(tmp_path), True)
  sizes = {jpeg.size(source[i]["image"]) for i in range(len(source))}
  assert isinstance(source[0]["image"], jpeg.Encoded)
  assert sizes == {(48 + 8 * i, 64 - 4 * i) for i in range(8)}
  kw = dict(global_batch_size=8, seed=0, mesh=mesh)
  train = next(iter(pipeline.make_loader(cfg, train=True, **kw)))
  labels = sorted(np.asarray(train["label"]))
  assert train["image"].shape == (8, 24, 24, 3) and labels == sorted(np.arange(8) * 83 % 1000)
  (evaluation,) = list(pipeline.make_loader(cfg, train=False, **kw))
  assert evaluation["image"].shape == (8, 24, 24, 3)
