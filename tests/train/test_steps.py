"""Wiring of the jitted train step: the dropout key follows the step."""

import functools

import jax
import numpy as np
from train_fixtures import tiny_config

from lfpe import tasks
from lfpe.train import optim, steps


def _step_losses(dropout: float, steps_to_try=(0, 0, 1, 2)):
  """The loss of `train_step` at the same parameters, with the state's step set as given."""
  config = tiny_config(**{"model.width": 8})
  task = tasks.get(config.task)
  model = task.create_model(config).clone(dropout=dropout)
  tx, schedule = optim.make_optimizer(config)
  batch = {
    "image": np.random.default_rng(0).normal(size=(8, 4, 4, 1)).astype(np.float32),
    "label": np.arange(8, dtype=np.int32) % 4,
  }
  state = steps.init_state(jax.random.key(0), batch, task=task, model=model, tx=tx)
  step = jax.jit(
    functools.partial(
      steps.train_step,
      task=task,
      model=model,
      tx=tx,
      schedule=schedule,
      dropout_rng=jax.random.key(1),
    )
  )
  return [float(step(state.replace(step=np.int32(s)), batch)[1]["loss"]) for s in steps_to_try]


def test_dropout_masks_change_with_the_step():
  same, again, one, two = _step_losses(dropout=0.5)
  assert same == again  # deterministic for a given step
  assert len({same, one, two}) == 3  # a new mask at every step


def test_without_dropout_the_step_does_not_matter():
  assert len(set(_step_losses(dropout=0.0))) == 1
