"""Stand-ins for catalog datasets that cannot be downloaded here (tests, scripts/first_steps.py).

Each is written as TFDS's own builder writes the real one (array_record; the same name,
version and the features lfpe reads), from fabricated photos, so the loader, the ops and
the trainer meet real-format data at its real sizes.
"""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base


def photo(h: int, w: int, seed: int = 0) -> np.ndarray:
  """`[h, w, 3]` uint8: smooth colour fields with noise, JPEG-typical content (hard on chroma
  at edges)."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[:h, :w] / max(h, w)
  image = np.stack([np.sin(rng.uniform(2, 12) * x + rng.uniform(2, 12) * y) for _ in range(3)], -1)
  return np.clip(127 * (image + 1) + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)


class Imagenet2012(base.ArrayBuilder, skip_registration=True):
  """imagenet2012 5.1.0's features: one JPEG per `(h, w)` of `SIZES` (ImageNet's typical
  sizes; a subclass may set others) in `train` and `validation`, labels `83 i mod 1000`."""

  name = "imagenet2012"
  VERSION = tfds.core.Version("5.1.0")
  SIZES = ((375, 500), (500, 375), (333, 500), (500, 500), (240, 320), (480, 640)) * 2

  def _features(self):
    return {
      "image": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
      "label": tfds.features.ClassLabel(num_classes=1000),
      "file_name": tfds.features.Text(),
    }

  def _load_arrays(self):
    split = {
      "image": [photo(h, w, seed=i) for i, (h, w) in enumerate(self.SIZES)],
      "label": np.arange(len(self.SIZES)) * 83 % 1000,
      "file_name": [f"n{i:08d}.JPEG" for i in range(len(self.SIZES))],
    }
    return {"train": split, "validation": split}
