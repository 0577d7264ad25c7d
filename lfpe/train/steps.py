"""The train state and the pure per-step functions that the trainer jits.

Everything model-specific comes from the task (lfpe/tasks), including the
compute dtype: with `config.compute_dtype='bfloat16'` the task builds its model
to compute in bf16 while parameters, gradients and optimizer slots stay float32
(the model decides which parts, e.g. position encodings, stay in float32).
"""

from __future__ import annotations

from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from lfpe.tasks.base import Task


@flax.struct.dataclass
class TrainState:
  """What a checkpoint holds: the step (updates done), parameters, optimizer state."""

  step: jax.Array  # [] int32
  params: Any
  opt_state: Any


def init_state(rng: jax.Array, example: dict[str, Any], *, task: Task, model: nn.Module,
               tx: optax.GradientTransformation) -> TrainState:
  """A fresh TrainState; parameters keep their logical-axis boxes (for sharding).

  The optimizer is initialised on the boxed parameters so that its slots (Adam's
  mu and nu) inherit the parameters' axis names.
  """
  params = task.init_variables(model, rng, example)["params"]
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))


def train_step(state: TrainState, batch: dict[str, jax.Array], *, task: Task, model: nn.Module,
               tx: optax.GradientTransformation, schedule: optax.Schedule,
               dropout_rng: jax.Array) -> tuple[TrainState, dict[str, jax.Array]]:
  """One optimizer update on `batch`; returns the new state and scalar metrics."""
  rng = jax.random.fold_in(dropout_rng, state.step)

  def loss_fn(params):
    outputs = task.forward(model, params, batch, train=True, rng=rng)
    return task.loss(outputs, batch)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {**metrics, "loss": loss, "lr": schedule(state.step),
             "grad_norm": optax.global_norm(grads), "param_norm": optax.global_norm(params)}
  return TrainState(step=state.step + 1, params=params, opt_state=opt_state), metrics


def eval_step(params: Any, batch: dict[str, jax.Array], *, task: Task, model: nn.Module
              ) -> dict[str, jax.Array]:
  """The task's eval sums over one (possibly padded) batch."""
  outputs = task.forward(model, params, batch, train=False, rng=None)
  return task.eval_sums(outputs, batch)
