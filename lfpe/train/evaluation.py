"""Evaluations: the config's own eval plus the named ones of `config.evals`, one code path.

Every evaluation runs the task's `eval_step` (its `eval_sums`) over one pass of its data and
the task's `finalize`, as big_vision's evaluators do. The config's own data is the evaluation
named "" (metrics split `eval`); each entry of `config.evals` adds one (split `eval/NAME`):

  config.evals.size_64 = dict(data=dict(image_size=64), every=0)
  config.evals.bicubic_64 = dict(
    data=dict(image_size=64), model=dict(posemb="embed_1d(resample_method='bicubic')"))

`data` overrides fields of `config.data` (another split, image size or preprocessing), and
`model` fields of `config.model` that leave the parameters as they are (e.g. an encoding's
resampling policy, or a ViT's patch size: the kernel is PI-resized on the fly): the same
trained parameters are evaluated. `every` is the period in steps
(0: `config.eval_every`); every evaluation also runs at the last step. The trainer runs them
while training; `evaluate` runs all of them on a trained workdir. Evaluations of the same data
(e.g. one test size under several resampling policies) share one loader and one pass of it
(`run_all`): each batch is read and preprocessed once and scored by each of their models.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from lfpe import tasks
from lfpe.errors import ConfigError, did_you_mean
from lfpe.models import vit
from lfpe.train import program, sharding


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """One evaluation: its metrics split, period, data (one pass) and jitted eval step."""

  split: str  # "eval" or "eval/NAME"
  every: int
  data: Iterable
  eval_step: Callable  # (variables, batch) -> the task's eval sums ([S, ...] with seeds)
  num_seeds: int = 0  # config.seeds (lfpe.train.seeds): the eval step's leading axis


FIELDS = ("data", "model", "every")  # of one `config.evals` entry


def split(name: str) -> str:
  return f"eval/{name}" if name else "eval"


def configs(config: Any) -> dict[str, Any]:
  """{name: config} of every evaluation: "" is `config`; each `config.evals` entry a copy with
  its `data` and `model` overrides (ConfigError naming a field that does not exist)."""
  out = {"": config}
  for name, entry in (config.get("evals") or {}).items():
    _mapping(entry, f"config.evals.{name}", f"of {', '.join(FIELDS)}")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
      raise ConfigError(
        f"config.evals.{name} has no field {unknown[0]!r}"
        f"{did_you_mean(unknown[0], FIELDS)}; its fields: {', '.join(FIELDS)}."
      )
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.evals = {}
      for section in ("data", "model"):
        where, changes = f"config.evals.{name}.{section}", entry.get(section) or {}
        _mapping(changes, where, f"of config.{section}'s fields")
        _override(variant[section], changes, where, config if section == "model" else None)
    out[name] = variant
  return out


def _override(target: Any, changes: Any, where: str, config: Any = None) -> None:
  """Sets `changes` on `target` (ConfigError naming a field it lacks); `config`: given where
  `target` is its `config.model`, which may also take any field of its family's model."""
  for key, value in changes.items():
    if key not in target and config is not None:
      tasks.check_model_field(config, key, f"{where}.{key}")
    elif key not in target:
      raise ConfigError(
        f"{where}.{key}: config.{where.split('.')[-1]} has no field {key!r}"
        f"{did_you_mean(key, list(target.keys()))}."
      )
    if hasattr(value, "items") and hasattr(target[key], "items"):
      _override(target[key], value, f"{where}.{key}")
      continue
    try:
      target[key] = value
    except TypeError:  # ml_collections keeps a field's type
      raise ConfigError(
        f"{where}.{key}={value!r} ({type(value).__name__}) cannot replace {target[key]!r}: "
        f"give a value of type {type(target[key]).__name__}."
      ) from None


def on_training_data(config: Any, variant: Any) -> Any:
  """`config` with `variant`'s model: what an evaluation's model is built from (its tables
  sized by the training grid), to meet the evaluation's data as the trained model does. A
  variant at another `model.patch_size` keeps the trained one as `trained_patch_size`: the
  kernel is PI-resized on the fly (FlexiViT's evaluation, `lfpe.nn.patches`)."""
  model = variant.model.copy_and_resolve_references()
  patch, kept = vit.config_patch(model), vit.kernel_patch(config.model)
  if patch is not None and patch != kept and model.get("trained_patch_size") is None:
    with model.unlocked():
      model.trained_patch_size = kept
  trained = config.copy_and_resolve_references()
  with trained.unlocked():
    trained.model = model
  return trained


def _mapping(value: Any, where: str, of: str) -> None:
  """ConfigError naming `where` unless `value` is a mapping."""
  if not hasattr(value, "items"):
    raise ConfigError(f"{where} must be a dict {of}, got {value!r}.")


def period(config: Any, name: str) -> int:
  """Steps between runs of evaluation `name` (0 in the config: `config.eval_every`)."""
  every = config.evals[name].get("every", 0) if name else 0
  if not isinstance(every, int) or isinstance(every, bool) or every < 0:
    raise ConfigError(f"config.evals.{name}.every must be an integer >= 0, got {every!r}.")
  return every or config.eval_every


def build(
  prog: Any, config: Any, make_loader: Callable, data_sharding: Any, *, main: bool = True
) -> list[Evaluation]:
  """Every evaluation of `config` (`main=False`: its named ones only) for the program `prog`:
  loaders made once (one per distinct
  data config, shared by the evaluations that read it), and one jitted eval step per model
  variant (a variant whose parameters differ is a ConfigError). A variant's model is built
  from the training data (its tables sized by the training grid) and meets the evaluation's
  data as the trained model does (e.g. resampling a table)."""
  out, loaders = [], {}
  for name, variant in configs(config).items():
    if not (name or main):
      continue
    eval_step, model = prog.eval_step, prog.model
    if name and variant.model.to_dict() != config.model.to_dict():
      model = prog.task.create_model(on_training_data(config, variant))
      _check_same_parameters(prog, model, variant, name)
      eval_step = program.jit_eval_step(
        prog.task, model, prog.state_shardings, data_sharding, prog.num_seeds
      )
    if name:  # its grid and model, traced: a grid the model refuses fails before training
      prog.check_forward(model, variant, f"config.evals.{name}")
    key = json.dumps(variant.data.to_dict(), sort_keys=True, default=repr)
    if key not in loaders:
      loaders[key] = make_loader(
        variant.data,
        global_batch_size=config.get("eval_batch_size", config.batch_size),
        seed=config.seed,
        train=False,
        mesh=data_sharding,
      )
    loader = loaders[key]
    out.append(Evaluation(split(name), period(config, name), loader, eval_step, prog.num_seeds))
  return out


def _check_same_parameters(prog: Any, model: Any, variant: Any, name: str) -> None:
  """ConfigError unless `model` has the trained model's parameters, laid out alike: same
  shapes, and the same kernel patch size (a 2x4 and a 4x2 patch kernel have one shape)."""
  ours, theirs = vit.kernel_patch(prog.model), vit.kernel_patch(model)
  if ours != theirs:
    raise ConfigError(
      f"config.evals.{name}.model.trained_patch_size={theirs} is not the trained {ours}: "
      "the kernel is laid out for the patch size it was trained at. Leave trained_patch_size "
      "out (an evaluation at another patch_size keeps the trained one)."
    )
  example = program.evaluated_example(prog.task, variant)  # as the evaluation meets its data
  init = lambda rng: sharding.unbox(prog.task.init_variables(model, rng, example))
  try:
    theirs = jax.tree.map(lambda a: a.shape, jax.eval_shape(init, jax.random.key(0)))
  except ValueError as e:
    raise ConfigError(f"config.evals.{name}: {e}") from None
  ours = jax.tree.map(lambda a: a.shape, prog.seed_variables())  # one seed's, as `theirs`
  if jax.tree.structure(ours) != jax.tree.structure(theirs) or ours != theirs:
    raise ConfigError(
      f"config.evals.{name}.model changes the model's parameters; an evaluation scores the "
      "trained parameters, so it may change only options that keep them (e.g. a resampling "
      "policy)."
    )


def run_all(task: Any, evaluations: list[Evaluation], variables: dict[str, Any]) -> dict:
  """`{split: metrics}` of each of `evaluations`, on the host: one pass over each loader,
  every evaluation reading it scored on each batch; with seeds, `[S]` arrays (each seed
  finalised on its own).

  Scalars of `eval_sums` are added up over batches; arrays (per-example outputs such as
  detections, `[B, ...]`) are concatenated along the batch axis.
  """
  parts: dict[str, dict[str, list]] = {ev.split: {} for ev in evaluations}
  by_loader: dict[int, list[Evaluation]] = {}
  for ev in evaluations:
    by_loader.setdefault(id(ev.data), []).append(ev)
  for group in by_loader.values():
    for batch in group[0].data:
      for ev in group:
        for k, v in jax.device_get(ev.eval_step(variables, batch)).items():
          parts[ev.split].setdefault(k, []).append(np.asarray(v))
  return {ev.split: _finalize(task, parts[ev.split], ev.num_seeds) for ev in evaluations}


def _finalize(task: Any, parts: dict[str, list], num_seeds: int) -> dict[str, Any]:
  if not num_seeds:
    return task.finalize(_totals(parts))
  per_seed = [
    task.finalize(_totals({k: [p[i] for p in v] for k, v in parts.items()}))
    for i in range(num_seeds)
  ]
  return {k: np.asarray([m[k] for m in per_seed]) for k in per_seed[0]}


def _totals(parts: dict[str, list]) -> dict[str, Any]:
  return {k: float(np.sum(v)) if v[0].ndim == 0 else np.concatenate(v) for k, v in parts.items()}
