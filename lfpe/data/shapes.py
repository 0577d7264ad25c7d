"""`shapes_detection`: procedurally drawn detection scenes, rendered natively at several sizes.

Each example is a scene: 0-8 filled shapes (`SHAPES`, 6 classes) of random size (box sides
0.15-0.45 of the image, aspect 3/4-4/3), colour and position, fully inside the image, on a
textured background (smooth noise or stripes between two muted colours; shapes are bright).
Boxes may overlap: the shared part of two boxes is at most `max_overlap` of the smaller one,
so no shape is hidden; later shapes are drawn over earlier ones. A shape fills its box
(touches all four sides), so the box is exact.

The scene is stored in normalised geometry, and drawn at every size of the config
(`image_32`, ..., `image_64`) from it, never resized: pixel coverage is supersampled
(4x4 per pixel) and the background is a continuous function of the normalised position, so
a scene looks alike at every size. `render(scene, size)` redraws it at any size.

Features (the box layout of TFDS's `coco/2017`, so both read through `detection_ops.py`):
  image/id [] int64: row in generation order, unique within the split.
  image_{S} [S, S, 3] uint8: the scene drawn at S pixels, for each S in `sizes`.
  background_seed [] int64: seeds the background (`render` needs it).
  objects: a sequence of {bbox [4] float32 (ymin, xmin, ymax, xmax) in [0, 1];
    label (index into SHAPES); area [] float32: the shape's own area as a fraction of the
    image (unoccluded; x H x W for COCO's pixels); color [3] uint8}.
COCO's pixel box `[x, y, w, h]` at size S is `[xmin, ymin, xmax - xmin, ymax - ymin] * S`.

Every example draws from its own generator, `numpy.random.default_rng([seed, split, row])`:
the build is deterministic from the config's `seed`, and train and test are disjoint draws.
Configs: `full` (20,000 train / 2,000 test) and `small` (512 / 128, for tests and CI).
"""

from __future__ import annotations

import colorsys
import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base, detection_ops

# Whether box coordinates (a, b) in [-1, 1]^2 (x right, y down) lie inside each shape; every
# shape touches all four sides of its box. Disks and rings are ellipses in non-square boxes.
INSIDE = {
  "square": lambda a, b: np.maximum(np.abs(a), np.abs(b)) <= 1,
  "disk": lambda a, b: a * a + b * b <= 1,
  "triangle": lambda a, b: (np.abs(a) <= (b + 1) / 2) & (b <= 1),  # apex top middle
  "cross": lambda a, b: (
    (np.maximum(np.abs(a), np.abs(b)) <= 1) & (np.minimum(np.abs(a), np.abs(b)) <= 1 / 3)
  ),  # arms 1/3 of the box wide
  "ring": lambda a, b: (a * a + b * b <= 1) & (a * a + b * b >= 1 / 4),
  "diamond": lambda a, b: np.abs(a) + np.abs(b) <= 1,
}
SHAPES = tuple(INSIDE)
# Area of each shape as a fraction of its box (cross arms 1/3 of the box wide, ring hole 1/2).
AREA = (1.0, np.pi / 4, 0.5, 5 / 9, 3 * np.pi / 16, 0.5)
SPLITS = ("train", "test")
SUPERSAMPLE = 4  # samples per pixel side
GRID = 5  # background noise: a GRID x GRID lattice over the image, bilinear in between


@dataclasses.dataclass(eq=False)
class ShapesConfig(tfds.core.BuilderConfig):
  """One shapes dataset: rendered sizes, split sizes, and how scenes are drawn."""

  sizes: tuple[int, ...] = (32, 40, 48, 56, 64)
  num_train: int = 20_000
  num_test: int = 2_000
  min_objects: int = 1
  max_objects: int = 8
  empty_rate: float = 0.02  # probability that an image has no object at all
  extent: tuple[float, float] = (0.15, 0.45)  # box side range, fraction of the image
  max_overlap: float = 0.3
  seed: int = 0

  def __post_init__(self):
    if not self.sizes or min(self.sizes) < 8:
      raise ValueError(f"ShapesConfig: sizes={self.sizes} must be non-empty, each >= 8 px.")
    if not 0 <= self.min_objects <= self.max_objects:
      raise ValueError("ShapesConfig: need 0 <= min_objects <= max_objects.")
    if not 0 < self.extent[0] <= self.extent[1] <= 0.75:
      raise ValueError(f"ShapesConfig: extent={self.extent} must satisfy 0 < lo <= hi <= 0.75.")


def _muted(rng: np.random.Generator) -> np.ndarray:
  return np.asarray(colorsys.hsv_to_rgb(rng.uniform(), rng.uniform(0, 0.5), rng.uniform(0.1, 0.5)))


def background(seed: int, size: int) -> np.ndarray:
  """The background `[size, size, 3]` float (0..255): a function of the position in [0, 1]."""
  rng = np.random.default_rng(seed)
  low, high = _muted(rng) * 255, _muted(rng) * 255
  u = (np.arange(size) + 0.5) / size  # pixel centres
  if rng.uniform() < 0.5:  # Smooth noise: bilinear interpolation of a random lattice.
    hat = np.maximum(0, 1 - np.abs(u[:, None] * (GRID - 1) - np.arange(GRID)))  # [size, GRID]
    t = hat @ rng.uniform(size=(GRID, GRID)) @ hat.T
  else:  # Stripes: 1.5 to 4 periods across the image, any angle.
    freq, angle, phase = rng.uniform(1.5, 4), rng.uniform(0, np.pi), rng.uniform(0, 2 * np.pi)
    along = np.add.outer(u * np.sin(angle), u * np.cos(angle))  # [y, x] -> y sin + x cos
    t = 0.5 + 0.5 * np.sin(2 * np.pi * freq * along + phase)
  return low + t[..., None] * (high - low)


def _draw(image: np.ndarray, box: np.ndarray, label: int, color: np.ndarray) -> None:
  """Blends shape `label` in `box` (normalised) into `image [S, S, 3]` by pixel coverage."""
  size, k = image.shape[0], SUPERSAMPLE
  ymin, xmin, ymax, xmax = np.asarray(box, np.float64)
  top, left = int(ymin * size), int(xmin * size)
  bottom, right = min(size, int(np.ceil(ymax * size))), min(size, int(np.ceil(xmax * size)))
  ys = (top + (np.arange((bottom - top) * k) + 0.5) / k) / size  # sample centres, normalised
  xs = (left + (np.arange((right - left) * k) + 0.5) / k) / size
  a = (xs - (xmin + xmax) / 2) / ((xmax - xmin) / 2)
  b = (ys - (ymin + ymax) / 2) / ((ymax - ymin) / 2)
  inside = INSIDE[SHAPES[label]](a[None, :], b[:, None])
  cover = inside.reshape(bottom - top, k, right - left, k).mean((1, 3))[..., None]
  patch = image[top:bottom, left:right]
  patch += cover * (color - patch)


def render(scene: dict, size: int) -> np.ndarray:
  """`scene` (`background_seed` and `objects` as stored) drawn at `size`: uint8 `[S, S, 3]`."""
  image = background(int(scene["background_seed"]), size)
  objects = scene["objects"]
  for box, label, color in zip(objects["bbox"], objects["label"], objects["color"], strict=True):
    _draw(image, box, int(label), np.asarray(color, np.float64))
  return np.round(image).clip(0, 255).astype(np.uint8)


def _overlap(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
  """Shared area of `box [..., 4]` with each of `boxes [k, 4]` over the smaller area: `[..., k]`."""
  lo = np.maximum(box[..., None, :2], boxes[:, :2])
  hi = np.minimum(box[..., None, 2:], boxes[:, 2:])
  shared = np.prod(np.clip(hi - lo, 0, None), -1)
  area = lambda x: (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1])
  return shared / np.minimum(area(box)[..., None], area(boxes))


def _boxes(cfg: ShapesConfig, n: int, rng: np.random.Generator) -> np.ndarray:
  """Up to `n` boxes `[k, 4]` (ymin, xmin, ymax, xmax); each the first of 64 candidates that
  overlaps the earlier ones by at most `max_overlap` (a crowded image may get fewer)."""
  boxes = np.zeros((0, 4))
  for _ in range(n):
    side = rng.uniform(*cfg.extent, 64)
    stretch = np.sqrt(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3), 64)))  # sqrt(h / w)
    h, w = side * stretch, side / stretch
    y, x = rng.uniform(0, 1 - h), rng.uniform(0, 1 - w)
    candidates = np.stack([y, x, y + h, x + w], -1)
    ok = np.all(_overlap(candidates, boxes) <= cfg.max_overlap, -1) if len(boxes) else [True]
    if np.any(ok):
      boxes = np.concatenate([boxes, candidates[np.argmax(ok)][None]])
  return boxes


def sample_scene(cfg: ShapesConfig, rng: np.random.Generator) -> dict:
  """One scene: `background_seed` and `objects` (bbox, label, area, color) as stored."""
  empty = rng.uniform() < cfg.empty_rate
  n = 0 if empty else int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
  bbox = _boxes(cfg, n, rng).astype(np.float32)
  k = len(bbox)
  label = rng.integers(0, len(SHAPES), k)
  hsv = zip(rng.uniform(size=k), rng.uniform(0.5, 1, k), rng.uniform(0.7, 1, k), strict=True)
  color = np.asarray([colorsys.hsv_to_rgb(*c) for c in hsv]).reshape(-1, 3)
  box_area = (bbox[:, 2] - bbox[:, 0]) * (bbox[:, 3] - bbox[:, 1])
  objects = {
    "bbox": bbox,
    "label": label,
    "area": (np.asarray(AREA)[label] * box_area).astype(np.float32),
    "color": np.round(color * 255).astype(np.uint8),
  }
  return {"background_seed": int(rng.integers(2**62)), "objects": objects}


def generate(cfg: ShapesConfig, split: str) -> list[dict]:
  """The scenes of `split`, each from its own generator `[seed, split index, row]`."""
  n = {"train": cfg.num_train, "test": cfg.num_test}[split]
  index = SPLITS.index(split)
  return [sample_scene(cfg, np.random.default_rng([cfg.seed, index, i])) for i in range(n)]


class Rendered(Sequence):
  """The scenes of a split drawn at one size, on demand (a split is never all in memory)."""

  def __init__(self, scenes: list[dict], size: int):
    self._scenes, self._size = scenes, size

  def __len__(self) -> int:
    return len(self._scenes)

  def __getitem__(self, i: int) -> np.ndarray:
    return render(self._scenes[i], self._size)


class ShapesDetection(base.ArrayBuilder):
  """TFDS builder of the shapes detection scenes; one config per dataset size (module doc)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "6 shapes, 0-8 per scene, drawn natively at 32-64 px."}
  DESCRIPTION = __doc__
  BUILDER_CONFIGS = [
    ShapesConfig(name="full", description="20,000 train / 2,000 test scenes."),
    ShapesConfig(
      name="small", description="512 / 128 scenes (tests, CI).", num_train=512, num_test=128
    ),
  ]

  def _features(self):
    objects = {
      "bbox": tfds.features.BBoxFeature(),
      "label": tfds.features.ClassLabel(names=SHAPES),
      "area": np.float32,
      "color": tfds.features.Tensor(shape=(3,), dtype=np.uint8),
    }
    images = {  # zlib, not PNG: 3x faster to write and smaller for these textures.
      f"image_{s}": tfds.features.Tensor(shape=(s, s, 3), dtype=np.uint8, encoding="zlib")
      for s in self.builder_config.sizes
    }
    return {
      "image/id": tfds.features.Scalar(np.int64, doc="Row in generation order."),
      **images,
      "background_seed": tfds.features.Scalar(np.int64, doc="Seeds the background."),
      "objects": tfds.features.Sequence(objects),
    }

  def _load_arrays(self):
    out = {}
    for split in SPLITS:
      scenes = generate(self.builder_config, split)
      out[split] = {
        "image/id": np.arange(len(scenes), dtype=np.int64),
        **{f"image_{s}": Rendered(scenes, s) for s in self.builder_config.sizes},
        "background_seed": np.asarray([s["background_seed"] for s in scenes], np.int64),
        "objects": [s["objects"] for s in scenes],
      }
    return out


def _spec(cfg: ShapesConfig) -> base.DatasetSpec:
  builder = base.with_config(ShapesDetection, cfg.name)
  return base.DatasetSpec(
    name=f"shapes_detection/{cfg.name}",
    num_classes=len(SHAPES),
    image_shape=None,
    fields=("image/id", "objects", *(f"image_{s}" for s in cfg.sizes)),
    preprocess="value_range(0, 1)",
    builder=builder,
  )


# For the data registry (`lfpe.data.builders`): the specs, and what `data.detection` may ask.
SPECS = tuple(_spec(c) for c in ShapesDetection.BUILDER_CONFIGS)
LIMITS = {
  f"shapes_detection/{c.name}": detection_ops.Limits(c.sizes, c.max_objects)
  for c in ShapesDetection.BUILDER_CONFIGS
}
