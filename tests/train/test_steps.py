"""Wiring of the jitted train step: the dropout key follows the step; the seed's keys."""

import functools

import jax
import numpy as np
from train_fixtures import tiny_config

from lfpe import tasks
from lfpe.train import optim, program, steps


def _step_losses(dropout: float, steps_to_try=(0, 0, 1, 2), dropout_rng=None):
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
      dropout_rng=jax.random.key(1) if dropout_rng is None else dropout_rng,
    )
  )
  return [float(step(state.replace(step=np.int32(s)), batch)[1]["loss"]) for s in steps_to_try]


def test_dropout_masks_change_with_the_step():
  same, again, one, two = _step_losses(dropout=0.5)
  assert same == again  # deterministic for a given step
  assert len({same, one, two}) == 3  # a new mask at every step


def test_without_dropout_the_step_does_not_matter():
  assert len(set(_step_losses(dropout=0.0))) == 1


def test_an_rbg_dropout_key_changes_with_the_step_and_keeps_the_init_key():
  """config.dropout_prng='rbg': the init key is threefry's as before, the dropout key is an
  rbg key (other masks), and a new mask is still drawn at every step."""
  init, dropout = program.seed_keys(3)
  np.testing.assert_array_equal(
    jax.random.key_data(init), jax.random.key_data(jax.random.split(jax.random.key(3))[0])
  )
  np.testing.assert_array_equal(
    jax.random.key_data(dropout), jax.random.key_data(jax.random.split(jax.random.key(3))[1])
  )
  rbg_init, rbg = program.seed_keys(3, "rbg")
  np.testing.assert_array_equal(jax.random.key_data(rbg_init), jax.random.key_data(init))
  assert "rbg" in str(jax.random.key_impl(rbg))
  same, again, one, two = _step_losses(dropout=0.5, dropout_rng=rbg)
  assert same == again and len({same, one, two}) == 3
  assert same != _step_losses(dropout=0.5, steps_to_try=(0,), dropout_rng=dropout)[0]
