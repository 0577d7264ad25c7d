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
  return vit.Model(classes, image_size=8, **cfg)


def _data(n=32, seed=0):
  """Noise images; label 1 adds red to the top half (position and colour matter)."""
  rng = np.random.default_rng(seed)
  images = 0.5 * rng.random((n, 8, 8, 3), dtype=np.float32)
  labels = rng.integers(0, 2, n).astype(np.int32)
  images[labels == 1, :4, :, 0] += 0.5
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


def _outputs(model, params):
  return ms.predict(model, params, _data(16, 5).images)


def test_strategies_give_the_same_model(trained):
  model, _, out = trained
  _close(_outputs(model, out["vmap"]), _outputs(model, out["loop"]), tol=1e-3)
  _close(_outputs(model, out["map"]), _outputs(model, out["loop"]), tol=1e-3)


def test_a_seed_trains_the_same_alone(trained):
  model, params, out = trained
  alone = ms.init_params(model, [7], (8, 8, 3))
  _close(alone, jax.tree.map(lambda a: a[1:], params), tol=0)  # init depends on the seed only
  alone, _ = ms.train(model, alone, _data(), SPEC, [7])
  _close(_outputs(model, alone), _outputs(model, out["vmap"])[1:], tol=1e-3)


def test_seeds_differ_and_training_moves_params(trained):
  _, params, out = trained
  kernel = lambda p: np.asarray(p["Transformer"]["pos"]["encoding"]["table"])
  assert not np.allclose(kernel(params)[0], kernel(params)[1])
  assert not np.allclose(kernel(out["vmap"]), kernel(params))


def test_training_learns_a_separable_task():
  model = _model("sine_2d")
  params = ms.init_params(model, [0, 1], (8, 8, 3))
  spec = ms.TrainSpec(epochs=10, batch_size=16, lr=1e-2, warmup_epochs=1)
  params, hist = ms.train(model, params, _data(128), spec, [0, 1], validation=_data(128, 1))
  assert np.all(hist["validation"][-1][1] > 0.9)
  assert np.all(hist["loss"][-1] < hist["loss"][0])


def test_frozen_parameters_do_not_move():
  model = _model()
  params = ms.init_params(model, [0, 1], (8, 8, 3))
  not_pos = lambda path: "pos" not in path
  new, _ = ms.train(model, params, _data(), SPEC, [0, 1], trainable=not_pos)
  moved = jax.tree_util.tree_map_with_path(
    lambda path, a, b: (not_pos(ms._names(path)), not np.array_equal(a, b)), params, new
  )
  flags = jax.tree.leaves(moved, is_leaf=lambda x: isinstance(x, tuple))
  assert all(train == changed for train, changed in flags)


def test_metric_matches_sklearn_and_counts():
  rng = np.random.default_rng(0)
  y = rng.normal(size=(50, 2))
  pred = y[None] + rng.normal(scale=[[[0.3]], [[1.0]]], size=(2, 50, 2))
  np.testing.assert_allclose(ms.metric("mse", pred, y), [r2_score(y, p) for p in pred])
  logits = np.array([[[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]]])
  np.testing.assert_allclose(ms.metric("xent", logits, np.array([0, 1, 1])), [2 / 3])


def test_regression_targets_are_standardised():
  arrays = {
    "image": np.zeros((4, 8, 8, 3), np.uint8),
    "distance": np.array([[0, 4], [2, 8], [4, 12], [6, 16]], np.float32),
  }
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


def test_each_update_is_the_trainers_step(trained):
  """Seed 3 of `train` equals a hand loop of `lfpe.train.steps.train_step` (the trainer's
  step, the classification task and the trainer's optimizer) over the same batches."""
  from lfpe.tasks.classification import Classification  # noqa: PLC0415
  from lfpe.train import steps  # noqa: PLC0415

  model, params, out = trained
  data = _data()
  per_epoch = len(data.images) // SPEC.batch_size
  tx, schedule = ms.make_tx(SPEC, per_epoch)
  first = jax.tree.map(lambda a: a[0], params)
  state = steps.TrainState(
    step=jax.numpy.zeros((), jax.numpy.int32), params=first, opt_state=tx.init(first), constants={}
  )
  step = jax.jit(
    lambda state, batch, key: steps.train_step(
      state, batch, task=Classification(), model=model, tx=tx, schedule=schedule, dropout_rng=key
    )
  )
  seed_key = jax.random.fold_in(jax.random.key(3), 1)  # multiseed's data stream of seed 3
  for epoch in range(SPEC.epochs):
    perm_key, drop_key = jax.random.split(jax.random.fold_in(seed_key, epoch))
    order = np.asarray(jax.random.permutation(perm_key, len(data.images)))
    for i in range(per_epoch):
      idx = order[i * SPEC.batch_size : (i + 1) * SPEC.batch_size]
      batch = {"image": data.images[idx], "label": data.targets[idx]}
      state, _ = step(state, batch, drop_key)
  _close(state.params, jax.tree.map(lambda a: a[0], out["loop"]))
