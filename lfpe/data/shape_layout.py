"""`shape_layout`: which shape is left-most? Content and position, drawn natively at any size.

The resolution benchmark's second edition (experiments/resolution): each scene holds 3-5
shapes of distinct classes (`shapes.SHAPES`, 6 classes) on a textured background, drawn by
the shapes renderer (`shapes.render`: supersampled pixel coverage, continuous positions and
sizes, a background that is a function of the normalised position), so a scene looks alike
at every size and is never resized. The label is the class of the left-most shape (smallest
box centre x). A model must read the classes (content) and where each one is (position):
without positions it can do no better than guessing among the classes present (1/3-1/5).

Difficulty: the left-most shape's centre lies `gap` (a fraction of the image, drawn in
`gap_range`) left of the next one's; smaller gaps are harder, more so at small sizes, and
set where the best encoding sits below the ceiling at the training size.

Stored per example: the image at `size` (the training size), the scene (`background_seed`,
`objects`) and the label. `redraw(S)` (an evaluation op, `lfpe.data.ops`) draws the stored
scene again at S pixels, so an evaluation at any size needs no stored image of that size.
Every example draws from its own generator, `numpy.random.default_rng([seed, split, row])`:
train and test are disjoint draws (`scene_key` hashes a scene; tests check that no test
scene occurs in training). Configs: `full` (20,000 train / 10,000 test), `colour` (the same
with each class in its own hue: content easy, so that position is what is hard) and `small`;
`colour_test_S` and `small_test_S` hold their test scenes drawn at each size S of
`TEST_SIZES` (`at_size`), which the resolution benchmark's evaluations read.
"""

from __future__ import annotations

import colorsys
import dataclasses
import hashlib
from collections.abc import Mapping

import grain
import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base, shapes

SPLITS = ("train", "test")


@dataclasses.dataclass(eq=False)
class ShapeLayoutConfig(tfds.core.BuilderConfig):
  """One shape-layout dataset: image size, split sizes and how scenes are drawn."""

  size: int = 64
  num_train: int = 20_000
  num_test: int = 10_000
  objects: tuple[int, int] = (3, 5)  # shapes per scene, inclusive
  extent: tuple[float, float] = (0.12, 0.3)  # box side range, fraction of the image
  gap_range: tuple[float, float] = (0.02, 0.15)  # left-most centre ahead of the next
  max_overlap: float = 0.2
  class_colours: bool = False  # each class its own hue (content easy; position stays hard)
  seed: int = 0
  splits: tuple[str, ...] = SPLITS  # a test set at another size holds "test" alone

  def __post_init__(self):
    lo, hi = self.objects
    if not 2 <= lo <= hi <= len(shapes.SHAPES):
      raise ValueError(f"ShapeLayoutConfig: objects={self.objects}: need 2 <= lo <= hi <= 6.")
    if not 0 <= self.gap_range[0] <= self.gap_range[1] < 0.5:
      raise ValueError(f"ShapeLayoutConfig: gap_range={self.gap_range} must lie in [0, 0.5).")


def sample_scene(cfg: ShapeLayoutConfig, rng: np.random.Generator) -> dict:
  """One scene (`background_seed`, `objects`) and its label, drawn until the left-most
  shape leads the next by a gap in `gap_range` (rejection, at most 1,000 draws)."""
  layout = shapes.ShapesConfig(name="layout", extent=cfg.extent, max_overlap=cfg.max_overlap)
  for _ in range(1000):
    n = int(rng.integers(cfg.objects[0], cfg.objects[1] + 1))
    boxes = shapes._boxes(layout, n, rng)
    if len(boxes) < cfg.objects[0]:
      continue
    centre = np.sort((boxes[:, 1] + boxes[:, 3]) / 2)
    gap = centre[1] - centre[0]
    if not cfg.gap_range[0] <= gap <= cfg.gap_range[1]:
      continue
    label = rng.permutation(len(shapes.SHAPES))[: len(boxes)]
    hues = label / len(shapes.SHAPES) if cfg.class_colours else rng.uniform(size=len(boxes))
    color = np.asarray(
      [colorsys.hsv_to_rgb(h, rng.uniform(0.5, 1), rng.uniform(0.7, 1)) for h in hues]
    )
    objects = {
      "bbox": boxes.astype(np.float32),
      "label": label,
      "color": np.round(color * 255).astype(np.uint8),
    }
    leftmost = int(np.argmin(boxes[:, 1] + boxes[:, 3]))
    scene = {"background_seed": int(rng.integers(2**62)), "objects": objects}
    return {**scene, "label": int(label[leftmost])}
  raise RuntimeError(f"ShapeLayoutConfig {cfg.name}: no scene met gap_range={cfg.gap_range}.")


def generate(cfg: ShapeLayoutConfig, split: str) -> list[dict]:
  """The scenes of `split`, each from its own generator `[seed, split index, row]`."""
  n = {"train": cfg.num_train, "test": cfg.num_test}[split]
  index = SPLITS.index(split)
  return [sample_scene(cfg, np.random.default_rng([cfg.seed, index, i])) for i in range(n)]


def scene_key(scene: dict) -> str:
  """A hash of a scene's geometry, classes and background: equal scenes, equal keys."""
  objects = scene["objects"]
  parts = (np.asarray(objects["bbox"], np.float32), np.asarray(objects["label"], np.int64))
  digest = hashlib.sha1(int(scene["background_seed"]).to_bytes(8, "little"))
  for part in parts:
    digest.update(part.tobytes())
  return digest.hexdigest()


class Redraw(grain.transforms.Map):
  """`redraw(size)`: the example's scene drawn again at `size` px (its `image` replaced)."""

  def __init__(self, size: int):
    if not isinstance(size, int) or size < 8:
      raise ValueError(f"redraw(size): size={size!r} must be an int >= 8.")
    self.size = size

  def map(self, element: dict) -> dict:
    return {**element, "image": draw(element, self.size)}


def draw(record: Mapping, size: int) -> np.ndarray:
  """The record's stored scene drawn at `size` px (`DatasetSpec.draw`: mixed-resolution
  training draws each example natively at its batch's size, as the tests are drawn)."""
  scene = {"background_seed": record["background_seed"], "objects": record["objects"]}
  return shapes.render(scene, size)


TEST_SIZES = (32, 48, 96, 128, 144, 192)  # the resolution benchmark's other test sizes
FULL = ShapeLayoutConfig(name="full", description="20,000 train / 10,000 test scenes at 64 px.")
COLOUR = ShapeLayoutConfig(
  name="colour",
  description="As `full`, each class drawn in its own hue (content easy).",
  class_colours=True,
)
SMALL = ShapeLayoutConfig(
  name="small", description="512 / 256 scenes (tests, CI).", num_train=512, num_test=256
)


def at_size(config: ShapeLayoutConfig, size: int) -> ShapeLayoutConfig:
  """`<name>_test_<size>`: the test scenes of `config` drawn at `size` px and stored (a scene
  depends on the seed and row, never on the size), so a record's evaluations at that size read
  them instead of drawing them again each time (`redraw(size)` gives the same images)."""
  return dataclasses.replace(
    config,
    name=f"{config.name}_test_{size}",
    description=f"The test scenes of `{config.name}` drawn at {size} px (no training split).",
    size=size,
    splits=("test",),
  )


class ShapeLayout(base.ArrayBuilder):
  """TFDS builder of the shape-layout scenes; one config per dataset size (module doc)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "3-5 shapes of distinct classes; the left-most one's class."}
  DESCRIPTION = __doc__
  BUILDER_CONFIGS = [
    FULL,
    COLOUR,
    SMALL,
    *(at_size(config, size) for config in (COLOUR, SMALL) for size in TEST_SIZES),
  ]

  def _features(self):
    size = self.builder_config.size
    objects = {
      "bbox": tfds.features.BBoxFeature(),
      "label": tfds.features.ClassLabel(names=shapes.SHAPES),
      "color": tfds.features.Tensor(shape=(3,), dtype=np.uint8),
    }
    return {
      "image": tfds.features.Tensor(shape=(size, size, 3), dtype=np.uint8, encoding="zlib"),
      "label": tfds.features.ClassLabel(names=shapes.SHAPES),
      "background_seed": tfds.features.Scalar(np.int64, doc="Seeds the background."),
      "objects": tfds.features.Sequence(objects),
    }

  def _load_arrays(self):
    out = {}
    for split in self.builder_config.splits:
      scenes = generate(self.builder_config, split)
      out[split] = {
        "image": shapes.Rendered(scenes, self.builder_config.size),
        "label": np.asarray([s["label"] for s in scenes], np.int64),
        "background_seed": np.asarray([s["background_seed"] for s in scenes], np.int64),
        "objects": [s["objects"] for s in scenes],
      }
    return out


def _spec(cfg: ShapeLayoutConfig) -> base.DatasetSpec:
  return base.DatasetSpec(
    name=f"shape_layout/{cfg.name}",
    num_classes=len(shapes.SHAPES),
    image_shape=(cfg.size, cfg.size, 3),
    fields=("image", "label", "background_seed", "objects"),
    eval_split="test",
    preprocess="keep('image', 'label')|value_range(0, 1)",  # after `redraw`, which reads the scene
    builder=base.with_config(ShapeLayout, cfg.name),
    draw=draw,
  )


SPECS = tuple(_spec(c) for c in ShapeLayout.BUILDER_CONFIGS)
