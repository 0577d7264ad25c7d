"""`digits`: scikit-learn's 1,797 real 8x8 handwritten digits as a TFDS dataset.

The data ships with scikit-learn (`sklearn.datasets.load_digits`), so it builds offline in
well under a second. Pixels are scaled from sklearn's 0..16 to 0..255 as
`round(v * 255 / 16)` and stored as 8x8x1 PNGs. The split is stratified and fixed:
for each class, 36 rows picked with `numpy.random.default_rng(0)` form `test` (360 rows, 36
per class), the other 1,437 rows form `train`. Each example keeps its sklearn row in `index`.
Upsampling (e.g. to 32x32) is a preprocessing op: `data.image_size` with `resize`.
"""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base
from lfpe.extras import require

SPLIT_SEED = 0
TEST_PER_CLASS = 36


def raw() -> tuple[np.ndarray, np.ndarray]:
  """sklearn's digits as stored: float images `[1797, 8, 8]` in 0..16 and labels `[1797]`."""
  datasets = require("sklearn.datasets", "experiments", "Building the digits datasets")
  digits = datasets.load_digits()
  return digits.images, digits.target.astype(np.int64)


def load() -> tuple[np.ndarray, np.ndarray]:
  """sklearn's digits as uint8 images `[1797, 8, 8, 1]` in 0..255 and labels `[1797]`."""
  images, labels = raw()
  return np.round(images * (255.0 / 16.0)).astype(np.uint8)[..., None], labels


def split_indices(labels: np.ndarray) -> dict[str, np.ndarray]:
  """Sorted sklearn rows of each split: `TEST_PER_CLASS` random rows per class are test."""
  rng = np.random.default_rng(SPLIT_SEED)
  test = [rng.permutation(np.flatnonzero(labels == c))[:TEST_PER_CLASS] for c in range(10)]
  test = np.sort(np.concatenate(test))
  train = np.setdiff1d(np.arange(len(labels)), test)
  return {"train": train, "test": test}


class Digits(base.ArrayBuilder):
  """TFDS builder of scikit-learn's 8x8 handwritten digits (1,437 train / 360 test)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Stratified 1,437 / 360 split, pixels scaled to 0..255."}
  DESCRIPTION = __doc__
  HOMEPAGE = "https://archive.ics.uci.edu/dataset/80"

  def _features(self):
    return {
      "image": tfds.features.Image(shape=(8, 8, 1)),
      "label": tfds.features.ClassLabel(num_classes=10),
      "index": tfds.features.Scalar(np.int32, doc="Row in sklearn's load_digits()."),
    }

  def _load_arrays(self):
    images, labels = load()
    return {
      split: {"image": images[rows], "label": labels[rows], "index": rows.astype(np.int32)}
      for split, rows in split_indices(labels).items()
    }


SPEC = base.DatasetSpec(
  name="digits",
  num_classes=10,
  image_shape=(8, 8, 1),
  preprocess="resize({size}, 'nearest')|value_range(0, 1)",
  builder=Digits,
)
