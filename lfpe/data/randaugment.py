"""RandAugment (Cubuk et al. 2020) as a grain op on uint8 images, with Pillow.

`rand_augment(num_ops=2, magnitude=9, magnitude_std=0.0, prob=0.5, interpolation='bicubic')`:
each example draws `num_ops` ops uniformly (with replacement) from `OPS` and applies each with
probability `prob` (timm's `AugmentOp`: 0.5 in `rand_augment_transform`, so about 29 % of
images come out untouched at 2 ops), at magnitude `m` of 10 (drawn per op from
N(magnitude, magnitude_std) and clipped to [0, 10] when the std is positive, as timm's
`rand-m9-mstd0.5`), every signed magnitude negated with probability 1/2. Geometric ops
resample with `interpolation` (DeiT's bicubic; timm draws bilinear or bicubic per op where
none is given). The ops and their
ranges at m = 10 are timm's (`timm.data.auto_augment`, `_LEVEL_DENOM` 10), in its
"increasing" variants (`rand-inc1`: every op grows stronger with m):

  rotate ±30°, shear_x / shear_y ±0.3, translate_x / translate_y ±0.45 of the side,
  color / contrast / brightness / sharpness a factor 1 ± 0.9, posterize to
  max(4 − ⌊4·m/10⌋, 1) bits, solarize above 256 − ⌊256·m/10⌋, solarize_add +⌊110·m/10⌋ below
  128, and auto_contrast, equalize, invert (no magnitude). Geometric ops fill with grey
  (128), as timm.
"""

from __future__ import annotations

import dataclasses

import grain
import numpy as np
import PIL.Image
import PIL.ImageEnhance
import PIL.ImageOps

FILL = (128, 128, 128)


def _signed(level: float, top: float, rng: np.random.Generator) -> float:
  return (-1.0 if rng.uniform() < 0.5 else 1.0) * level / 10.0 * top


RESAMPLE = {
  "nearest": PIL.Image.NEAREST,
  "bilinear": PIL.Image.BILINEAR,
  "bicubic": PIL.Image.BICUBIC,
}


def _affine(image: PIL.Image.Image, matrix: tuple, resample: int) -> PIL.Image.Image:
  return image.transform(
    image.size, PIL.Image.AFFINE, matrix, resample, fillcolor=FILL[: len(image.getbands())]
  )


def _solarize_add(image: PIL.Image.Image, add: int, threshold: int = 128) -> PIL.Image.Image:
  pixels = np.asarray(image).astype(np.int32)
  return PIL.Image.fromarray(
    np.where(pixels < threshold, np.minimum(pixels + add, 255), pixels).astype(np.uint8)
  )


def _apply(
  name: str,
  image: PIL.Image.Image,
  m: float,
  rng: np.random.Generator,
  resample: int = PIL.Image.NEAREST,
):
  """Op `name` at magnitude `m` (0-10); geometric ops resample with `resample`."""
  width, height = image.size
  enhance = {
    "color": PIL.ImageEnhance.Color,
    "contrast": PIL.ImageEnhance.Contrast,
    "brightness": PIL.ImageEnhance.Brightness,
    "sharpness": PIL.ImageEnhance.Sharpness,
  }
  if name in enhance:
    return enhance[name](image).enhance(1.0 + _signed(m, 0.9, rng))
  if name == "rotate":
    fill = FILL[: len(image.getbands())]
    return image.rotate(_signed(m, 30.0, rng), resample, fillcolor=fill)
  if name == "shear_x":
    return _affine(image, (1, _signed(m, 0.3, rng), 0, 0, 1, 0), resample)
  if name == "shear_y":
    return _affine(image, (1, 0, 0, _signed(m, 0.3, rng), 1, 0), resample)
  if name == "translate_x":
    return _affine(image, (1, 0, _signed(m, 0.45, rng) * width, 0, 1, 0), resample)
  if name == "translate_y":
    return _affine(image, (1, 0, 0, 0, 1, _signed(m, 0.45, rng) * height), resample)
  if name == "posterize":
    return PIL.ImageOps.posterize(image, max(4 - int(4 * m / 10), 1))
  if name == "solarize":
    return PIL.ImageOps.solarize(image, 256 - int(256 * m / 10))
  if name == "solarize_add":
    return _solarize_add(image, int(110 * m / 10))
  return {
    "auto_contrast": PIL.ImageOps.autocontrast,
    "equalize": PIL.ImageOps.equalize,
    "invert": PIL.ImageOps.invert,
  }[name](image)


OPS = (
  "auto_contrast",
  "equalize",
  "invert",
  "rotate",
  "posterize",
  "solarize",
  "solarize_add",
  "color",
  "contrast",
  "brightness",
  "sharpness",
  "shear_x",
  "shear_y",
  "translate_x",
  "translate_y",
)


@dataclasses.dataclass
class RandAugment(grain.transforms.RandomMap):
  """`rand_augment(num_ops=2, magnitude=9, magnitude_std=0.0, prob=0.5,
  interpolation='bicubic')` on a uint8 `image` (module docstring); put it in `data.augment`
  before `preprocess` scales the values."""

  num_ops: int = 2
  magnitude: float = 9.0
  magnitude_std: float = 0.0
  prob: float = 0.5
  interpolation: str = "bicubic"

  def __post_init__(self):
    if not 0 <= self.magnitude <= 10 or self.num_ops < 0 or self.magnitude_std < 0:
      raise ValueError(
        f"rand_augment: num_ops={self.num_ops} must be >= 0, magnitude={self.magnitude} in "
        f"[0, 10] and magnitude_std={self.magnitude_std} >= 0."
      )
    if not 0 <= self.prob <= 1 or self.interpolation not in RESAMPLE:
      raise ValueError(
        f"rand_augment: prob={self.prob} must be in [0, 1] and interpolation="
        f"{self.interpolation!r} one of {tuple(RESAMPLE)}."
      )

  def random_map(self, element, rng: np.random.Generator):
    array = element["image"]
    if array.dtype != np.uint8:
      raise ValueError(f"rand_augment works on uint8 images, got {array.dtype}; put it first.")
    image = PIL.Image.fromarray(array[..., 0] if array.shape[-1] == 1 else array)
    for name in rng.choice(OPS, self.num_ops):
      if rng.uniform() >= self.prob:
        continue  # timm's AugmentOp: this op is skipped
      m = self.magnitude
      if self.magnitude_std > 0:
        m = float(np.clip(rng.normal(self.magnitude, self.magnitude_std), 0.0, 10.0))
      image = _apply(str(name), image, m, rng, RESAMPLE[self.interpolation])
    out = np.asarray(image)
    return {**element, "image": out[..., None] if out.ndim == 2 else out}
