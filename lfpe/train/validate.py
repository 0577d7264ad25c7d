"""Checks a training config before anything is built or compiled.

Every problem raises ValueError naming the config field (`config.<path>`) and
what would fix it. The task checks its own fields (`task.validate(config)`); `config.model`
is checked once by the model itself when `task.create_model(config)` builds it (the
trainer does that right after this, before any data is read); the data section by lfpe.data's
`validate_data_config`; the trainer checks, after `jax.eval_shape`, that sharded
parameter dimensions divide the mesh (sharding.check_divisible), still before
compiling.
"""

from __future__ import annotations

import re
from typing import Any

import jax

from lfpe import tasks
from lfpe.errors import did_you_mean
from lfpe.models import fields
from lfpe.train import evaluation, flexi, init_from, optim, sharding

# What the trainer computes in: a model's dtypes less float16, which would need loss scaling.
COMPUTE_DTYPES = tuple(d for d in fields.DTYPES if d != "float16")
# Fields every config must have (tests/train/test_validate.py lists the checks).
REQUIRED = (
  "seed",
  "total_steps",
  "batch_size",
  "checkpoint_every",
  "eval_every",
  "log_every",
  "keep_checkpoints",
  "compute_dtype",
  "task",
  "task.name",
  "mesh",
  "mesh.data",
  "mesh.model",
  "mesh.fsdp",
  "optim",
  "optim.name",
  "optim.lr",
  "schedule",
  "schedule.name",
  "schedule.warmup_steps",
  "data",
  "model_name",
  "model",
)
# Key types for dropout (config.dropout_prng): unsafe_rbg is left out, its fold_in (one per
# step) is not a good hash.
DROPOUT_PRNGS = ("threefry2x32", "rbg")
_MISSING = object()


def _get(config: Any, path: str) -> Any:
  value = config
  for key in path.split("."):
    value = value.get(key, _MISSING) if hasattr(value, "get") else _MISSING
    if value is _MISSING:
      return _MISSING
  return value


def _fail(path: str, message: str, value: Any) -> None:
  raise ValueError(f"config.{path} {message}, got {value!r}.")


def _integer(config: Any, path: str, minimum: int) -> int:
  value = _get(config, path)
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    _fail(path, f"must be an integer >= {minimum}", value)
  return value


def _number(
  config: Any, path: str, low: float, high: float = float("inf"), *, open_low: bool = False
) -> float:
  value = _get(config, path)
  ok = isinstance(value, (int, float)) and not isinstance(value, bool)
  if not ok or not (value > low if open_low else value >= low) or value > high:
    bound = f"> {low}" if open_low else f">= {low}"
    _fail(
      path, f"must be a number {bound}" + (f" and <= {high}" if high < float("inf") else ""), value
    )
  return value


def _choice(config: Any, path: str, choices) -> str:
  value = _get(config, path)
  if value not in choices:
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    _fail(path, f"must be one of {tuple(choices)}{hint}", value)
  return value


def validate_config(config: Any, num_devices: int | None = None, *, check_data: bool = True):
  """The task of the training `config`, built once its fields are checked (ValueError naming
  the first bad field otherwise).

  `num_devices` defaults to all devices; `check_data=False` skips the data
  section (for callers that bring their own loader and data config).
  """
  for path in REQUIRED:
    if _get(config, path) is _MISSING:
      raise ValueError(f"config.{path} is missing; every config needs it (see configs/).")
  _validate_loop(config)
  flexi.sizes(config)  # FlexiViT's patch sizes, before any data is read
  _validate_optimizer(config)
  _validate_mesh(config, jax.device_count() if num_devices is None else num_devices)
  _choice(config, "task.name", tasks.REGISTRY)
  if check_data:
    _validate_data(config.data, config.batch_size)
  init_from.check(config)
  variants = evaluation.configs(config)  # the named evaluations, before the task reads them
  task = tasks.get(config.task)
  task.validate(config)
  _validate_evals(config, variants, task, check_data)
  return task


def _validate_data(data: Any, batch_size: int) -> None:
  from lfpe.data import validate_data_config  # noqa: PLC0415 (heavy import, only here)

  validate_data_config(data, global_batch_size=batch_size)


def _validate_evals(config: Any, variants: dict[str, Any], task: Any, check_data: bool) -> None:
  """Each named evaluation: its fields, period, data (as `config.data` is checked) and model
  variant, built from the training data as `evaluation.build` builds it (its grid meets the
  evaluation's data when traced, `program.check_forward`); errors name `config.evals.NAME`."""
  for name, variant in variants.items():
    if not name:
      continue
    evaluation.period(config, name)
    try:
      if check_data:
        _validate_data(variant.data, config.batch_size)
      task.create_model(evaluation.on_training_data(config, variant))
    except ValueError as e:
      raise ValueError(f"config.evals.{name}: {e}") from None


def _validate_loop(config: Any) -> None:
  _integer(config, "seed", 0)
  if "seeds" in config:
    _integer(config, "seeds", 0)
  reset = _get(config, "reset_data_position")
  if reset is not _MISSING and not isinstance(reset, bool):
    _fail("reset_data_position", "must be True or False", reset)
  _integer(config, "total_steps", 1)
  for path in ("batch_size", "checkpoint_every", "eval_every", "log_every", "keep_checkpoints"):
    _integer(config, path, 1)
  if "eval_batch_size" in config:
    _integer(config, "eval_batch_size", 1)
  _choice(config, "compute_dtype", COMPUTE_DTYPES)
  dtype = _get(config, "model.dtype")  # every task builds its model in compute_dtype
  if dtype is not _MISSING and dtype is not None and dtype != config.compute_dtype:
    _fail(
      "model.dtype",
      f"differs from config.compute_dtype={config.compute_dtype!r}, which every model computes "
      "in; set only config.compute_dtype",
      dtype,
    )
  _integer(config, "schedule.warmup_steps", 0)  # longer than total_steps: clipped to it
  if "report_every" in config:
    _integer(config, "report_every", 0)
  if "dropout_prng" in config:
    _choice(config, "dropout_prng", DROPOUT_PRNGS)


def _patterns(config: Any, path: str) -> None:
  """A tuple of regular expressions (of parameter paths), if the field is set."""
  value = _get(config, path)
  if value in (_MISSING, None):
    return
  if isinstance(value, str) or not isinstance(value, (tuple, list)):
    _fail(path, "must be a tuple of regular expressions, e.g. ('^params/Transformer/pos',)", value)
  for pattern in value:
    try:
      re.compile(pattern)
    except (re.error, TypeError) as e:
      _fail(path, f"holds {pattern!r}, not a regular expression ({e})", value)


def _validate_optimizer(config: Any) -> None:
  name = _choice(config, "optim.name", optim.OPTIMIZERS)
  _number(config, "optim.lr", 0.0, open_low=True)
  for path in ("optim.weight_decay", "optim.grad_clip_norm"):
    if _get(config, path) is not _MISSING:
      _number(config, path, 0.0)
  if name == "adamw":
    for path in ("optim.b1", "optim.b2"):
      if _get(config, path) is not _MISSING:
        _number(config, path, 0.0, 1.0)
  multipliers = _get(config, "optim.lr_multipliers")
  if multipliers not in (_MISSING, None):
    if not hasattr(multipliers, "items") or not all(
      isinstance(v, (int, float)) and v >= 0 for v in dict(multipliers).values()
    ):
      _fail("optim.lr_multipliers", "must map top-level module names to factors >= 0", multipliers)
  for field in ("trainable", "freeze", "no_decay"):
    _patterns(config, f"optim.{field}")
  if _get(config, "optim.ema_decay") is not _MISSING:
    _number(config, "optim.ema_decay", 0.0, 1.0)
    if config.optim.ema_decay >= 1.0:
      _fail("optim.ema_decay", "must be below 1 (0: off)", config.optim.ema_decay)
  schedule = _choice(config, "schedule.name", optim.SCHEDULES)
  if schedule == "warmup_cosine" and _get(config, "schedule.end_lr_factor") is not _MISSING:
    _number(config, "schedule.end_lr_factor", 0.0, 1.0)
  if schedule == "warmup_rsqrt" and _get(config, "schedule.timescale") is not _MISSING:
    _number(config, "schedule.timescale", 0.0, open_low=True)


def _validate_mesh(config: Any, num_devices: int) -> None:
  _integer(config, "mesh.model", 1)
  data = _get(config, "mesh.data")
  if data != -1 and (not isinstance(data, int) or isinstance(data, bool) or data < 1):
    _fail("mesh.data", "must be an integer >= 1, or -1 (every device mesh.model leaves)", data)
  data, model = sharding.mesh_shape(config.mesh, num_devices)
  if data * model > num_devices:
    cpu = jax.default_backend() == "cpu"
    _fail(
      "mesh",
      f"asks for data*model={data * model} devices but only {num_devices} exist; "
      "lower mesh.data or mesh.model"
      + (
        f" (on a CPU, XLA_FLAGS=--xla_force_host_platform_device_count={data * model} "
        "before the command gives that many devices)"
        if cpu
        else ""
      ),
      {"data": data, "model": model},
    )
  if jax.process_count() > 1 and data * model != num_devices:
    _fail(
      "mesh",
      f"must use all {num_devices} devices when running on several processes",
      {"data": data, "model": model},
    )
  heads = _get(config, "model.num_heads")
  if isinstance(heads, int) and heads % model:
    divisors = [d for d in range(1, heads + 1) if heads % d == 0]
    _fail(
      "mesh.model",
      f"must divide config.model.num_heads={heads} (attention heads are split over the model "
      f"axis); use one of {divisors}",
      model,
    )
  if not isinstance(_get(config, "mesh.fsdp"), bool):
    _fail("mesh.fsdp", "must be True or False", _get(config, "mesh.fsdp"))
  for path in ("batch_size", "eval_batch_size"):
    size = _get(config, path)
    if size is not _MISSING and size % data:
      _fail(
        path,
        f"(the global batch) must be divisible by the data axis size {data} "
        f"(mesh.data); use e.g. {max(data, round(size / data) * data)}",
        size,
      )
