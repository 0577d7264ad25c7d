"""The compiled program of a config on a mesh: model, optimizer, state layout, jitted steps.

The trainer runs it; benchmarks time it on this machine or compile it ahead of time
for a TPU topology (`abstract_inputs` + `train_step.lower(...).compile()`), so that a
full-scale config is checked against a pod's memory without one.
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
from lfpe.train import init_from, optim, sharding, steps


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
  init_rng: jax.Array  # from config.seed (the other half of the split drives dropout)
  abstract_state: Any  # TrainState of ShapeDtypeStructs
  state_shardings: Any  # TrainState of NamedShardings
  data_sharding: NamedSharding
  train_step: Callable  # jitted, donates the state
  eval_step: Callable  # jitted

  def init_state(self) -> steps.TrainState:
    """A fresh state from `config.seed`, built directly in place on the mesh; with
    `config.init_from`, its parameters and constants then come from that run
    (lfpe.train.init_from) and the optimizer starts afresh."""
    unboxed = lambda rng: sharding.unbox(self.init(rng))
    state = jax.jit(unboxed, out_shardings=self.state_shardings)(self.init_rng)
    if not self.config.get("init_from"):
      return state
    loaded = init_from.variables(self.config, self.task, self.model, state.variables())
    params = loaded.pop("params")
    shardings = self.state_shardings
    return state.replace(
      params=jax.device_put(params, shardings.params),
      constants=jax.device_put(loaded, shardings.constants),
    )

  def abstract_inputs(self, global_batch_size: int) -> tuple[Any, Any]:
    """(state, batch) as sharded ShapeDtypeStructs, for `train_step.lower(...)`."""
    state = jax.tree.map(
      lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
      self.abstract_state,
      self.state_shardings,
    )
    batch = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(
        (global_batch_size, *x.shape[1:]), x.dtype, sharding=self.data_sharding
      ),
      self.task.example_batch(self.config),
    )
    return state, batch


def seed_keys(seed: int, dropout_prng: str = "threefry2x32") -> tuple[jax.Array, jax.Array]:
  """(init key, dropout key) of `seed`: the halves of threefry key(seed). With dropout_prng
  'rbg' the dropout key is the second half of rbg key(seed) (parameters init as before)."""
  init_rng, dropout_rng = jax.random.split(jax.random.key(seed))
  if dropout_prng != "threefry2x32":
    dropout_rng = jax.random.split(jax.random.key(seed, impl=dropout_prng))[1]
  return init_rng, dropout_rng


def jit_eval_step(task: Any, model: Any, state_shardings: Any, data_sharding: NamedSharding):
  """The jitted eval step of `model` (the program's, or a variant with the same parameters,
  as a named evaluation uses): variables laid out as the state's, metrics replicated."""
  return jax.jit(
    functools.partial(steps.eval_step, task=task, model=model),
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
  init_rng, dropout_rng = seed_keys(config.seed, config.get("dropout_prng", "threefry2x32"))
  init = functools.partial(
    steps.init_state, example=task.example_batch(config), task=task, model=model, tx=tx
  )
  boxed = jax.eval_shape(init, init_rng)
  state_shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(config.mesh.fsdp))
  abstract = sharding.unbox(boxed)
  sharding.check_divisible(abstract, state_shardings)
  data_sharding = sharding.batch_sharding(mesh)
  train_step = jax.jit(
    functools.partial(
      steps.train_step, task=task, model=model, tx=tx, schedule=schedule, dropout_rng=dropout_rng
    ),
    in_shardings=(state_shardings, data_sharding),
    out_shardings=(state_shardings, sharding.replicated(mesh)),
    donate_argnums=0,
  )
  eval_step = jit_eval_step(task, model, state_shardings, data_sharding)
  return Program(
    config,
    mesh,
    task,
    model,
    tx,
    schedule,
    init,
    init_rng,
    abstract,
    state_shardings,
    data_sharding,
    train_step,
    eval_step,
  )
