"""The `config.data` fields, their defaults, and their validation.

Fields of `default_config()`:
  name: a key of `builders.DATASETS` (`digits`, `cifar10`, `imagenet2012`, ...).
  data_dir: where TFDS datasets live (default: $LFPE_DATA_DIR, else ~/tensorflow_datasets).
  train_split, eval_split: TFDS split strings (None: the dataset's defaults).
  image_size: the square size the model sees (None: the native size). It fills `{size}`
    in the ops; for `digits` the default preprocessing upsamples to it (nearest).
  preprocess: ops run on every example, train and eval (None: the dataset's default). Must
    be deterministic.
  augment: ops run on training examples only, before `preprocess` (e.g.
    `"random_crop(8, 1)|flip_lr"`); may be random, seeded per example.
  eval_preprocess: ops run on evaluation examples only, before `preprocess`; deterministic
    (e.g. `"resize_small(256)|central_crop(224)"`, the standard ImageNet evaluation; a named
    evaluation may set its own, `config.evals.NAME.data.eval_preprocess`).
  worker_count: grain worker processes for training (0: in the main process). With workers,
    grain batches inside each worker (worker w the records w, w + W, ... of the order), so
    the batches depend on the count, which a workdir therefore keeps.
  epoch_orders: how a run's seed seeds grain's shuffle (`memory.sampler_seed`): 'grain'
    (the default, what every run so far trained with: grain shuffles epoch e with seed + e,
    so seed s + 1's epoch e is seed s's epoch e + 1) or 'independent' (the seed
    hashed first: no two seeds share an order; the choice for new seed studies).
  train_sizes: None, or mixed-resolution training: each training batch is resized (nearest)
    to a size drawn uniformly from these (one size per batch, the same on every process),
    or, for a dataset that draws itself (`DatasetSpec.draw`: `shape_layout`; needs
    `cache`), drawn natively at that size; evaluation stays at `image_size`. Each size
    compiles the train step once.
  naflex: None, or NaFlex packed batches (`lfpe.resolution.pack`, SigLIP 2's): `{patch,
    max_tokens, sizes}`; each training example is resized (bilinear) to an (h, w) of `sizes`
    drawn per example from (seed, batch, row), so one batch mixes sizes and aspect ratios,
    and every batch becomes `image = {patches, index, shape, valid}` of `max_tokens` tokens.
    One compile serves every mix of sizes. Evaluation packs its images at their own size:
    its budget grows to their grid where that is larger (`packing.eval_naflex`).
  cache: decode every record of the split once and keep it in memory (small datasets such
    as digits: the per-example PNG decoding otherwise dominates a tiny model's step); in
    training each process keeps only the records its shard reads. With
    deterministic ops and no workers, training batches are then gathered from the transformed
    split in grain's own order (the same batches and checkpoint state: lfpe/data/memory.py).
  detection: None, or DETR inputs (detection_ops.py) from a dataset with boxes:
    `{train_sizes, test_sizes, max_size, max_targets, train_side}` (`detection_config`).
    Filled in by `default_config` for detection datasets (`builders.DETECTION`); `coco/2017`
    opts in.
    Then `image_size` stays None, `augment` empty, and `preprocess` defaults to
    `value_range(0, 1)`.
There is no shuffle buffer: grain shuffles the whole split (a new permutation each epoch).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import ml_collections
from ml_collections import config_dict

from lfpe.data import base, builders, detection_ops, memory, ops


def default_data_dir() -> str:
  return os.environ.get("LFPE_DATA_DIR") or os.path.expanduser("~/tensorflow_datasets")


def default_config(name: str = "digits") -> ml_collections.ConfigDict:
  """The `config.data` block with every field at its default."""
  return ml_collections.ConfigDict(
    {
      "name": name,
      "data_dir": default_data_dir(),
      "train_split": config_dict.placeholder(str),
      "eval_split": config_dict.placeholder(str),
      "image_size": config_dict.placeholder(int),
      "preprocess": config_dict.placeholder(str),
      "augment": "",
      "eval_preprocess": "",
      "worker_count": 0,
      "epoch_orders": "grain",
      "cache": False,
      "train_sizes": config_dict.placeholder(tuple),
      "naflex": None,
      "detection": _default_detection(name),
    }
  )


def detection_config(
  train_sizes: tuple[int, ...],
  test_sizes: tuple[int, ...] | None = None,
  max_size: int | None = None,
  max_targets: int = 100,
  train_side: str = "long",
) -> ml_collections.ConfigDict:
  """A `data.detection` block; `test_sizes` default to `train_sizes`, `max_size` (None) to
  the largest size of both; `train_side` says which side `train_sizes` give
  (`detection_ops.Detection`)."""
  return ml_collections.ConfigDict(
    {
      "train_sizes": tuple(train_sizes),
      "test_sizes": tuple(test_sizes or train_sizes),
      "max_size": max_size if max_size is not None else config_dict.placeholder(int),
      "max_targets": max_targets,
      "train_side": train_side,
    }
  )


def detection_info(data: ml_collections.ConfigDict) -> tuple[int, tuple[int, int], int]:
  """`(num_classes, (H, W) of the padded images, max targets T)` of a detection `data`."""
  resolved = resolve(data)
  if resolved.detection is None:
    raise ValueError(f"`data.detection` is not set: {data.name!r} gives no detection inputs.")
  size = resolved.detection.max_size
  return resolved.spec.num_classes, (size, size), resolved.detection.max_targets


def _default_detection(name: str) -> ml_collections.ConfigDict | None:
  """Detection datasets: every size they hold, in training and evaluation."""
  limits = builders.DETECTION.get(name)
  return detection_config(limits.sizes, max_targets=limits.max_objects) if limits else None


@dataclasses.dataclass(frozen=True)
class Resolved:
  """`config.data` with the dataset's defaults filled in and the ops parsed."""

  spec: base.DatasetSpec
  data_dir: str
  train_split: str
  eval_split: str
  image_size: int | None
  preprocess: list
  augment: list
  worker_count: int
  eval_preprocess: list = dataclasses.field(default_factory=list)
  epoch_orders: str = "grain"
  cache: bool = False
  detection: detection_ops.Detection | None = None
  train_sizes: tuple[int, ...] | None = None
  naflex: NaFlex | None = None

  def split(self, train: bool) -> str:
    return self.train_split if train else self.eval_split

  def ops(self, train: bool) -> list:
    """Field selection, augment (train) or eval_preprocess (eval), preprocess, final dtype cast
    (detection: its ops, `preprocess` among them, then the fields of `detection_ops.OUTPUT`)."""
    if self.detection is not None:
      return [
        *self.detection.ops(train, self.preprocess),
        ops.Keep(*detection_ops.OUTPUT),
        ops.Cast(),
      ]
    return [
      ops.Keep(*self.spec.fields),
      *(self.augment if train else self.eval_preprocess),
      *self.preprocess,
      ops.Cast(),
    ]


def resolve(data: ml_collections.ConfigDict) -> Resolved:
  """Validates `data` (ValueError naming the field and the fix) and fills in defaults."""
  spec = builders.get_spec(data.name)
  if not isinstance(data.data_dir, str) or not data.data_dir:
    raise ValueError(f"`data.data_dir`={data.data_dir!r} must be a directory path.")
  size = data.image_size
  if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
    raise ValueError(f"`data.image_size`={size!r} must be a positive int (or None: native).")
  size = size or (spec.image_shape[0] if spec.image_shape else None)
  worker_count = data.get("worker_count", 0)
  if not isinstance(worker_count, int) or worker_count < 0:
    raise ValueError(f"`data.worker_count`={worker_count!r} must be an int >= 0 (0: no workers).")
  epoch_orders = data.get("epoch_orders", "grain")
  if epoch_orders not in memory.EPOCH_ORDERS:
    raise ValueError(
      f"`data.epoch_orders`={epoch_orders!r} is unknown; use one of {memory.EPOCH_ORDERS}."
    )
  detection = _detection(data, spec)
  default = "value_range(0, 1)" if detection else spec.preprocess
  preprocess = _parse("preprocess", data.preprocess or default, size)
  eval_preprocess = _parse("eval_preprocess", data.get("eval_preprocess", ""), size)
  for field, parsed in (("preprocess", preprocess), ("eval_preprocess", eval_preprocess)):
    random_ops = [type(op).__name__ for op in parsed if ops.is_random(op)]
    if random_ops:
      raise ValueError(
        f"`data.{field}` has random ops {random_ops}; evaluation must be deterministic, so "
        "move them to `data.augment` (training only)."
      )
  return Resolved(
    spec=spec,
    data_dir=data.data_dir,
    train_split=data.train_split or spec.train_split,
    eval_split=data.eval_split or spec.eval_split,
    image_size=data.image_size,
    preprocess=preprocess,
    augment=_parse("augment", data.get("augment", ""), size),
    worker_count=worker_count,
    eval_preprocess=eval_preprocess,
    epoch_orders=epoch_orders,
    cache=bool(data.get("cache", False)),
    detection=detection,
    train_sizes=_train_sizes(data, detection),
    naflex=_naflex(data, detection),
  )


@dataclasses.dataclass(frozen=True)
class NaFlex:
  """`data.naflex`, checked: the patch side, tokens per example, training (h, w) sizes."""

  patch: int
  max_tokens: int
  sizes: tuple[tuple[int, int], ...]


def _naflex(data: ml_collections.ConfigDict, detection) -> NaFlex | None:
  """`data.naflex` checked (ValueError naming the field and the fix), or None."""
  given = data.get("naflex")
  if given is None:
    return None
  if detection is not None or data.get("train_sizes"):
    raise ValueError(
      "`data.naflex` packs classification batches of mixed sizes by itself; unset "
      "`data.train_sizes` (and use no `data.detection`)."
    )
  return naflex(given)


def naflex(given: Any, field: str = "data.naflex") -> NaFlex:
  """A `data.naflex` value (at `field`) checked: ValueError naming the field and the fix."""
  example = f"e.g. {field} = dict(patch=8, max_tokens=24, sizes=((32, 32), (16, 48)))"
  if not hasattr(given, "keys"):
    raise ValueError(
      f"`{field}`={given!r} must be a dict, {example} (on the command line "
      f'--config.{field}="dict(patch=8, max_tokens=24, sizes=((32, 32),))").'
    )
  given = dict(given)
  positive = lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0
  fields = {"patch", "max_tokens", "sizes"}
  unknown, missing = sorted(set(given) - fields), sorted(fields - set(given))
  if unknown or missing:
    wrong = f"unknown {unknown}" if unknown else f"missing {missing}"
    raise ValueError(f"`{field}`={given!r}: {wrong}; it takes {sorted(fields)}, {example}.")
  if not (positive(given["patch"]) and positive(given["max_tokens"])):
    raise ValueError(f"`{field}`={given!r} needs positive ints patch, max_tokens; {example}.")
  pair = lambda s: isinstance(s, tuple | list) and len(s) == 2 and all(map(positive, s))
  sizes = given["sizes"]
  if not isinstance(sizes, tuple | list) or not sizes or not all(map(pair, sizes)):
    raise ValueError(
      f"`{field}.sizes`={sizes!r} must be (h, w) pairs, sizes=((32, 32),) for one size; {example}."
    )
  return NaFlex(given["patch"], given["max_tokens"], tuple(map(tuple, sizes)))


def _train_sizes(data: ml_collections.ConfigDict, detection) -> tuple[int, ...] | None:
  """`data.train_sizes` checked: None, or positive ints (not with `data.detection`)."""
  sizes = data.get("train_sizes")
  if sizes is None:
    return None
  if detection is not None:
    raise ValueError(
      "`data.train_sizes` is for classification; with `data.detection` use "
      "`data.detection.train_sizes`."
    )
  sizes = tuple(sizes) if isinstance(sizes, (tuple, list)) else (sizes,)
  if not sizes or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in sizes):
    raise ValueError(
      f"`data.train_sizes`={data.train_sizes!r} must be positive ints, e.g. (24, 32, 48)."
    )
  return sizes


def _detection(
  data: ml_collections.ConfigDict, spec: base.DatasetSpec
) -> detection_ops.Detection | None:
  """`data.detection` checked against the dataset; None for other configs."""
  limits = builders.DETECTION.get(spec.name)
  if data.get("detection") is None:
    if limits:
      raise ValueError(
        f"{spec.name!r} is a detection dataset: set `data.detection` "
        f"(default_config({spec.name!r}) has one)."
      )
    return None
  if not limits and "objects" not in spec.fields:
    raise ValueError(f"`data.detection` is set, but {spec.name!r} has no boxes (`objects`).")
  if data.image_size is not None or data.get("augment") or data.get("eval_preprocess"):
    raise ValueError(
      "With `data.detection`, leave `data.image_size` None (sizes are "
      "`data.detection.train_sizes` / `test_sizes`) and `data.augment` and "
      "`data.eval_preprocess` empty."
    )
  return detection_ops.Detection.create(data.detection, spec.name, limits or detection_ops.Limits())


def validate_data_config(
  data: ml_collections.ConfigDict,
  *,
  global_batch_size: int | None = None,
  mesh: jax.sharding.Mesh | None = None,
) -> Resolved:
  """Checks `config.data` (and the batch against the mesh) before anything is built."""
  resolved = resolve(data)
  if global_batch_size is not None:
    check_batch(global_batch_size, mesh)
  return resolved


def check_batch(global_batch_size: int, mesh: jax.sharding.Mesh | None) -> None:
  """The global batch must split evenly over the mesh's `data` axis and the processes."""
  if not isinstance(global_batch_size, int) or global_batch_size <= 0:
    raise ValueError(f"`batch_size`={global_batch_size!r} must be a positive int.")
  if mesh is not None and "data" not in mesh.shape:
    raise ValueError(f"The mesh needs a 'data' axis to shard batches over; it has {mesh.shape}.")
  for what, n in (
    ("the mesh's 'data' axis", mesh.shape["data"] if mesh else 1),
    ("the process count", jax.process_count()),
  ):
    if global_batch_size % n:
      raise ValueError(
        f"`batch_size`={global_batch_size} must be a multiple of {what} ({n}); use e.g. "
        f"{max(n, round(global_batch_size / n) * n)}."
      )


def _parse(field: str, spec: str, size: int | None) -> list:
  if "{size}" in spec:
    if size is None:
      raise ValueError(f"`data.{field}` uses {{size}}: set `data.image_size` (images vary).")
    spec = spec.replace("{size}", str(size))
  try:
    return ops.parse(spec)
  except ValueError as e:
    raise ValueError(f"`data.{field}`={spec!r}: {e}") from e
