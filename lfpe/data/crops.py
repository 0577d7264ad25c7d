"""`photo_crops`: square crops of two real photographs, for autoregressive image generation.

The photographs ship with scikit-learn (`sklearn.datasets.load_sample_images`: `china.jpg`
and `flower.jpg`, 427x640x3, as Pillow decodes them), so the dataset builds offline in
seconds. The config is the crop size S (`8x8`, `16x16`, `32x32`).

Split by columns, so that test bits per dim are measured on pixels never trained on: of
each photograph, `train` crops lie wholly in columns [0, 480) (the left 75 %), `test` crops
wholly in columns [480 + S, 640); the S columns between them are never used, so no pixel
is shared and no test crop touches the boundary. Rows are not split (all 427 are used).

Each split holds `num / 2` crops of each photograph at distinct top-left corners, drawn
uniformly without replacement from `numpy.random.default_rng([seed, split, photo])`
(split 0 is train, 1 test): the build is deterministic from the config's `seed`.

Features:
  image [S, S, 3] uint8: `photograph[y : y + S, x : x + S]`, stored as PNG (lossless).
  photo [] int64: which photograph (`PHOTOS`: 0 china, 1 flower).
  y, x [] int32: the crop's top-left pixel in the photograph.
The pipeline reads only `image` and keeps its uint8 values (no preprocessing ops): a model
predicts each sub-pixel as one of 256 classes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base
from lfpe.extras import require

PHOTOS = ("china", "flower")
SPLITS = ("train", "test")
TRAIN_FRACTION = 0.75  # the left share of each photograph's columns that train crops use


@dataclasses.dataclass(eq=False)
class CropsConfig(tfds.core.BuilderConfig):
  """One crops dataset: the crop size and how many crops each split holds."""

  crop_size: int = 16
  num_train: int = 16_384
  num_test: int = 1_024
  seed: int = 0

  def __post_init__(self):
    if self.crop_size < 1:
      raise ValueError(f"CropsConfig: crop_size={self.crop_size} must be >= 1.")
    for n in (self.num_train, self.num_test):
      if n <= 0 or n % len(PHOTOS):
        raise ValueError(f"CropsConfig: split sizes ({n}) must be positive multiples of 2.")


def photographs() -> np.ndarray:
  """The two photographs as uint8 `[2, 427, 640, 3]`, in the order of `PHOTOS`."""
  datasets = require("sklearn.datasets", "experiments", "Building the photo crops dataset")
  sample = datasets.load_sample_images()
  names = [f.rsplit("/", 1)[-1].removesuffix(".jpg") for f in sample.filenames]
  return np.stack([sample.images[names.index(p)] for p in PHOTOS])


def columns(split: str, width: int, size: int) -> tuple[int, int]:
  """`[start, stop)`: the columns that the crops of `split` lie in (module doc)."""
  boundary = int(width * TRAIN_FRACTION)
  return (0, boundary) if split == "train" else (boundary + size, width)


def positions(cfg: CropsConfig, split: str, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
  """`photo`, `y`, `x` of each crop of `split` in photographs of `shape` `(H, W, ...)`."""
  size, (height, width) = cfg.crop_size, shape[:2]
  start, stop = columns(split, width, size)
  rows, cols = height - size + 1, stop - start - size + 1
  per_photo = {"train": cfg.num_train, "test": cfg.num_test}[split] // len(PHOTOS)
  if rows <= 0 or cols <= 0 or per_photo > rows * cols:
    raise ValueError(
      f"photo_crops: {per_photo} {size}x{size} crops per photograph do not fit in the "
      f"{split} region ({height} rows, columns [{start}, {stop}))."
    )
  out = {"photo": [], "y": [], "x": []}
  for photo in range(len(PHOTOS)):
    rng = np.random.default_rng([cfg.seed, SPLITS.index(split), photo])
    corner = rng.choice(rows * cols, per_photo, replace=False)
    out["photo"].append(np.full(per_photo, photo, np.int64))
    out["y"].append((corner // cols).astype(np.int32))
    out["x"].append((corner % cols + start).astype(np.int32))
  return {k: np.concatenate(v) for k, v in out.items()}


def crop(photos: np.ndarray, photo, y, x, size: int) -> np.ndarray:
  """The crops `photos[photo, y : y + size, x : x + size]`: `[n, size, size, C]`."""
  span = np.arange(size)
  ys = np.asarray(y)[:, None, None] + span[None, :, None]
  xs = np.asarray(x)[:, None, None] + span[None, None, :]
  return photos[np.asarray(photo)[:, None, None], ys, xs]


def generate(cfg: CropsConfig, split: str, photos: np.ndarray) -> dict[str, np.ndarray]:
  """The whole split as numpy arrays: `image`, `photo`, `y`, `x` (photograph-major order)."""
  where = positions(cfg, split, photos.shape[1:])
  return {"image": crop(photos, **where, size=cfg.crop_size), **where}


def _config(size: int, num_train: int, num_test: int, use: str) -> CropsConfig:
  return CropsConfig(
    name=f"{size}x{size}",
    description=f"{num_train:,} train / {num_test:,} test {size}x{size} crops ({use}).",
    crop_size=size,
    num_train=num_train,
    num_test=num_test,
  )


class PhotoCrops(base.ArrayBuilder):
  """TFDS builder of photograph crops; one config per crop size (module doc)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Crops of sklearn's two sample photographs, split by columns."}
  DESCRIPTION = __doc__
  HOMEPAGE = (
    "https://scikit-learn.org/stable/modules/generated/sklearn.datasets.load_sample_images.html"
  )
  BUILDER_CONFIGS = [
    _config(8, 4_096, 512, "tests, CI"),
    _config(16, 16_384, 1_024, "the generation record"),
    _config(32, 16_384, 1_024, "larger crops"),
  ]

  def _features(self):
    size = self.builder_config.crop_size
    return {
      "image": tfds.features.Image(shape=(size, size, 3)),
      "photo": tfds.features.ClassLabel(names=PHOTOS),
      "y": tfds.features.Scalar(np.int32, doc="Top row of the crop in the photograph."),
      "x": tfds.features.Scalar(np.int32, doc="Left column of the crop in the photograph."),
    }

  def _load_arrays(self):
    photos = photographs()
    return {split: generate(self.builder_config, split, photos) for split in SPLITS}


def _spec(cfg: CropsConfig) -> base.DatasetSpec:
  builder = base.with_config(PhotoCrops, cfg.name)
  size = cfg.crop_size
  return base.DatasetSpec(
    name=f"photo_crops/{cfg.name}",
    num_classes=256,  # the sub-pixel values a generative model predicts
    image_shape=(size, size, 3),
    fields=("image",),
    preprocess="",  # uint8 pixels as stored
    builder=builder,
  )


# For the data registry (`lfpe.data.builders`): `photo_crops/8x8`, `/16x16`, `/32x32`.
SPECS = tuple(_spec(c) for c in PhotoCrops.BUILDER_CONFIGS)
