"""Geometric image ops on one example (numpy, `image` is `[H, W, C]`): resize, crops, flips.

`resize_image` is the pure function: nearest or bilinear resampling with half-pixel centres,
the same as `jax.image.resize(method='nearest' | 'linear')` (to 5e-5 on a 0-255 scale for
float input; within one level for uint8 RGB or gray, which Pillow resamples in fixed point:
benchmarks/input_pipeline.py). Bilinear antialiases when shrinking, as `jax.image.resize`,
torchvision and timm's PIL path do; `antialias=False` reads only the 2x2 pixels around each
output centre, as `tf.image.resize`'s default and so big_vision's ops (OpenCV's float32
`INTER_LINEAR`: equal to `jax.image.scale_and_translate(..., antialias=False)` to 2e-3, and
about 10x faster than Pillow's filter at ImageNet's crops). The ops are grain transforms (`Map`
deterministic, `RandomMap` random: grain hands each record its own seeded `np.random.Generator`, so
augmentation is reproducible).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import cv2
import grain
import numpy as np
import PIL.Image

from lfpe import resolution
from lfpe.data import jpeg

METHODS = ("nearest", "bilinear")
PIL_MODES = {1: "L", 3: "RGB"}  # uint8 images Pillow resizes whole, in fixed point


def _pair(size) -> tuple[int, int]:
  return (size, size) if isinstance(size, int) else tuple(size)


def resize_image(
  image: np.ndarray, size, method: str = "bilinear", antialias: bool = True
) -> np.ndarray:
  """Resizes `image [H, W, C]` to `size` (int or `(h, w)`).

  `nearest` keeps the dtype (exact pixel blocks when upsampling by an integer factor);
  `bilinear` returns float32 in the input's value range. With `antialias` (the default) a
  uint8 image of 1 or 3 channels is resampled by Pillow's uint8 filter (the same weights in
  fixed point, each of its two separable passes rounded to whole levels, as torchvision's
  PIL path: within one level of the float32 result, and faster, benchmarks/README.md);
  other images per channel in float32. Without, OpenCV interpolates in float32 between the
  2x2 nearest pixels (edges clamped), which only differs from the above when shrinking.
  """
  h, w = _pair(size)
  check_resample(method, antialias, "resize")
  if image.shape[:2] == (h, w):
    return image
  if method == "nearest":
    rows = np.floor((np.arange(h) + 0.5) * image.shape[0] / h).astype(int)
    cols = np.floor((np.arange(w) + 0.5) * image.shape[1] / w).astype(int)
    return image[rows][:, cols]
  if not antialias:  # cv2 drops a trailing channel axis of 1: the reshape restores it
    image = np.ascontiguousarray(image, np.float32)
    out = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    return out.reshape(h, w, image.shape[2])
  if image.dtype == np.uint8 and image.shape[2] in PIL_MODES:  # Pillow's uint8 filter
    mode = PIL_MODES[image.shape[2]]
    resized = PIL.Image.fromarray(image[..., 0] if mode == "L" else image, mode)
    out = np.asarray(resized.resize((w, h), PIL.Image.BILINEAR), np.float32)
    return out.reshape(h, w, image.shape[2])
  channels = image.astype(np.float32).transpose(2, 0, 1)
  resized = [PIL.Image.fromarray(c).resize((w, h), PIL.Image.BILINEAR) for c in channels]
  return np.stack([np.asarray(c) for c in resized], axis=-1)


def check_resample(method: str, antialias: bool, op: str) -> None:
  """A ValueError naming `op`'s field unless `method` and `antialias` are valid."""
  if method not in METHODS:
    raise ValueError(f"{op}: `method`={method!r} must be one of {METHODS}.")
  if not isinstance(antialias, bool):
    raise ValueError(f"{op}: `antialias`={antialias!r} must be True or False.")


def crop(image: np.ndarray, top: int, left: int, h: int, w: int) -> np.ndarray:
  return image[top : top + h, left : left + w]


@dataclasses.dataclass
class Resize(grain.transforms.Map):
  """`resize(size, method='bilinear', antialias=True)`: resize to `size` (int: square); no-op
  if equal."""

  size: int | tuple[int, int]
  method: str = "bilinear"
  antialias: bool = True

  def __post_init__(self):
    check_resample(self.method, self.antialias, "resize")

  def map(self, element):
    image = resize_image(element["image"], self.size, self.method, self.antialias)
    return {**element, "image": image}


@dataclasses.dataclass
class ResizeSmall(grain.transforms.Map):
  """`resize_small(size, method='bilinear', antialias=True)`: the shorter side becomes `size`,
  keeping the aspect ratio."""

  size: int
  method: str = "bilinear"
  antialias: bool = True

  def __post_init__(self):
    check_resample(self.method, self.antialias, "resize_small")

  def map(self, element):
    h, w = element["image"].shape[:2]
    ratio = self.size / min(h, w)
    target = (max(1, round(h * ratio)), max(1, round(w * ratio)))
    image = resize_image(element["image"], target, self.method, self.antialias)
    return {**element, "image": image}


@dataclasses.dataclass
class CentralCrop(grain.transforms.Map):
  """`central_crop(size)`: the central `size` crop (int: square)."""

  size: int | tuple[int, int]

  def map(self, element):
    h, w = _pair(self.size)
    image = element["image"]
    top, left = (image.shape[0] - h) // 2, (image.shape[1] - w) // 2
    if top < 0 or left < 0:
      raise ValueError(f"central_crop: crop {(h, w)} is larger than the image {image.shape}.")
    return {**element, "image": crop(image, top, left, h, w)}


@dataclasses.dataclass
class RandomCrop(grain.transforms.RandomMap):
  """`random_crop(size, padding=0)`: zero-pad by `padding` on each side, crop `size` at random."""

  size: int | tuple[int, int]
  padding: int = 0

  def random_map(self, element, rng: np.random.Generator):
    h, w = _pair(self.size)
    p = self.padding
    image = np.pad(element["image"], ((p, p), (p, p), (0, 0)))
    if image.shape[0] < h or image.shape[1] < w:
      raise ValueError(f"random_crop: crop {(h, w)} is larger than the padded image.")
    top = rng.integers(0, image.shape[0] - h + 1)
    left = rng.integers(0, image.shape[1] - w + 1)
    return {**element, "image": crop(image, top, left, h, w)}


@dataclasses.dataclass
class InceptionCrop(grain.transforms.RandomMap):
  """`inception_crop(size, area_min=0.05, area_max=1.0, antialias=True)`: random area and
  aspect, resized.

  The crop covers a uniform fraction of the image area in `[area_min, area_max]` with a
  log-uniform aspect ratio in [3/4, 4/3] (10 tries; else the whole image), then is resized
  bilinearly to `size`. This is the Inception / ViT ImageNet training crop. As the first op
  it gets the image still encoded (`jpeg.Encoded`) and decodes only the crop window.
  `antialias=False` is big_vision's `decode_jpeg_and_inception_crop` (`tf.image.resize`'s
  default), and about 1.85x the images per core (benchmarks/README.md); the default filters
  over each output pixel's footprint, as torchvision's `RandomResizedCrop` on PIL images.
  """

  size: int | tuple[int, int]
  area_min: float = 0.05
  area_max: float = 1.0
  antialias: bool = True
  TAKES_ENCODED: ClassVar[bool] = True  # the loader may hand it the undecoded image

  def __post_init__(self):
    check_resample("bilinear", self.antialias, "inception_crop")

  def random_map(self, element, rng: np.random.Generator):
    image = element["image"]
    encoded = isinstance(image, jpeg.Encoded)
    height, width = jpeg.size(image) if encoded else image.shape[:2]
    top, left, h, w = resolution.crop_window(rng, height, width, (self.area_min, self.area_max))
    window = (jpeg.decode_crop if encoded else crop)(image, top, left, h, w)
    return {**element, "image": resize_image(window, self.size, antialias=self.antialias)}


@dataclasses.dataclass
class FlipLr(grain.transforms.RandomMap):
  """`flip_lr(p=0.5)`: mirror left-right with probability `p` (boxes and masks too)."""

  p: float = 0.5

  def random_map(self, element, rng: np.random.Generator):
    if "objects" in element:
      raise ValueError("flip_lr: convert `objects` with `boxes(K)` before flipping.")
    if rng.uniform() >= self.p:
      return element
    out = {**element, "image": element["image"][:, ::-1]}
    if "boxes" in element:  # [K, 4] as (cx, cy, w, h), normalised.
      out["boxes"] = element["boxes"] * [-1, 1, 1, 1] + [1, 0, 0, 0]
      out["boxes"] = np.where(element["box_mask"][:, None], out["boxes"], 0).astype(np.float32)
    return out


@dataclasses.dataclass
class RandomErasing(grain.transforms.RandomMap):
  """`random_erasing(p=0.25, area_min=0.02, area_max=1/3, min_aspect=0.3, mode='pixel')`.

  Random erasing (Zhong et al. 2020; timm's `RandomErasing`, one rectangle): with probability
  `p`, a rectangle covering a uniform fraction of the image area in `[area_min, area_max]`,
  with a log-uniform aspect ratio in `[min_aspect, 1 / min_aspect]`, is filled with uniform
  random values over the image's range (`pixel`: 0-255 for uint8, [0, 1) for floats) or
  zeros (`const`); up to 10 draws until it fits, else nothing is erased. It runs in
  `data.augment`, before `preprocess` scales the values.
  """

  p: float = 0.25
  area_min: float = 0.02
  area_max: float = 1 / 3
  min_aspect: float = 0.3
  mode: str = "pixel"

  def __post_init__(self):
    if self.mode not in ("pixel", "const"):
      raise ValueError(f"random_erasing: mode={self.mode!r} must be 'pixel' or 'const'.")

  def random_map(self, element, rng: np.random.Generator):
    if rng.uniform() >= self.p:
      return element
    image = element["image"]
    height, width = image.shape[:2]
    for _ in range(10):
      area = rng.uniform(self.area_min, self.area_max) * height * width
      aspect = math.exp(rng.uniform(math.log(self.min_aspect), -math.log(self.min_aspect)))
      h, w = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
      if 0 < h < height and 0 < w < width:
        top, left = rng.integers(0, height - h + 1), rng.integers(0, width - w + 1)
        out = image.copy()
        shape = (h, w, image.shape[2])
        if self.mode == "const":
          out[top : top + h, left : left + w] = 0
        elif image.dtype == np.uint8:
          out[top : top + h, left : left + w] = rng.integers(0, 256, shape, dtype=np.uint8)
        else:
          out[top : top + h, left : left + w] = rng.uniform(0.0, 1.0, shape)
        return {**element, "image": out}
    return element
