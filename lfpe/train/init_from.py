"""`config.init_from`: a run that starts from another run's parameters (big_vision's
`model_init` / `load_params`).

`config.init_from` names a workdir (its newest checkpoint; its `config.json` says at which
grid it was trained) or a checkpoint's state folder (`WORKDIR/checkpoints/STEP/state`). Each
parameter and constant of the new model is taken from it:

* as it is, where the path and shape agree (cast to the new dtype);
* resampled by the owning encoding's own policy where the grid changed, whether or not the
  shape did (a [H*W, D] table at 8x4 and at 4x8 has one shape, two layouts): the module's
  `resize_params(params, source_grid)` (learned tables, relative bias and attention tables),
  the same resampling its forward pass applies at another size;
* the ViT's patch kernel, where the patch size changed (again whether or not the shape did:
  2x4 and 4x2 patches), by FlexiViT's PI-resize (`lfpe.nn.patches`: the module's
  `resize_field` names what its parameters are laid out by, `grid_shape` or `patch_size`);
* left as initialised where its path ('params/Transformer/head/kernel') matches one of the
  regular expressions in `config.init_skip` (e.g. a classifier for other classes).

Anything else (a parameter absent from the source, or of another shape that nothing can
resample, such as a kernel of another width or number of input channels, or a table still of
another shape once resampled: an encoding that differs in more than its grid) stops the run before
training with one line naming the parameter and both shapes. The optimizer starts afresh at
step 0. A workdir that already holds checkpoints resumes from its own and ignores
`init_from`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from absl import logging
from flax import traverse_util

from lfpe import tasks
from lfpe.errors import ConfigError
from lfpe.train import checkpoint
from lfpe.train.workdir import absolute

Path = tuple[str, ...]


def source(path: str) -> tuple[str, Any | None]:
  """(state folder, the source's config or None) of `init_from=path`; ConfigError if neither
  a workdir with a checkpoint nor a checkpoint's state folder is there."""
  folder = absolute(path)
  path = str(folder)
  checkpoints = folder / "checkpoints"
  if checkpoints.is_dir():
    steps = sorted((int(d.name) for d in checkpoints.iterdir() if d.name.isdigit()), reverse=True)
    if not steps:
      raise ConfigError(f"config.init_from={path!r}: the workdir holds no checkpoint yet.")
    state, workdir = checkpoints / str(steps[0]) / "state", folder
  elif (folder / "_METADATA").exists():
    state, workdir = folder, folder.parent.parent.parent
  else:
    raise ConfigError(
      f"config.init_from={path!r} is neither a workdir with checkpoints nor a checkpoint's "
      "state folder (WORKDIR/checkpoints/STEP/state)."
    )
  record = workdir / "config.json"
  if not record.exists():
    return str(state), None
  try:
    return str(state), ml_collections.ConfigDict(json.loads(record.read_text()))
  except (ValueError, TypeError) as e:  # a damaged record: no config to read its grid from
    raise ConfigError(
      f"config.init_from={path!r}: its {record} cannot be read ({e}); restore it, or move it "
      "aside to load parameters by path and shape alone (no table is then resampled)."
    ) from None


def check(config: Any) -> None:
  """`init_skip`, checked with the config (the source, `check_source`, only where it is read:
  a run that resumes from its own checkpoints never reads it, so it may be gone by then)."""
  for pattern in config.get("init_skip", ()):
    try:
      re.compile(pattern)
    except (re.error, TypeError) as e:
      raise ConfigError(
        f"config.init_skip has {pattern!r}, not a regular expression: {e}."
      ) from None


def check_source(config: Any) -> None:
  """`config.init_from` (if set), checked before a fresh run builds anything: the source is
  there and its config.json, if any, reads (`source`). One that is missing (a state folder
  away from its workdir) or no longer builds a model here (another lfpe version's fields) is
  logged: its parameters load by path and shape, and one whose shape differs is refused
  naming it, as nothing can resample it; one of the same shape is copied as it is, even
  under a transposed grid or patch."""
  if config.get("init_from"):
    _, source_config = source(config.init_from)
    problem = _source_model(source_config) if source_config is not None else "it has none"
    if isinstance(problem, str):
      logging.warning(
        "config.init_from=%s: no config.json that builds a model here (%s); parameters load "
        "by path and shape, none is resampled to a new grid or patch size, and a transposed "
        "grid or patch (the same shapes) is copied row for row: keep the source's, or point "
        "init_from at the source's workdir.",
        config.init_from,
        problem,
      )


def variables(
  config: Any, task: Any, model: nn.Module, fresh: dict[str, Any], num_seeds: int = 0
) -> dict[str, Any]:
  """`fresh` (the new model's initialised variables: params and constants) with every leaf
  taken from `config.init_from` as the module docstring says; host arrays.

  With `num_seeds` (`config.seeds`: `fresh` has a leading seed axis), seed i starts from the
  source's seed i when the source was trained with as many seeds, else every seed from the
  one source run (e.g. pretrained positions given to every seed).
  """
  state_dir, source_config = source(config.init_from)
  loaded = checkpoint.restore_on_one_device(
    state_dir, field=f"config.init_from={config.init_from!r}"
  )
  flat_old = traverse_util.flatten_dict({"params": loaded["params"], **loaded.get("constants", {})})
  skip = [re.compile(p) for p in config.get("init_skip", ())]
  # Which module owns a parameter, in both models (traced once, abstractly).
  modules = (_modules(task, model, config), _source_modules(source_config))
  take = functools.partial(_take, skip=skip, modules=modules, regridded=_regridded(*modules))
  source_seeds = int(source_config.get("seeds", 0) or 0) if source_config else 0
  if source_seeds not in (0, num_seeds):  # a plain run from seeds' state too (0 != S)
    raise ConfigError(
      f"config.init_from={config.init_from!r} was trained with seeds={source_seeds}, this "
      f"run has config.seeds={num_seeds}; start from a run with as many seeds or one seed."
    )
  if not num_seeds:
    out, resized, skipped = take(traverse_util.flatten_dict(fresh), flat_old)
  else:
    pick = lambda tree, i: {k: np.asarray(v)[i] for k, v in tree.items()}
    flat_fresh = traverse_util.flatten_dict(fresh)
    per_seed = [
      take(pick(flat_fresh, i), pick(flat_old, i) if source_seeds else flat_old)
      for i in range(num_seeds)
    ]
    out = {k: np.stack([p[0][k] for p in per_seed]) for k in flat_fresh}
    resized, skipped = per_seed[0][1], per_seed[0][2]
  logging.warning(
    "config.init_from=%s: %d arrays copied, %d modules resampled to the new grid or patch "
    "size (%s), %d "
    "arrays kept as initialised (config.init_skip)%s.",
    state_dir,
    len(out) - skipped - sum(len(r) for r in resized.values()),
    len(resized),
    ", ".join("/".join(group) for group in resized) or "none",
    skipped,
    f", for each of {num_seeds} seeds" if num_seeds else "",
  )
  return traverse_util.unflatten_dict(out)


def _take(
  flat_fresh: dict, flat_old: dict, *, skip: list, modules: tuple, regridded: set[Path]
) -> tuple:
  """(flat variables, {(collection, *owner): resampled variables}, skipped count) of one run
  from its source; `modules` (new, source) by path, `regridded` (`_regridded`)."""
  out, resized, skipped = {}, {}, 0
  for path, leaf in flat_fresh.items():
    name = "/".join(path)
    owner = path[1:-1]
    if any(p.search(name) for p in skip):
      out[path], skipped = np.array(leaf), skipped + 1  # a copy: the fresh state is freed
    elif owner not in regridded and path in flat_old and flat_old[path].shape == leaf.shape:
      out[path] = np.asarray(flat_old[path], dtype=leaf.dtype)
    else:
      group = path[:-1]  # the module's variables in one collection, resampled together
      if group not in resized:
        resized[group] = _resize(name, path, leaf, flat_old, *modules)
      value = np.asarray(resized[group][path[-1]], dtype=leaf.dtype)
      if value.shape != leaf.shape:  # the modules differ in more than their layout
        raise ConfigError(
          f"config.init_from: parameter {name} is shape {tuple(flat_old[path].shape)} in the "
          f"source, {value.shape} resampled to this run's grid or patch size, and "
          f"{tuple(leaf.shape)} here: the modules differ in more than that; list it in "
          "config.init_skip to keep it as initialised, or start from a source of the same "
          "encoding and input channels."
        )
      out[path] = value
  return out, resized, skipped


def _layout(module: nn.Module | None) -> tuple[int, ...] | None:
  """What a resampling module's parameters are laid out by (its `resize_field`: a table's
  `grid_shape` by default, a patch kernel's `patch_size`), None where unknown."""
  value = getattr(module, getattr(module, "resize_field", "grid_shape"), None)
  return None if value is None else tuple(value)


def _regridded(new_modules: dict, old_modules: dict) -> set[Path]:
  """The modules that resample their parameters (`resize_params`) and whose layout differs
  from the source's: resampled even where the shapes agree (a [H*W, D] table at (8, 4) and
  at (4, 8) has one shape, not one layout)."""
  return {
    owner
    for owner, module in new_modules.items()
    if hasattr(module, "resize_params")
    and owner in old_modules
    and None not in (_layout(old_modules[owner]), _layout(module))
    and _layout(old_modules[owner]) != _layout(module)
  }


def _resize(name, path, leaf, flat_old, new_modules, old_modules) -> dict[str, Any]:
  """The params of `path`'s module resampled from the source's layout, or ConfigError."""
  owner = path[1:-1]
  module, source_module = new_modules.get(owner), old_modules.get(owner)
  have = f"shape {tuple(flat_old[path].shape)}" if path in flat_old else "absent"
  resize: Callable | None = getattr(module, "resize_params", None)
  if path in flat_old and resize is not None and source_module is not None:
    params = {key[-1]: value for key, value in flat_old.items() if key[:-1] == path[:-1]}
    return resize(params, _layout(source_module))
  why = (
    "the source's config.json (to know its grid or patch size) is missing"
    if path in flat_old and resize is not None
    else f"{type(module).__name__} cannot resample it"
    if path in flat_old
    else "the models differ"
  )
  raise ConfigError(
    f"config.init_from: parameter {name} is {have} in the source and shape "
    f"{tuple(leaf.shape)} here, and {why}; list it in config.init_skip to keep it as "
    "initialised, or start from a source of the same model."
  )


def _modules(task: Any, model: nn.Module, config: Any) -> dict[Path, nn.Module]:
  """{module path: module} of every module `model` builds for `config`'s example batch."""
  found: dict[Path, nn.Module] = {}

  def record(call, args, kwargs, context):
    found.setdefault(tuple(context.module.path), context.module)
    return call(*args, **kwargs)

  with nn.intercept_methods(record):
    jax.eval_shape(
      lambda rng: task.init_variables(model, rng, task.example_batch(config)), jax.random.key(0)
    )
  return found


def _source_model(source_config: Any | None) -> tuple[Any, nn.Module] | str | None:
  """(task, model) the source's recorded config builds; why it builds none with this lfpe (a
  string); None without a config."""
  if source_config is None:
    return None
  try:
    task = tasks.get(source_config.task)
    return task, task.create_model(source_config)
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    return f"{type(e).__name__}: {e}"


def _source_modules(source_config: Any | None) -> dict[Path, nn.Module]:
  built = _source_model(source_config)
  return _modules(*built, source_config) if isinstance(built, tuple) else {}
