"""Detection preprocessing: DETR's inputs from boxes in TFDS's `coco/2017` layout.

TFDS gives `objects: {bbox [n, 4] (ymin, xmin, ymax, xmax) in [0, 1], label [n], is_crowd [n]}`
and `image/id`; `shapes_detection` (shapes.py) has the same layout, with one image per size.

`Detection` (the checked `config.data.detection`) chains the ops that make one example:
  RandomSize (training)  draws the example's size from `train_sizes`; at eval `AtSizes`
                         gives each record once per size of `test_sizes` instead.
  RandomShortSide        (training with `train_side="short"`, instead of RandomSize)
                         draws the shorter side from `train_sizes` and the longer side
                         from the dataset's sizes up to `max_size`: DETR's sizes name the
                         shorter side of images of every aspect ratio.
  Targets                crowd boxes never targets (as DETR; kept apart, `target_crowd`, at
                         evaluation, for COCO's `iscrowd`); boxes checked (inside the image,
                         positive width and height: else ValueError naming `image/id`);
                         (cx, cy, w, h) normalised by the unpadded image, padded to T.
  AtSize                 the image at that size: `image_{size}` drawn natively where the
                         dataset has it, else `image` resized (longer side, aspect kept).
  Crop                   (with RandomShortSide) the drawn window of that image; targets
                         clipped to it, kept where `MIN_VISIBLE` of their area remains.
  (data.preprocess)      value ops, e.g. `value_range(0, 1)`.
  Pad                    zero-pads bottom and right to `max_size`, with the pixel `mask`.
Output, per example (`OUTPUT`): image [S, S, 3] float32 (S = max_size), mask [S, S] bool
(True = padding, DETR's convention), boxes [T, 4] float32, labels [T] int32, target_valid
[T] bool, target_crowd [T] bool (evaluation: crowd boxes after the targets), image_size [2]
int32 (h, w unpadded), image_id [] int32. Eval batches mark their
real examples with `valid [B]` (`mask` is taken by the pixels).

`boxes(K)` and `resize_pad(S)` are the older op-string form (different keys: `box_mask`,
`image_mask` True on image pixels), still the default of `coco/2017` without `data.detection`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import grain
import numpy as np
from absl import logging

from lfpe.data import image_ops


@dataclasses.dataclass
class Boxes(grain.transforms.Map):
  """`boxes(max_boxes)`: `objects` -> fixed-size DETR targets.

  Adds `boxes [K, 4]` (cx, cy, w, h), `box_labels [K]` int32, `box_mask [K]` bool. Crowd
  annotations are dropped (as DETR does); objects past `max_boxes` are cut.
  """

  max_boxes: int

  def map(self, element):
    out = dict(element)
    objects = out.pop("objects")
    keep = ~np.asarray(objects.get("is_crowd", np.zeros(len(objects["label"]), bool)), bool)
    bbox = np.asarray(objects["bbox"], np.float32).reshape(-1, 4)[keep][: self.max_boxes]
    labels = np.asarray(objects["label"])[keep][: self.max_boxes]
    ymin, xmin, ymax, xmax = bbox.T
    n, k = len(bbox), self.max_boxes
    cxcywh = np.stack([(xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin], -1)
    out["boxes"] = np.zeros((k, 4), np.float32)
    out["boxes"][:n] = cxcywh
    out["box_labels"] = np.zeros((k,), np.int32)
    out["box_labels"][:n] = labels
    out["box_mask"] = np.arange(k) < n
    return out


@dataclasses.dataclass
class ResizePad(grain.transforms.Map):
  """`resize_pad(size)`: longer side to `size` (aspect kept), zero-pad to `size x size`.

  Adds `image_mask [size, size]` (bool, True on image pixels, which sit top-left).
  """

  size: int
  method: str = "bilinear"

  def map(self, element):
    image = element["image"]
    h, w = image.shape[:2]
    ratio = self.size / max(h, w)
    nh, nw = max(1, round(h * ratio)), max(1, round(w * ratio))
    image = image_ops.resize_image(image, (nh, nw), self.method)
    padded = np.zeros((self.size, self.size, image.shape[2]), image.dtype)
    padded[:nh, :nw] = image
    mask = np.zeros((self.size, self.size), bool)
    mask[:nh, :nw] = True
    return {**element, "image": padded, "image_mask": mask}


OUTPUT = (
  "image",
  "mask",
  "boxes",
  "labels",
  "target_valid",
  "target_crowd",
  "image_size",
  "image_id",
)
FIELDS = ("train_sizes", "test_sizes", "max_size", "max_targets", "train_side")
SIDES = ("long", "short")  # which side of a training image `train_sizes` give
MIN_VISIBLE = 0.5  # a cropped object stays a target if this fraction of its box remains


@dataclasses.dataclass(frozen=True)
class Limits:
  """What a detection dataset holds: its native sizes (None: any, by resizing) and the most
  objects in one image (None: unknown; an example over `max_targets` then raises)."""

  sizes: tuple[int, ...] | None = None
  max_objects: int | None = None


@dataclasses.dataclass(frozen=True)
class Detection:
  """`config.data.detection`, checked (`create`).

  Attributes:
    train_sizes: image side in pixels; each training example draws one (uniform).
    test_sizes: evaluation sees every example once at each of these sizes.
    max_size: the canvas side every image is padded to (static shapes for jit), the same
      in training and evaluation.
    max_targets: T, the number of target slots.
    train_side: "long" (default): training images are squares of side `train_sizes` (or,
      resized, have that longer side). "short": `train_sizes` give the shorter side, as
      DETR's scales do, and the longer side is drawn from the dataset's sizes between it
      and `max_size`, by cropping a natively drawn square (`RandomShortSide`, `Crop`); so
      a held-out test size is new as a shorter side while every row and column index
      along one axis is still seen in training, as in 002's Table 2 on COCO.
    longer_sides: the longer sides "short" draws from (the dataset's sizes <= max_size).
    name: the dataset, for error messages.
  """

  train_sizes: tuple[int, ...]
  test_sizes: tuple[int, ...]
  max_size: int
  max_targets: int
  train_side: str = "long"
  longer_sides: tuple[int, ...] = ()
  name: str = ""

  @classmethod
  def create(cls, cfg, name: str, limits: Limits) -> Detection:
    """From `data.detection` (a mapping of `FIELDS`); ValueError naming the bad field."""
    unknown = set(cfg) - set(FIELDS)
    if unknown:
      raise ValueError(f"`data.detection` has unknown fields {sorted(unknown)}; use {FIELDS}.")
    sizes = {k: _sizes(k, cfg.get(k), limits, name) for k in FIELDS[:2]}
    largest = max(sizes["train_sizes"] + sizes["test_sizes"])
    max_size = largest if cfg.get("max_size") is None else _positive("max_size", cfg["max_size"])
    if max_size < largest:
      raise ValueError(f"`data.detection.max_size`={max_size} is below the largest size {largest}.")
    max_targets = _positive("max_targets", cfg.get("max_targets"))
    if limits.max_objects and max_targets < limits.max_objects:
      raise ValueError(
        f"`data.detection.max_targets`={max_targets}: {name} has up to {limits.max_objects} "
        "objects per image; use at least that."
      )
    side = cfg.get("train_side") or "long"
    if side not in SIDES:
      raise ValueError(f"`data.detection.train_side`={side!r}; use one of {SIDES}.")
    longer = ()
    if side == "short":
      if not limits.sizes:
        raise ValueError(
          f"`data.detection.train_side`='short' crops images drawn natively at several sizes;"
          f" {name} is resized to each size. Use train_side='long'."
        )
      longer = tuple(sorted(s for s in limits.sizes if s <= max_size))
    return cls(
      **sizes,
      max_size=max_size,
      max_targets=max_targets,
      train_side=side,
      longer_sides=longer,
      name=name,
    )

  def ops(self, train: bool, preprocess: list) -> list:
    """One example's transforms, `preprocess` (value ops) before the padding."""
    targets = Targets(self.max_targets, self.name, keep_crowd=not train)
    if not train:
      return [targets, AtSize(), *preprocess, Pad(self.max_size)]
    if self.train_side == "short":
      size = RandomShortSide(self.train_sizes, self.longer_sides)
      return [size, targets, AtSize(), Crop(), *preprocess, Pad(self.max_size)]
    return [RandomSize(self.train_sizes), targets, AtSize(), *preprocess, Pad(self.max_size)]


def _positive(field: str, value) -> int:
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
    raise ValueError(f"`data.detection.{field}`={value!r} must be a positive int.")
  return value


def _sizes(field: str, value, limits: Limits, name: str) -> tuple[int, ...]:
  if not isinstance(value, list | tuple) or not value:
    raise ValueError(f"`data.detection.{field}`={value!r} must be a non-empty tuple of sizes.")
  sizes = tuple(_positive(field, v) for v in value)
  missing = sorted(set(sizes) - set(limits.sizes or sizes))
  if missing:
    raise ValueError(
      f"`data.detection.{field}`={value!r}: {name} is not drawn at {missing}; it has sizes "
      f"{limits.sizes} (rebuild it with more sizes to use others)."
    )
  return sizes


class AtSizes(Sequence):
  """Evaluation: every record of `source` once per size (size-major), with its `size`."""

  def __init__(self, source: Sequence, sizes: tuple[int, ...]):
    self._source, self._sizes = source, sizes

  def __len__(self) -> int:
    return len(self._source) * len(self._sizes)

  def __getitem__(self, index: int) -> dict:
    size, row = divmod(index, len(self._source))
    return {**self._source[row], "size": np.int32(self._sizes[size])}


@dataclasses.dataclass
class RandomSize(grain.transforms.RandomMap):
  """Training: this example's `size` [] int32, drawn uniformly from `sizes`."""

  sizes: tuple[int, ...]

  def random_map(self, element, rng: np.random.Generator):
    return {**element, "size": np.int32(rng.choice(self.sizes))}


@dataclasses.dataclass
class RandomShortSide(grain.transforms.RandomMap):
  """Training with `train_side="short"`: the shorter side S uniform over `sizes`, the longer
  side L uniform over the `longer` sizes >= S, the axis that is shorter and the window's
  offset along it uniform. Adds `size` (L: the square drawn) and `crop [4]` int32 (y0, x0,
  height, width) in its pixels; S = L gives the whole square."""

  sizes: tuple[int, ...]
  longer: tuple[int, ...]

  def random_map(self, element, rng: np.random.Generator):
    short = int(rng.choice(self.sizes))
    long = int(rng.choice([s for s in self.longer if s >= short]))
    offset = int(rng.integers(long - short + 1))
    crop = (offset, 0, short, long) if rng.integers(2) else (0, offset, long, short)
    return {**element, "size": np.int32(long), "crop": np.asarray(crop, np.int32)}


class Crop(grain.transforms.Map):
  """The `crop` window (y0, x0, height, width) of `image`, with its `image_size`. Targets are
  clipped to the window and renormalised by it; one stays a target where at least
  `MIN_VISIBLE` of its box remains (DETR's crop keeps any sliver; a shape cut to a sliver
  no longer shows its class), kept targets first."""

  def map(self, element):
    out = dict(element)
    y0, x0, h, w = (int(v) for v in out.pop("crop"))
    full_h, full_w = out["image"].shape[:2]
    out["image"] = out["image"][y0 : y0 + h, x0 : x0 + w]
    out["image_size"] = np.asarray([h, w], np.int32)
    cx, cy, bw, bh = np.moveaxis(out["boxes"] * [full_w, full_h, full_w, full_h], -1, 0)
    x_lo, x_hi = np.clip([cx - bw / 2, cx + bw / 2], x0, x0 + w) - x0
    y_lo, y_hi = np.clip([cy - bh / 2, cy + bh / 2], y0, y0 + h) - y0
    visible = (x_hi - x_lo) * (y_hi - y_lo) >= MIN_VISIBLE * bw * bh
    keep = np.flatnonzero(out["target_valid"] & visible)  # valid boxes have positive area (Targets)
    boxes = np.stack(
      [(x_lo + x_hi) / 2 / w, (y_lo + y_hi) / 2 / h, (x_hi - x_lo) / w, (y_hi - y_lo) / h], -1
    )
    out["boxes"], out["labels"] = np.zeros_like(out["boxes"]), np.zeros_like(out["labels"])
    out["boxes"][: len(keep)], out["labels"][: len(keep)] = boxes[keep], element["labels"][keep]
    out["target_valid"] = np.arange(len(out["target_valid"])) < len(keep)
    return out


def usable_boxes(bbox: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
  """(`bbox [n, 4]` (ymin, xmin, ymax, xmax) clipped to the image, which of them to keep):
  DETR's rule (`ConvertCocoPolysToMask`), which drops boxes with no positive
  height or width (real COCO train2017 has two of zero height). Drops are logged with their
  count; a non-finite coordinate is an error naming the example."""
  if not np.isfinite(bbox).all():
    i = int(np.flatnonzero(~np.isfinite(bbox).all(-1))[0])
    raise ValueError(f"{where}: box {i} (ymin, xmin, ymax, xmax)={bbox[i].tolist()} is not finite.")
  bbox = np.clip(bbox, 0.0, 1.0)
  keep = (bbox[:, 2] > bbox[:, 0]) & (bbox[:, 3] > bbox[:, 1])
  if not keep.all():
    logging.warning(
      "%s: dropped %d of %d boxes with no positive height or width inside the image "
      "(DETR drops them too): %s",
      where,
      int((~keep).sum()),
      len(bbox),
      bbox[~keep].tolist(),
    )
  return bbox, keep


@dataclasses.dataclass
class Targets(grain.transforms.Map):
  """`objects`, `image/id` -> `boxes [T, 4]` (cx, cy, w, h), `labels [T]`, `target_valid [T]`,
  `target_crowd [T]`, `image_id`. Boxes are normalised by the image, so they hold at every
  size. Crowd boxes are never targets (as DETR); with `keep_crowd` (evaluation) they follow
  the targets, marked `target_crowd` (not `target_valid`: no loss or match sees them), as
  many as the free slots hold, so that COCO's evaluation ignores the detections on them, as
  the official one does with its `iscrowd` annotations."""

  max_targets: int
  name: str = ""
  keep_crowd: bool = False

  def map(self, element):
    out = dict(element)
    objects, image_id = out.pop("objects"), int(out.pop("image/id"))
    where = f"example image/id={image_id}" + (f" of {self.name}" if self.name else "")
    bbox = np.asarray(objects["bbox"], np.float32).reshape(-1, 4)
    labels = np.asarray(objects["label"], np.int64).reshape(-1)
    crowd = np.asarray(objects.get("is_crowd", np.zeros(len(labels))), bool).reshape(-1)
    real, real_labels = usable(bbox[~crowd], labels[~crowd], where)
    n, t = len(real), self.max_targets
    if n > t:
      raise ValueError(f"{where} has {n} boxes, more than `data.detection.max_targets`={t}.")
    crowds, crowd_labels = usable(bbox[crowd], labels[crowd], where)
    crowds, crowd_labels = (crowds, crowd_labels) if self.keep_crowd else (crowds[:0], labels[:0])
    bbox = np.concatenate([real, crowds[: t - n]])
    ymin, xmin, ymax, xmax = bbox.T
    m = len(bbox)
    out["boxes"] = np.zeros((t, 4), np.float32)
    out["boxes"][:m] = np.stack(
      [(xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin], -1
    )
    out["labels"] = np.zeros((t,), np.int32)
    out["labels"][:m] = np.concatenate([real_labels, crowd_labels[: t - n]])
    out["target_valid"] = np.arange(t) < n
    out["target_crowd"] = (np.arange(t) >= n) & (np.arange(t) < m)
    out["image_id"] = np.int64(image_id)
    return out


def usable(bbox: np.ndarray, labels: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
  """`bbox` and `labels` of the boxes `usable_boxes` keeps."""
  bbox, keep = usable_boxes(bbox, where)
  return bbox[keep], labels[keep]


class AtSize(grain.transforms.Map):
  """`image` at the example's `size` (longer side) and `image_size [2]` (h, w).

  `image_{size}` when the dataset draws that size natively (the other sizes are dropped),
  else `image` resized bilinearly (float32) with its aspect ratio kept.
  """

  def map(self, element):
    size = int(element["size"])
    native = {k for k in element if k.startswith("image_") and k[6:].isdigit()}
    out = {k: v for k, v in element.items() if k not in native and k != "size"}
    if f"image_{size}" in element:
      out["image"] = element[f"image_{size}"]
    elif "image" in element:
      h, w = element["image"].shape[:2]
      ratio = size / max(h, w)
      shape = (max(1, round(h * ratio)), max(1, round(w * ratio)))
      out["image"] = image_ops.resize_image(element["image"], shape)
    else:
      raise ValueError(f"No image at size {size}: the example has {sorted(native)}.")
    out["image_size"] = np.asarray(out["image"].shape[:2], np.int32)
    return out


@dataclasses.dataclass
class Pad(grain.transforms.Map):
  """Zero-pads `image` at the bottom and right to `[size, size, C]`; adds `mask [size, size]`
  bool, True on padding (DETR's convention)."""

  size: int

  def map(self, element):
    image = element["image"]
    h, w, c = image.shape
    if max(h, w) > self.size:
      raise ValueError(f"pad: image {image.shape} is larger than the canvas {self.size}.")
    padded = np.zeros((self.size, self.size, c), image.dtype)
    padded[:h, :w] = image
    mask = np.ones((self.size, self.size), bool)
    mask[:h, :w] = False
    return {**element, "image": padded, "mask": mask}
