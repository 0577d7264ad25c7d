"""The compiled program of a config on a mesh: model, optimizer, state layout, jitted steps.

The trainer runs it; benchmarks time it on this machine or compile it ahead of time
for a TPU topology (`abstract_inputs` + `train_step.lower(...).compile()`), so that a
full-scale config is checked against a pod's memory without one.

The dropout key is an argument of the compiled train step, not a constant in it: runs that
differ only in their seed compile to the same program, which XLA's persistent compilation
cache (`JAX_COMPILATION_CACHE_DIR`) then compiles once for all of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import optax
from jax.sharding import Mesh, NamedSharding

from lfpe import tasks
from lfpe.errors import ConfigError
from lfpe.models import vit
from lfpe.train import flexi, init_from, optim, seeds, sharding, steps


@dataclasses.dataclass(frozen=True)
class Program:
  """Everything built from (config, mesh) before any array is allocated."""

  config: Any
  mesh: Mesh
  task: Any
  model: Any
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  init: Callable[[jax.Array], Any]  # rng -> boxed TrainState (logical axes attached)
  init_rng: jax.Array  # from config.seed (the other half of the split drives dropout); [S]
  dropout_rng: jax.Array  # train_step's third argument; [S] with seeds
  abstract_state: Any  # TrainState of ShapeDtypeStructs (a leading seed axis with seeds)
  state_shardings: Any  # TrainState of NamedShardings
  data_sharding: NamedSharding  # of a batch `[B, ...]` (evaluation)
  train_data_sharding: NamedSharding  # of a training batch (`[S, B, ...]` with seeds)
  train_step: Callable  # jitted (state, batch, dropout_rng) -> (state, metrics); donates the state
  eval_step: Callable  # jitted
  num_seeds: int = 0  # config.seeds: 0, or the leading axis of the state (lfpe.train.seeds)
  patch_steps: dict | None = None  # config.train_patch_sizes: {patch: jitted step} (flexi)

  def step_at(self, step: int) -> Callable:
    """The jitted train step of training step `step` (1-based): `train_step`, or with
    `config.train_patch_sizes` the one at the patch size drawn for `step` (`flexi.patch_at`)."""
    if not self.patch_steps:
      return self.train_step
    return self.patch_steps[flexi.patch_at(tuple(self.patch_steps), self.config.seed, step)]

  def init_state(self) -> steps.TrainState:
    """A fresh state from `config.seed`, built directly in place on the mesh; with
    `config.init_from`, its parameters and constants then come from that run
    (lfpe.train.init_from) and the optimizer starts afresh from them (its moving average,
    `optim.ema_decay`, from the loaded parameters, not the random ones)."""
    unboxed = lambda rng: sharding.unbox(self.init(rng))
    unboxed = jax.vmap(unboxed) if self.num_seeds else unboxed
    state = jax.jit(unboxed, out_shardings=self.state_shardings)(self.init_rng)
    if not self.config.get("init_from"):
      return state
    loaded = init_from.variables(
      self.config, self.task, self.model, state.variables(), self.num_seeds
    )
    shardings = self.state_shardings
    for old in jax.tree.leaves((state.params, state.opt_state)):  # replaced: free them first
      old.delete()
    params = jax.device_put(loaded.pop("params"), shardings.params)
    init = jax.vmap(self.tx.init) if self.num_seeds else self.tx.init
    return state.replace(
      params=params,
      opt_state=jax.jit(init, out_shardings=shardings.opt_state)(params),
      constants=jax.device_put(loaded, shardings.constants),
    )

  def seed_variables(self) -> Any:
    """One seed's variables as ShapeDtypeStructs (the state's, without its seed axis)."""
    strip = lambda a: jax.ShapeDtypeStruct(a.shape[1:] if self.num_seeds else a.shape, a.dtype)
    return jax.tree.map(strip, self.abstract_state.variables())

  def check_forward(self, model: Any, config: Any, field: str) -> None:
    """`check_forward` of `model` (the program's or a variant) with this program's variables."""
    check_forward(self.task, model, self.seed_variables(), config, field)

  def abstract_inputs(self, global_batch_size: int) -> tuple[Any, Any, jax.Array]:
    """(state, batch) as sharded ShapeDtypeStructs and the dropout key, for
    `train_step.lower(...)`."""
    state = jax.tree.map(
      lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
      self.abstract_state,
      self.state_shardings,
    )
    return state, self.abstract_batch(global_batch_size), self.dropout_rng

  def abstract_batch(self, global_batch_size: int, *, train: bool = True) -> Any:
    """The task's batch as sharded ShapeDtypeStructs: a training batch (`[S, B, ...]` with
    seeds) or, with `train=False`, an evaluation batch (`[B, ...]`: every seed sees it)."""
    lead = (self.num_seeds,) if self.num_seeds and train else ()
    sharding = self.train_data_sharding if train else self.data_sharding
    return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(
        (*lead, global_batch_size, *x.shape[1:]), x.dtype, sharding=sharding
      ),
      self.task.example_batch(self.config),
    )


def check_forward(task: Any, model: Any, variables: Any, config: Any, field: str) -> None:
  """Traces `model`'s evaluation forward pass on `config`'s data with `variables` (abstract:
  nothing is compiled or allocated). A grid the model refuses only when it meets it
  (`beit_geometric` asked to shrink a table) is then a ConfigError naming `field` before
  training, not a traceback at the first step or evaluation that reaches it."""
  step = functools.partial(steps.eval_step, task=task, model=model)
  try:
    jax.eval_shape(step, variables, evaluated_example(task, config))
  except ValueError as e:
    raise ConfigError(f"{field}: {e}") from None


def evaluated_example(task: Any, config: Any) -> dict[str, Any]:
  """The task's example batch as an evaluation meets it: packed where `config.data.naflex` is
  set, its budget grown to the image's grid as the evaluation's loader grows it (an image
  that is not whole patches is resized, not refused)."""
  batch = task.example_batch(config)
  given = config.data.get("naflex")
  if given is None or "image" not in batch:
    return batch
  from lfpe.data import packing  # noqa: PLC0415 (only for NaFlex)
  from lfpe.data.config import naflex  # noqa: PLC0415

  packed = packing.grown(naflex(given), batch["image"].shape[1:3])
  return packing.pack_batch(batch, packed)


def _check_train_sizes(config: Any, task: Any, model: Any, abstract: steps.TrainState) -> None:
  """Each size of `data.train_sizes` traced through the model with its parameters
  (`check_forward`): a size the model refuses fails now, naming the field."""
  for size in config.data.get("train_sizes") or ():
    at_size = config.copy_and_resolve_references()
    with at_size.unlocked():
      at_size.data.image_size = size
    check_forward(
      task, model, abstract.variables(), at_size, f"config.data.train_sizes has {size} px"
    )


def _patch_models(
  config: Any, task: Any, model: Any, abstract: steps.TrainState, tx: Any, schedule: Any
) -> dict[Any, Any]:
  """`{patch: model}` for `config.train_patch_sizes` (FlexiViT, `lfpe.train.flexi`): each
  model cuts images at its patch with the trained kernel. Its train step (forward, backward,
  update) is traced now on one seed's state, so that a size the model refuses fails before
  training, naming the field, not at the step that first draws it."""
  out, batch = {}, task.example_batch(config)
  for patch in flexi.sizes(config):
    if vit.config_patch({"patch_size": patch}) == vit.config_patch(config.model):
      out[patch] = model  # the program's own model cuts at model.patch_size: `train_step`
      continue
    out[patch] = task.create_model(flexi.at_patch(config, patch))
    step = functools.partial(
      steps.train_step, task=task, model=out[patch], tx=tx, schedule=schedule
    )
    try:
      jax.eval_shape(step, abstract, batch, dropout_rng=jax.random.key(0))
    except ValueError as e:
      raise ConfigError(f"{flexi.FIELD} has {patch!r}: {e}") from None
  return out


def seed_keys(seed: int, dropout_prng: str = "threefry2x32") -> tuple[jax.Array, jax.Array]:
  """(init key, dropout key) of `seed`: the halves of threefry key(seed). With dropout_prng
  'rbg' the dropout key is the second half of rbg key(seed) (parameters init as before)."""
  init_rng, dropout_rng = jax.random.split(jax.random.key(seed))
  if dropout_prng != "threefry2x32":
    dropout_rng = jax.random.split(jax.random.key(seed, impl=dropout_prng))[1]
  return init_rng, dropout_rng


def jit_eval_step(
  task: Any, model: Any, state_shardings: Any, data_sharding: NamedSharding, num_seeds: int = 0
):
  """The jitted eval step of `model` (the program's, or a variant with the same parameters,
  as a named evaluation uses): variables laid out as the state's, metrics replicated. With
  seeds, every seed's variables on the same batch: sums with a leading seed axis."""
  step = functools.partial(steps.eval_step, task=task, model=model)
  return jax.jit(
    jax.vmap(step, in_axes=(0, None)) if num_seeds else step,
    in_shardings=(state_shardings.variables(), data_sharding),
    out_shardings=sharding.replicated(data_sharding.mesh),
  )


def build(config: Any, mesh: Mesh, *, task: Any = None, model: Any = None) -> Program:
  """Model, optimizer, state shardings and jitted steps of `config` on `mesh`.

  `task` and `model` are built from `config` unless given (the trainer builds them first, as
  it checks the config, so that a bad `config.model` fails with the other config errors,
  before any data is read; they are built once).
  """
  task = tasks.get(config.task) if task is None else task
  model = task.create_model(config) if model is None else model
  tx, schedule = optim.make_optimizer(config)
  prng = config.get("dropout_prng", "threefry2x32")
  num_seeds = seeds.count(config)
  keys = [seed_keys(seed, prng) for seed in seeds.of(config)]
  init = functools.partial(
    steps.init_state, example=task.example_batch(config), task=task, model=model, tx=tx
  )
  boxed = jax.eval_shape(init, keys[0][0])  # one seed's layout
  state_shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(config.mesh.fsdp))
  abstract = sharding.unbox(boxed)
  if config.mesh.fsdp:
    state_shardings = sharding.fit_fsdp(abstract, state_shardings)
  sharding.check_divisible(abstract, state_shardings)
  optim.check_patterns(config, abstract.params)
  data_sharding = sharding.batch_sharding(mesh)
  _check_train_sizes(config, task, model, abstract)
  patch_models = _patch_models(config, task, model, abstract, tx, schedule)  # one seed's
  if num_seeds:  # every seed's state, batch and dropout key on a leading axis
    init_rng, dropout_rng = (seeds.stack_keys(k) for k in zip(*keys, strict=True))
    abstract = seeds.stacked(abstract, num_seeds)
    state_shardings = seeds.with_seed_axis(state_shardings)
    train_data_sharding = seeds.with_seed_axis(data_sharding)
  else:
    (init_rng, dropout_rng), train_data_sharding = keys[0], data_sharding
  replicated = sharding.replicated(mesh)

  def jitted(net: Any) -> Callable:  # the train step of model `net`, donating the state
    step = functools.partial(steps.train_step, task=task, model=net, tx=tx, schedule=schedule)
    keyed = lambda s, b, r: step(s, b, dropout_rng=r)
    return jax.jit(
      jax.vmap(keyed) if num_seeds else keyed,
      in_shardings=(state_shardings, train_data_sharding, replicated),
      out_shardings=(state_shardings, replicated),
      donate_argnums=0,
    )

  train_step = jitted(model)
  patch_steps = {p: train_step if m is model else jitted(m) for p, m in patch_models.items()}
  eval_step = jit_eval_step(task, model, state_shardings, data_sharding, num_seeds)
  return Program(
    config,
    mesh,
    task,
    model,
    tx,
    schedule,
    init,
    init_rng,
    dropout_rng,
    abstract,
    state_shardings,
    data_sharding,
    train_data_sharding,
    train_step,
    eval_step,
    num_seeds,
    patch_steps or None,
  )
