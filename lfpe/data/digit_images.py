"""`digit_images`: scikit-learn's handwritten digits as whole images to generate, pixel by pixel.

For autoregressive generation (002 Sec. 4.1 at CPU scale) on images whose content depends
strongly on absolute position: each digit is centred in its frame, strokes occupy the middle
columns and the border is blank, so a model that knows where a pixel is can predict it far
better than one that does not (the record's no-position control measures how much better).

Each config is an image size S (`8x8`: sklearn's native pixels; `16x16`: upsampled 2x). The
0..16 grey values are resampled bilinearly with half-pixel centres and edge clamping
(`upsample`, as `jax.image.resize(..., "linear")` for upscaling), then quantised to
`LEVELS` grey levels, `round(v * (LEVELS - 1) / 16)`: a pixel is one token of a vocabulary
of `LEVELS` values, stored as its level (0..LEVELS-1, 0 is the blank background).

Splits are those of the `digits` classification dataset (`lfpe.data.digits`: stratified,
1,437 train / 360 test rows): the test images are digits no training image shows.

Features:
  image [S, S, 1] uint8: grey levels 0..LEVELS-1, stored as PNG (lossless).
  label [] int64: the digit (not read by the generation task).
  index [] int32: the row in sklearn's `load_digits()`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base, digits

LEVELS = 8  # grey levels of a pixel: the generation vocabulary
NATIVE = 8  # sklearn's image side


@dataclasses.dataclass(eq=False)
class DigitImagesConfig(tfds.core.BuilderConfig):
  """One image size, a multiple of sklearn's 8 pixels."""

  size: int = 16

  def __post_init__(self):
    if self.size < NATIVE or self.size % NATIVE:
      raise ValueError(f"DigitImagesConfig: size={self.size} must be a multiple of {NATIVE}.")


def interpolation_matrix(n: int, factor: int) -> np.ndarray:
  """`[n * factor, n]` weights of linear interpolation with half-pixel centres, clamped."""
  source = np.clip((np.arange(n * factor) + 0.5) / factor - 0.5, 0, n - 1)
  low = np.minimum(np.floor(source).astype(int), n - 2) if n > 1 else np.zeros(n * factor, int)
  frac = source - low
  out = np.zeros((n * factor, n))
  out[np.arange(n * factor), low] = 1 - frac
  out[np.arange(n * factor), np.minimum(low + 1, n - 1)] += frac
  return out


def upsample(images: np.ndarray, factor: int) -> np.ndarray:
  """Bilinear `factor`x upsampling of `[B, n, n]` images (module doc)."""
  matrix = interpolation_matrix(images.shape[-1], factor)
  return np.einsum("yi,bij,xj->byx", matrix, images, matrix)


def quantise(values: np.ndarray) -> np.ndarray:
  """0..16 grey values -> uint8 levels 0..LEVELS-1."""
  levels = np.round(np.asarray(values) * ((LEVELS - 1) / 16.0))
  return np.clip(levels, 0, LEVELS - 1).astype(np.uint8)


def images(size: int) -> tuple[np.ndarray, np.ndarray]:
  """Every digit as `[1797, size, size, 1]` uint8 levels, and the labels."""
  values, labels = digits.raw()
  return quantise(upsample(values, size // NATIVE))[..., None], labels


class DigitImages(base.ArrayBuilder):
  """TFDS builder of whole digit images in `LEVELS` grey levels; one config per size."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": f"sklearn digits, bilinear upsampling, {LEVELS} grey levels."}
  DESCRIPTION = __doc__
  HOMEPAGE = "https://archive.ics.uci.edu/dataset/80"
  BUILDER_CONFIGS = [
    DigitImagesConfig(name=f"{s}x{s}", description=f"{s}x{s} digits.", size=s) for s in (8, 16)
  ]

  def _features(self):
    size = self.builder_config.size
    return {
      "image": tfds.features.Image(shape=(size, size, 1)),
      "label": tfds.features.ClassLabel(num_classes=10),
      "index": tfds.features.Scalar(np.int32, doc="Row in sklearn's load_digits()."),
    }

  def _load_arrays(self):
    pixels, labels = images(self.builder_config.size)
    return {
      split: {"image": pixels[rows], "label": labels[rows], "index": rows.astype(np.int32)}
      for split, rows in digits.split_indices(labels).items()
    }


def _spec(cfg: DigitImagesConfig) -> base.DatasetSpec:
  return base.DatasetSpec(
    name=f"digit_images/{cfg.name}",
    num_classes=LEVELS,  # the token values a generative model predicts
    image_shape=(cfg.size, cfg.size, 1),
    fields=("image",),
    preprocess="",  # the stored levels
    builder=base.with_config(DigitImages, cfg.name),
  )


# For the data registry (`lfpe.data.builders`): `digit_images/8x8`, `digit_images/16x16`.
SPECS = tuple(_spec(c) for c in DigitImages.BUILDER_CONFIGS)
