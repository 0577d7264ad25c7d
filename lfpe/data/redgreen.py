"""Red-green square datasets: the thesis's fully controlled position tasks (003 Sec. 4, 5.1).

Every image is black with one green and one red square. What the label depends on
is fixed by the task, so a model can only solve it with the right kind of location
information:

* `direction`:   green square left (0) or right (1) of the red one (003 Fig. 2, Table 1).
* `direction4`:  left/right x above/below, 4 classes (the pretraining task of 003 Sec. 5.1):
                 label = 2 * (green right of red) + (green below red).
* `distance`:    regression of the signed offset from green to red, `(dx, dy)` in pixels
                 (003 Sec. 4.1, R^2 of Eq. 5).
* `absolute`:    both squares in the upper half (0) or both in the lower half (1) (Table 3).
* `color_shift`: `absolute`, but the test split draws the squares in colours that never
                 appear in training or validation (Table 4, Fig. 4).

The thesis gives neither image, square nor patch size. Defaults here: 32x32 images, 4x4
squares whose top-left corners lie on a 4-pixel grid (`stride`), so that with the
study's 4x4 patches each square is exactly one token of an 8x8 grid: no patch ever holds
parts of both squares and a model without position information is at chance on
`direction` (the thesis's `None` row). Squares never overlap; "left of" means no
horizontal overlap (likewise "above"). Labels are balanced per split. Generation is
deterministic given the config's `seed`.

Built offline as array_record (no TensorFlow needed):
  `load(name, split)` -> dict of numpy arrays, building the dataset once under `data_dir`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from lfpe.data import base

TASKS = ("direction", "direction4", "distance", "absolute", "color_shift")
NUM_CLASSES = {"direction": 2, "direction4": 4, "absolute": 2, "color_shift": 2, "distance": 0}
RED, GREEN = (255, 0, 0), (0, 255, 0)
SHIFTED = ((255, 255, 0), (0, 128, 255))  # test colours of `color_shift`: yellow, azure
SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(eq=False)
class RedGreenConfig(tfds.core.BuilderConfig):
  """One red-green dataset: its task, geometry, split sizes and colours."""

  task: str = "direction"
  image_size: int = 32
  square_size: int = 4
  stride: int = 4  # square corners lie on multiples of this many pixels
  num_train: int = 5000
  num_validation: int = 1000
  num_test: int = 1000
  colors: tuple = (GREEN, RED)  # (green-square colour, red-square colour)
  test_colors: tuple | None = None  # colours of the test split (`color_shift`)
  seed: int = 0

  def __post_init__(self):
    if self.task not in TASKS:
      raise ValueError(f"RedGreenConfig: task={self.task!r}; use one of {TASKS}.")
    if not 0 < self.square_size <= self.image_size // 2:
      raise ValueError(
        f"RedGreenConfig: square_size={self.square_size} must be in "
        f"[1, image_size // 2 = {self.image_size // 2}]."
      )
    if self.stride < 1 or self.image_size % 2:
      raise ValueError("RedGreenConfig: stride must be >= 1 and image_size even.")

  def split_size(self, split: str) -> int:
    return {"train": self.num_train, "validation": self.num_validation, "test": self.num_test}[
      split
    ]

  def split_colors(self, split: str) -> tuple:
    return self.test_colors if split == "test" and self.test_colors else self.colors


def _label(task: str, g: np.ndarray, r: np.ndarray, s: int, half: int) -> np.ndarray:
  """Label of each candidate pair (top-left corners `[n, 2]` as (y, x)); -1 if invalid."""
  dy, dx = (r - g).T  # offset from green to red
  apart_x, apart_y = np.abs(dx) >= s, np.abs(dy) >= s
  ok = apart_x | apart_y  # squares do not overlap
  if task == "direction":
    return np.where(apart_x, (dx < 0).astype(int), -1)
  if task == "direction4":
    return np.where(apart_x & apart_y, 2 * (dx < 0) + (dy < 0), -1)
  if task in ("absolute", "color_shift"):
    upper = (g[:, 0] + s <= half) & (r[:, 0] + s <= half)
    lower = (g[:, 0] >= half) & (r[:, 0] >= half)
    return np.where(ok & upper, 0, np.where(ok & lower, 1, -1))
  return np.where(ok, 0, -1)  # distance: any non-overlapping pair


def sample_positions(cfg: RedGreenConfig, n: int, rng: np.random.Generator):
  """Top-left corners of `n` balanced (green, red) pairs: `[n, 2]` each (y, x), and labels."""
  k = NUM_CLASSES[cfg.task] or 1
  corners = np.arange(0, cfg.image_size - cfg.square_size + 1, cfg.stride)
  want = np.arange(n) % k
  rng.shuffle(want)
  green, red = np.zeros((n, 2), int), np.zeros((n, 2), int)
  for c in range(k):
    idx = np.flatnonzero(want == c)
    got_g, got_r = [], []
    while sum(len(x) for x in got_g) < len(idx):
      g, r = rng.choice(corners, (2, 4 * len(idx) + 64, 2))
      keep = _label(cfg.task, g, r, cfg.square_size, cfg.image_size // 2) == c
      got_g.append(g[keep])
      got_r.append(r[keep])
    green[idx] = np.concatenate(got_g)[: len(idx)]
    red[idx] = np.concatenate(got_r)[: len(idx)]
  return green, red, want


def render(green: np.ndarray, red: np.ndarray, cfg: RedGreenConfig, colors: tuple) -> np.ndarray:
  """Black `[n, S, S, 3]` uint8 images with the two squares drawn at their corners."""
  n, s = len(green), cfg.square_size
  img = np.zeros((n, cfg.image_size, cfg.image_size, 3), np.uint8)
  span = np.arange(s)
  for corner, color in zip((green, red), colors, strict=True):
    ys = corner[:, :1, None] + span[None, :, None]  # [n, s, 1]
    xs = corner[:, 1:, None] + span[None, None, :]  # [n, 1, s]
    img[np.arange(n)[:, None, None], ys, xs] = np.asarray(color, np.uint8)
  return img


def generate(cfg: RedGreenConfig, split: str) -> dict[str, np.ndarray]:
  """The whole split as numpy arrays: image, label, distance (dx, dy), green, red."""
  rng = np.random.default_rng([cfg.seed, SPLITS.index(split), TASKS.index(cfg.task)])
  green, red, label = sample_positions(cfg, cfg.split_size(split), rng)
  return {
    "image": render(green, red, cfg, cfg.split_colors(split)),
    "label": label.astype(np.int64),
    "distance": (red - green)[:, ::-1].astype(np.float32),  # (dx, dy) green -> red
    "green": green.astype(np.int32),
    "red": red.astype(np.int32),
  }


def _config(task: str, **kw) -> RedGreenConfig:
  desc = {
    "direction": "green left (0) / right (1) of red",
    "direction4": "2 * (green right of red) + (green below red)",
    "distance": "regress (dx, dy) from green to red in pixels",
    "absolute": "both squares in the upper (0) / lower (1) half",
    "color_shift": "`absolute` with unseen square colours in the test split",
  }[task]
  return RedGreenConfig(name=task, task=task, description=desc, **kw)


class RedGreen(base.ArrayBuilder):
  """TFDS builder of the red-green datasets; one config per task (see module doc)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release (003 Sec. 4 tasks)."}
  DESCRIPTION = __doc__
  BUILDER_CONFIGS = [_config(t, test_colors=SHIFTED if t == "color_shift" else None) for t in TASKS]

  def _features(self) -> dict[str, tfds.features.FeatureConnector]:
    cfg = self.builder_config
    feats = {
      "image": tfds.features.Image(shape=(cfg.image_size, cfg.image_size, 3)),
      "distance": tfds.features.Tensor(shape=(2,), dtype=np.float32),
      "green": tfds.features.Tensor(shape=(2,), dtype=np.int32),
      "red": tfds.features.Tensor(shape=(2,), dtype=np.int32),
      "index": tfds.features.Scalar(np.int32, doc="Row in generation order."),
    }
    if NUM_CLASSES[cfg.task]:
      feats["label"] = tfds.features.ClassLabel(num_classes=NUM_CLASSES[cfg.task])
    return feats

  def _load_arrays(self) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for split in SPLITS:
      arrays = generate(self.builder_config, split)
      arrays["index"] = np.arange(len(arrays["image"]), dtype=np.int32)
      out[split] = {k: v for k, v in arrays.items() if k in self.info.features}
    return out


def _spec(task: str) -> base.DatasetSpec:
  builder = base.with_config(RedGreen, task)
  target = "label" if NUM_CLASSES[task] else "distance"
  return base.DatasetSpec(
    name=f"red_green/{task}",
    num_classes=NUM_CLASSES[task],
    image_shape=(32, 32, 3),
    fields=("image", target),
    eval_split="test",
    preprocess="value_range(0, 1)",
    builder=builder,
  )


# The default configs, for the data registry (`lfpe.data.builders`): `red_green/direction`, ...
SPECS = tuple(_spec(t) for t in TASKS)


def load(
  name: str, split: str, data_dir: str, config: RedGreenConfig | None = None
) -> dict[str, np.ndarray]:
  """A whole split as stacked numpy arrays in generation order, building it once.

  Args:
    name: a task in `TASKS` (its default config), ignored when `config` is given.
    split: `train`, `validation` or `test`.
    data_dir: the TFDS data directory (array_record files under `red_green/NAME/`).
    config: a custom `RedGreenConfig` (other image / square sizes); give it a unique name.
  """
  builder = RedGreen(config=config or name, data_dir=data_dir)
  builder.download_and_prepare()
  source = builder.as_data_source(split=split)
  rows = [source[i] for i in range(len(source))]
  rows.sort(key=lambda r: int(r["index"]))
  return {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0] if k != "index"}
