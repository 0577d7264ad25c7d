"""The regression task: standardised MSE loss, R² from summed batches against sklearn."""

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from sklearn.metrics import r2_score

from lfpe import tasks
from lfpe.tasks.regression import Regression

RNG = np.random.default_rng(0)
Y = RNG.normal(3.0, 2.0, (10, 2)).astype(np.float32)
PRED = (Y + RNG.normal(0, 1.0, Y.shape)).astype(np.float32)


def test_registered_and_reads_its_target_key():
  task = tasks.get(ml_collections.ConfigDict({"name": "regression", "target": "distance"}))
  assert isinstance(task, Regression) and task.HEADLINE == "r2"


def test_loss_is_mse_of_standardised_targets():
  task = Regression(target="y", target_mean=(3.0, 3.0), target_std=(2.0, 2.0))
  loss, _ = task.loss(jnp.asarray(PRED), {"y": jnp.asarray(Y)})
  expected = np.mean(np.square(PRED - (Y - 3.0) / 2.0))
  assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_r2_from_two_masked_batches_matches_sklearn():
  task = Regression(target="y", target_mean=(3.0, 1.0), target_std=(2.0, 0.5))
  y_std = (Y - np.array([3.0, 1.0])) / np.array([2.0, 0.5])
  mask = np.ones(10, np.float32)
  mask[-2:] = 0  # padding: the last two examples do not count
  halves = [slice(0, 5), slice(5, 10)]
  parts = [
    task.eval_sums(jnp.asarray(PRED[s]), {"y": jnp.asarray(Y[s]), "mask": jnp.asarray(mask[s])})
    for s in halves
  ]
  sums = {k: sum(float(p[k]) for p in parts) for k in parts[0]}
  metrics = task.finalize(sums)
  expected = r2_score(y_std[:8], PRED[:8], multioutput="uniform_average")
  assert metrics["r2"] == pytest.approx(expected, rel=1e-5) and metrics["count"] == 8


def test_bad_fields_are_named():
  config = ml_collections.ConfigDict({"model_name": "vit", "model": {}, "compute_dtype": "float32"})
  with pytest.raises(ValueError, match="num_outputs"):
    Regression(num_outputs=0).validate(config)
  with pytest.raises(ValueError, match="target_std"):
    Regression(target_std=(1.0, 0.0)).validate(config)
