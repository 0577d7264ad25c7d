"""The multi-seed trainer: strategies agree, seeds are independent, metrics, freezing."""

import jax
import numpy as np
import pytest
from sklearn.metrics import r2_score

from lfpe.models import vit
from lfpe.studies import multiseed as ms

SPEC = ms.TrainSpec(epochs=2, batch_size=8, lr=3e-3, warmup_epochs=0)


def _model(posemb="embed_1d", classes=2):
  cfg = dict(variant="mu/4", width=16, num_heads=2, mlp_dim=32, posemb=posemb)
  return vit.create_model(cfg, classes, 8)


def _data(n=32, seed=0):
  rng = np.random.default_rng(seed)
  images = rng.random((n, 8, 8, 3), dtype=np.float32)
  labels = (images[:, :4].mean((1, 2, 3)) > images[:, 4:].mean((1, 2, 3))).astype(np.int32)
  return ms.Data(images, labels)


def _close(a, b, tol=1e-4):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def trained():
  model = _model()
  params = ms.init_params(model, [3, 7], (8, 8, 3))
  out = {s: ms.train(model, params, _data(), SPEC, [3, 7], strategy=s)[0] for s in ms.STRATEGIES}
  return model, params, out


def test_strategies_give_the_same_parameters(trained):
  _, _, out = trained
  _close(out["vmap"], out["loop"])
  _close(out["map"], out["loop"])


def test_a_seed_trains_the_same_alone(trained):
  model, params, out = trained
  alone = ms.init_params(model, [7], (8, 8, 3))
  _close(alone, jax.tree.map(lambda a: a[1:], params), tol=0)  # init depends on the seed only
  alone, _ = ms.train(model, alone, _data(), SPEC, [7])
  _close(alone, jax.tree.map(lambda a: a[1:], out["vmap"]))


def test_seeds_differ_and_training_moves_params(trained):
  _, params, out = trained
  kernel = lambda p: np.asarray(p["Transformer"]["pos"]["encoding"]["embedding"])
  assert not np.allclose(kernel(params)[0], kernel(params)[1])
  assert not np.allclose(kernel(out["vmap"]), kernel(params))


def test_training_learns_a_separable_task():
  model = _model("sine_2d")
  params = ms.init_params(model, [0, 1], (8, 8, 3))
  spec = ms.TrainSpec(epochs=15, batch_size=16, lr=1e-2, warmup_epochs=1)
  params, hist = ms.train(model, params, _data(128), spec, [0, 1], validation=_data(128, 1))
  assert np.all(hist["validation"][-1][1] > 0.85)
  assert np.all(hist["loss"][-1] < hist["loss"][0])


def test_frozen_parameters_do_not_move():
  model = _model()
  params = ms.init_params(model, [0, 1], (8, 8, 3))
  only_pos = lambda path: "pos" in path
  new, _ = ms.train(model, params, _data(), SPEC, [0, 1], trainable=only_pos)
  moved = jax.tree_util.tree_map_with_path(
    lambda path, a, b: (only_pos(ms._names(path)), not np.allclose(a, b)), params, new)
  flags = jax.tree.leaves(moved, is_leaf=lambda x: isinstance(x, tuple))
  assert all(train == changed for train, changed in flags)


def test_metric_matches_sklearn_and_counts():
  rng = np.random.default_rng(0)
  y = rng.normal(size=(50, 2))
  pred = y[None] + rng.normal(scale=[[0.3], [1.0]], size=(2, 50, 2))
  np.testing.assert_allclose(ms.metric("mse", pred, y), [r2_score(y, p) for p in pred])
  logits = np.array([[[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]]])
  np.testing.assert_allclose(ms.metric("xent", logits, np.array([0, 1, 1])), [2 / 3])


def test_regression_targets_are_standardised():
  arrays = {"image": np.zeros((4, 8, 8, 3), np.uint8),
            "distance": np.array([[0, 4], [2, 8], [4, 12], [6, 16]], np.float32)}
  data = ms.Data.from_arrays(arrays, "mse")
  np.testing.assert_allclose(data.targets.mean(0), 0, atol=1e-6)
  np.testing.assert_allclose(data.targets.std(0), 1, atol=1e-6)


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="loss"):
    ms.TrainSpec(loss="hinge")
  model = _model()
  params = ms.init_params(model, [0], (8, 8, 3))
  with pytest.raises(ValueError, match="seeds"):
    ms.train(model, params, _data(), SPEC, [0, 1])
  with pytest.raises(ValueError, match="strategy"):
    ms.train(model, params, _data(), SPEC, [0], strategy="pmap")
