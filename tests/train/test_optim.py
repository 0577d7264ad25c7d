"""Optimizers and schedules against hand-computed values."""

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from lfpe.errors import ConfigError
from lfpe.train import optim


def _config(**optim_fields):
  opt = dict(name="sgd", lr=0.1, weight_decay=0.0, momentum=0.0, grad_clip_norm=0.0)
  opt.update(optim_fields)
  return ml_collections.ConfigDict(
    dict(total_steps=100, optim=opt, schedule=dict(name="constant", warmup_steps=0))
  )


def _schedule(name, **fields):
  return optim.make_schedule(ml_collections.ConfigDict(dict(name=name, **fields)), 2.0, 100)


def test_warmup_cosine_values():
  lr = _schedule("warmup_cosine", warmup_steps=10, end_lr_factor=0.1)
  assert float(lr(0)) == 0.0
  assert float(lr(5)) == pytest.approx(1.0)
  assert float(lr(10)) == pytest.approx(2.0)
  # Halfway through the decay, cos = 0: the mean of peak (2.0) and end (0.2).
  assert float(lr(55)) == pytest.approx(1.1, rel=1e-5)
  t = 30
  expected = 0.2 + 1.8 * 0.5 * (1 + math.cos(math.pi * (t - 10) / 90))
  assert float(lr(t)) == pytest.approx(expected, rel=1e-5)
  assert float(lr(100)) == pytest.approx(0.2, rel=1e-5)


def test_warmup_rsqrt_values():
  lr = _schedule("warmup_rsqrt", warmup_steps=10, timescale=5.0)
  assert float(lr(4)) == pytest.approx(0.8)
  assert float(lr(10)) == pytest.approx(2.0)
  assert float(lr(30)) == pytest.approx(2.0 / math.sqrt(1 + 20 / 5), rel=1e-6)


def test_constant_and_no_warmup():
  lr = _schedule("constant", warmup_steps=0)
  assert [float(lr(t)) for t in (0, 50, 99)] == [2.0, 2.0, 2.0]
  with pytest.raises(ValueError, match="schedule.name"):
    _schedule("step_decay", warmup_steps=0)


def _one_update(config, params, grads):
  tx, _ = optim.make_optimizer(config)
  updates, _ = tx.update(grads, tx.init(params), params)
  return {k: params[k] + updates[k] for k in params}


def test_weight_decay_skips_vectors():
  params = {"kernel": jnp.ones((2, 2)), "bias": jnp.ones((2,))}
  zeros = {k: jnp.zeros_like(v) for k, v in params.items()}
  for name in ("sgd", "adamw"):
    new = _one_update(_config(name=name, weight_decay=0.5), params, zeros)
    np.testing.assert_allclose(new["kernel"], 1 - 0.1 * 0.5, rtol=1e-6)  # p - lr*wd*p
    np.testing.assert_allclose(new["bias"], 1.0)


def test_no_decay_keeps_named_matrices_out_of_weight_decay():
  """optim.no_decay (timm's `no_weight_decay`, e.g. rope-vit's '/freqs$'): the matrices it
  names keep their value under zero gradients; the others decay; a typo is refused."""
  params = {"rope": {"freqs": jnp.ones((2, 3))}, "body": {"kernel": jnp.ones((2, 2))}}
  zeros = jax.tree.map(jnp.zeros_like, params)
  for name in ("sgd", "adamw"):
    tx, _ = optim.make_optimizer(_config(name=name, weight_decay=0.5, no_decay=("/freqs$",)))
    updates, _ = tx.update(zeros, tx.init(params), params)
    np.testing.assert_allclose(updates["rope"]["freqs"], 0.0)
    np.testing.assert_allclose(updates["body"]["kernel"], -0.1 * 0.5, rtol=1e-6)
  with pytest.raises(ConfigError, match=r"config.optim.no_decay: '/freq\$' matches no"):
    optim.check_patterns(_config(no_decay=("/freq$",)), params)


@pytest.mark.parametrize(
  "no_decay, decayed",
  [
    ((), {"query/kernel", "query/bias", "pos/table"}),  # ndim > 1: the records' rule
    (("/bias$",), {"query/kernel", "pos/table"}),  # the q/k/v biases spared
    (("^(?!.*/kernel$)",), {"query/kernel"}),  # big_vision's: kernels only
  ],
)
def test_the_documented_decay_rules(no_decay, decayed):
  """docs/training.md's patterns: which of an attention's kernel, its `[heads, head_dim]`
  bias, a position table and a norm scale decay."""
  params = {
    "query": {"kernel": jnp.ones((4, 2, 2)), "bias": jnp.ones((2, 2))},
    "pos": {"table": jnp.ones((3, 4))},
    "norm": {"scale": jnp.ones((4,))},
  }
  zeros = jax.tree.map(jnp.zeros_like, params)
  tx, _ = optim.make_optimizer(_config(weight_decay=0.5, no_decay=no_decay))
  updates, _ = tx.update(zeros, tx.init(params), params)
  moved = {f"{a}/{b}" for a in updates for b in updates[a] if np.any(updates[a][b] != 0)}
  assert moved == decayed


def test_grad_clipping_rescales_to_max_norm():
  params = {"w": jnp.zeros((2,))}
  grads = {"w": jnp.array([6.0, 8.0])}  # norm 10
  new = _one_update(_config(grad_clip_norm=1.0), params, grads)
  np.testing.assert_allclose(new["w"], [-0.1 * 0.6, -0.1 * 0.8], rtol=1e-6)
  unclipped = _one_update(_config(), params, grads)
  np.testing.assert_allclose(unclipped["w"], [-0.6, -0.8], rtol=1e-6)


def test_adamw_first_step_is_lr_sized():
  # Adam's first update is lr * g / (|g| + eps) elementwise (bias-corrected moments).
  new = _one_update(_config(name="adamw"), {"w": jnp.zeros((2,))}, {"w": jnp.array([3.0, -0.5])})
  np.testing.assert_allclose(new["w"], [-0.1, 0.1], rtol=1e-5)


def test_unknown_optimizer():
  with pytest.raises(ValueError, match="optim.name"):
    optim.make_optimizer(_config(name="lamb"))


def test_warmup_step_schedule_drops_at_each_boundary():
  schedule = ml_collections.ConfigDict(
    dict(name="warmup_step", warmup_steps=10, decay_steps=(60, 80), decay_factor=0.1)
  )
  lr = optim.make_schedule(schedule, 1e-3, 100)
  np.testing.assert_allclose(
    [float(lr(t)) for t in (0, 5, 10, 59, 60, 79, 80, 99)],
    [0.0, 5e-4, 1e-3, 1e-3, 1e-4, 1e-4, 1e-5, 1e-5],
    rtol=1e-5,
  )


def test_lr_multipliers_scale_one_module():
  """DETR's backbone learns at 0.1 of the rate: its Adam update is exactly 0.1 of the head's."""
  config = ml_collections.ConfigDict(
    dict(
      total_steps=10,
      optim=dict(name="adamw", lr=1e-3, weight_decay=0.0, lr_multipliers={"backbone": 0.1}),
      schedule=dict(name="constant", warmup_steps=0),
    )
  )
  tx, _ = optim.make_optimizer(config)
  params = {"backbone": jnp.ones(3), "head": jnp.ones(3)}
  updates, _ = tx.update(params, tx.init(params), params)
  np.testing.assert_allclose(updates["backbone"], 0.1 * updates["head"], rtol=1e-6)
  assert float(jnp.abs(updates["head"]).max()) > 0


def _frozen_config(**optim_fields):
  return ml_collections.ConfigDict(
    dict(
      total_steps=10,
      optim=dict(name="adamw", lr=1e-3, weight_decay=0.1, grad_clip_norm=1.0, **optim_fields),
      schedule=dict(name="constant", warmup_steps=0),
    )
  )


@pytest.mark.parametrize(
  "fields,trained",
  [
    (dict(freeze=("^params/head/",)), {"pos", "body"}),
    (dict(trainable=("/pos/",)), {"pos"}),
    (dict(trainable=("/pos/", "^params/head/"), freeze=("bias$",)), {"pos", "head"}),
  ],
)
def test_trainable_and_freeze_choose_which_parameters_move(fields, trained):
  """Frozen parameters get no update and no decay (weight decay is on); the others do."""
  tx, _ = optim.make_optimizer(_frozen_config(**fields))
  params = {
    "pos": {"table": jnp.ones((2, 3))},
    "body": {"kernel": jnp.ones((3, 3))},
    "head": {"kernel": jnp.ones((3, 2)), "bias": jnp.ones(2)},
  }
  updates, _ = tx.update(params, tx.init(params), params)
  moved = {
    top for top, sub in updates.items() if any(float(jnp.abs(u).max()) for u in sub.values())
  }
  assert moved == trained
  if "freeze" in fields and fields["freeze"] == ("bias$",):
    assert not float(jnp.abs(updates["head"]["bias"]).max())


def test_a_freeze_pattern_that_names_no_parameter_is_refused():
  config = _frozen_config(freeze=("^params/haed/",))
  params = {"head": {"kernel": jnp.ones((3, 2))}}
  with pytest.raises(
    ConfigError,
    match=r"config.optim.freeze: '\^params/haed/' matches no parameter; .*params/head/kernel",
  ):
    optim.check_patterns(config, params)


def test_params_ema_by_hand():
  """ema ← d·ema + (1 − d)·params after each update, from the initial parameters; updates pass."""
  config = _config(lr=0.5, ema_decay=0.9)  # plain SGD: params ← params − 0.5·grad
  tx, _ = optim.make_optimizer(config)
  params = {"w": jnp.array([1.0, 2.0])}
  state = tx.init(params)
  ema = np.array([1.0, 2.0])
  for grad in ([1.0, 0.0], [0.0, 2.0], [1.0, 1.0]):
    updates, state = tx.update({"w": jnp.array(grad)}, state, params)
    params = {"w": params["w"] + updates["w"]}
    ema = 0.9 * ema + 0.1 * np.asarray(params["w"])
  np.testing.assert_allclose(optim.ema_params(state)["w"], ema, rtol=1e-6)
  np.testing.assert_allclose(params["w"], [0.0, 0.5])  # the updates are SGD's own
  assert optim.ema_params(optim.make_optimizer(_config())[0].init(params)) is None
