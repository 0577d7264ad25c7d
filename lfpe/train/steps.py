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
from lfpe.train import optim

_AUGMENT_STREAM = 1  # folded into a step's key for batch augmentation (dropout reads the key)


@flax.struct.dataclass
class TrainState:
  """What a checkpoint holds: the step (updates done), parameters, optimizer state.

  `constants` are the model's other variable collections that nothing updates
  (e.g. a fixed random Fourier projection), kept so that a restore is exact.
  """

  step: jax.Array  # [] int32
  params: Any
  opt_state: Any
  constants: Any

  def variables(self, params: Any = None) -> dict[str, Any]:
    """The model's variables: `params` (default: the state's) and the constants."""
    return {"params": self.params if params is None else params, **self.constants}

  def eval_variables(self) -> dict[str, Any]:
    """The variables evaluations score: the parameters' moving average where the optimizer
    keeps one (`config.optim.ema_decay`), else the parameters."""
    return self.variables(optim.ema_params(self.opt_state))


def init_state(
  rng: jax.Array,
  example: dict[str, Any],
  *,
  task: Task,
  model: nn.Module,
  tx: optax.GradientTransformation,
) -> TrainState:
  """A fresh TrainState; parameters keep their logical-axis boxes (for sharding).

  The optimizer is initialised on the boxed parameters so that its slots (Adam's
  mu and nu) inherit the parameters' axis names.
  """
  variables = dict(task.init_variables(model, rng, example))
  params = variables.pop("params")
  return TrainState(
    step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), constants=variables
  )


def train_step(
  state: TrainState,
  batch: dict[str, jax.Array],
  *,
  task: Task,
  model: nn.Module,
  tx: optax.GradientTransformation,
  schedule: optax.Schedule,
  dropout_rng: jax.Array,
) -> tuple[TrainState, dict[str, jax.Array]]:
  """One optimizer update on `batch`; returns the new state and scalar metrics."""
  rng = jax.random.fold_in(dropout_rng, state.step)
  augment = getattr(task, "augment_batch", None)  # e.g. Mixup / CutMix (classification)
  if augment is not None:
    batch = augment(batch, jax.random.fold_in(rng, _AUGMENT_STREAM))

  def loss_fn(params):
    outputs = task.forward(model, state.variables(params), batch, train=True, rng=rng)
    return task.loss(outputs, batch)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {
    **metrics,
    "loss": loss,
    "lr": schedule(state.step),
    "grad_norm": optax.tree.norm(grads),
    "param_norm": optax.tree.norm(params),
  }
  return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


def eval_step(
  variables: dict[str, Any], batch: dict[str, jax.Array], *, task: Task, model: nn.Module
) -> dict[str, jax.Array]:
  """The task's eval sums over one (possibly padded) batch."""
  outputs = task.forward(model, variables, batch, train=False, rng=None)
  return task.eval_sums(outputs, batch)
