"""Preprocessing and augmentation ops, and the spec strings that name them.

A spec is ops joined by `|`, each a call with literal arguments, e.g.
`"resize(32, 'nearest')|value_range(0, 1)"` or `"random_crop(32, 4)|flip_lr"` (big_vision's
style). `parse(spec)` returns grain transforms; each maps one example (a dict of numpy
arrays) to another. Value ops are here; geometric ones in `image_ops.py`, detection ones in
`detection_ops.py`. Adding an op: write a grain `Map` / `RandomMap` and list it in `OPS`.
"""

from __future__ import annotations

import ast
import dataclasses

import grain
import numpy as np

from lfpe.data import detection_ops, image_ops, randaugment, shape_layout


class Keep(grain.transforms.Map):
  """`keep(*keys)`: keep only these fields."""

  def __init__(self, *keys: str):
    self.keys = keys

  def map(self, element):
    missing = set(self.keys) - set(element)
    if missing:
      raise ValueError(f"keep: fields {sorted(missing)} missing; it has {sorted(element)}.")
    return {k: element[k] for k in self.keys}


@dataclasses.dataclass
class ValueRange(grain.transforms.Map):
  """`value_range(vmin=0, vmax=1, in_min=0, in_max=255)`: linear map to float32 `[vmin, vmax]`."""

  vmin: float = 0.0
  vmax: float = 1.0
  in_min: float = 0.0
  in_max: float = 255.0

  def map(self, element):
    x = (np.asarray(element["image"], np.float32) - self.in_min) / (self.in_max - self.in_min)
    return {**element, "image": (self.vmin + x * (self.vmax - self.vmin)).astype(np.float32)}


@dataclasses.dataclass
class Normalize(grain.transforms.Map):
  """`normalize(mean, std)`: `(image - mean) / std`, per channel (scalars or lists)."""

  mean: float | tuple[float, ...]
  std: float | tuple[float, ...]

  def map(self, element):
    image = np.asarray(element["image"], np.float32)
    mean, std = np.asarray(self.mean, np.float32), np.asarray(self.std, np.float32)
    return {**element, "image": (image - mean) / std}


@dataclasses.dataclass
class Onehot(grain.transforms.Map):
  """`onehot(num_classes, key='label', out='labels')`: adds a float32 one-hot `[num_classes]`."""

  num_classes: int
  key: str = "label"
  out: str = "labels"

  def map(self, element):
    onehot = np.zeros((self.num_classes,), np.float32)
    onehot[int(element[self.key])] = 1.0
    return {**element, self.out: onehot}


class Cast(grain.transforms.Map):
  """Final dtypes for JAX: floats to float32, integers to int32 (uint8 and bool stay)."""

  def map(self, element):
    return {k: _cast(np.asarray(v)) for k, v in element.items()}


def _cast(x: np.ndarray) -> np.ndarray:
  if np.issubdtype(x.dtype, np.floating):
    return x.astype(np.float32)
  if np.issubdtype(x.dtype, np.integer) and x.dtype != np.uint8:
    return x.astype(np.int32)
  if x.dtype == np.uint8 or x.dtype == np.bool_:
    return x
  raise ValueError(f"Field of dtype {x.dtype} cannot enter a batch; drop it with keep(...).")


OPS = {
  "keep": Keep,
  "value_range": ValueRange,
  "normalize": Normalize,
  "onehot": Onehot,
  "resize": image_ops.Resize,
  "resize_small": image_ops.ResizeSmall,
  "central_crop": image_ops.CentralCrop,
  "random_crop": image_ops.RandomCrop,
  "inception_crop": image_ops.InceptionCrop,
  "flip_lr": image_ops.FlipLr,
  "random_erasing": image_ops.RandomErasing,
  "rand_augment": randaugment.RandAugment,
  "boxes": detection_ops.Boxes,
  "redraw": shape_layout.Redraw,
  "resize_pad": detection_ops.ResizePad,
}


def parse(spec: str | None) -> list[grain.transforms.Map | grain.transforms.RandomMap]:
  """The grain transforms named by `spec` (`"op(args)|op|..."`; empty or None: none)."""
  return [_parse_op(part.strip()) for part in (spec or "").split("|") if part.strip()]


def is_random(op) -> bool:
  return isinstance(op, grain.transforms.RandomMap)


def takes_encoded(transforms) -> bool:
  """Whether the first op past field selection decodes the image itself (`TAKES_ENCODED`),
  so the source may hand it the undecoded image."""
  first = next((op for op in transforms if not isinstance(op, Keep)), None)
  return getattr(first, "TAKES_ENCODED", False)


def _parse_op(text: str):
  try:
    node = ast.parse(text, mode="eval").body
    name = node.func.id if isinstance(node, ast.Call) else node.id
    args = [ast.literal_eval(a) for a in node.args] if isinstance(node, ast.Call) else []
    kwargs = {k.arg: ast.literal_eval(k.value) for k in getattr(node, "keywords", [])}
  except (SyntaxError, ValueError, AttributeError) as e:
    why = (
      "its arguments must be literals (quote a string: 'bicubic')"
      if isinstance(e, ValueError)
      else e
    )  # literal_eval's own message names an ast node object
    raise ValueError(
      f"Op {text!r} is not of the form name(literal, ..., key=literal): {why}."
    ) from e
  if name not in OPS:
    raise ValueError(f"Unknown op {name!r} in {text!r}; known ops: {sorted(OPS)}.")
  try:
    return OPS[name](*args, **kwargs)
  except TypeError as e:
    raise ValueError(f"Bad arguments in {text!r}: {e}. {OPS[name].__doc__}") from e


def apply(ops, element: dict, rng: np.random.Generator | None = None) -> dict:
  """Runs `ops` on one example (what grain does per record); `rng` feeds random ops."""
  for op in ops:
    element = op.random_map(element, rng) if is_random(op) else op.map(element)
  return element
