"""Relative bias (Swin, 001 Sec. 3) and 2-D relative attention logits (003 Eq. 2)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings.relative import RelativeAttention2D, RelativeBias2D, relative_index
from lfpe.encodings.resample import resample


def _cells(h, w):
  return list(itertools.product(range(h), range(w)))  # row-major


@pytest.mark.parametrize("shape", [(2, 3), (3, 3), (4, 2)])
def test_index_formula_matches_brute_force(shape):
  h, w = shape
  want = np.array(
    [
      [(hi - hj + h - 1) * (2 * w - 1) + (wi - wj + w - 1) for hj, wj in _cells(h, w)]
      for hi, wi in _cells(h, w)
    ]
  )
  np.testing.assert_array_equal(relative_index(shape), want)
  assert set(want.ravel()) == set(range((2 * h - 1) * (2 * w - 1)))  # every entry used


def _random(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _bias(grid_shape=(3, 4), heads=2):
  return RelativeBias2D(grid_shape=grid_shape, num_heads=heads), {"table": _random(35, heads)}


def test_param_shapes_and_bias_init():
  module = RelativeBias2D(grid_shape=(9, 10), num_heads=3)
  table = jax.jit(module.init)(jax.random.key(0))["params"]["table"]
  assert table.shape == (17 * 19, 3)
  assert abs(float(jnp.std(table)) - 0.02) < 0.002  # 001: trunc_normal_(std=.02), bounds ±2
  q = jnp.zeros((1, 20, 4, 8))
  shapes = jax.eval_shape(
    RelativeAttention2D((4, 5), 8, 4, per_head=True).init, jax.random.key(0), q
  )["params"]
  assert shapes["row"].shape == (7, 4, 4) and shapes["col"].shape == (9, 4, 4)


@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_rel_attn_tables_start_at_init_scale_over_root_head_dim(scale):
  """N(0, 1/head_dim) (timm's relative-logit init) times `init_scale`, the knob a sweep tunes."""
  q = jnp.zeros((1, 400, 1, 64))
  module = RelativeAttention2D((20, 20), 64, init_scale=scale)
  params = jax.jit(module.init)(jax.random.key(0), q)["params"]
  tables = jnp.concatenate([params["row"].ravel(), params["col"].ravel()])  # 2 x 39 x 32 draws
  assert abs(float(jnp.std(tables)) / (scale / 8) - 1) < 0.05


def test_bias_reads_table_at_index():
  module, params = _bias()
  bias = np.asarray(module.apply({"params": params}))
  table = np.asarray(params["table"])
  assert table.shape == (5 * 7, 2) and bias.shape == (2, 12, 12)
  index = relative_index((3, 4))
  for h, i, j in itertools.product(range(2), range(12), range(12)):
    assert bias[h, i, j] == table[index[i, j], h]


def _same_offset_same_value(values, shape):
  """values[..., i, j] equal for equal offsets, distinct for distinct offsets."""
  by_offset = {}
  for (i, (hi, wi)), (j, (hj, wj)) in itertools.product(enumerate(_cells(*shape)), repeat=2):
    by_offset.setdefault((hi - hj, wi - wj), []).append(values[..., i, j])
  for vals in by_offset.values():
    np.testing.assert_allclose(
      np.stack(vals), np.broadcast_to(vals[0], np.shape(vals)), rtol=1e-5, atol=1e-6
    )
  firsts = np.stack([v[0] for v in by_offset.values()]).reshape(len(by_offset), -1)
  assert len(np.unique(firsts.round(6), axis=0)) == len(by_offset)


def test_bias_is_translation_invariant():
  module, params = _bias()
  _same_offset_same_value(np.asarray(module.apply({"params": params})), (3, 4))


def test_bias_at_new_shape_resamples_the_table_with_swins_bicubic_by_default():
  module, params = _bias()
  bias = np.asarray(module.apply({"params": params}, (4, 6)))
  assert bias.shape == (2, 24, 24)
  table = resample(params["table"], (5, 7), (7, 11), "bicubic_pytorch")
  np.testing.assert_allclose(
    bias[:, 0, :], np.asarray(table)[relative_index((4, 6))[0]].T, atol=1e-6
  )
  _same_offset_same_value(bias, (4, 6))


def _numpy_rel_logits(q, row, col, shape):
  """003 Eq. 2 term q_ij . r_{a-i, b-j}, r = row[a-i] ++ col[b-j], looped in numpy."""
  h, w = shape
  b, n, heads, _ = q.shape
  out = np.zeros((b, heads, n, n))
  for (qi, (i, j)), (ki, (a, c)) in itertools.product(enumerate(_cells(h, w)), repeat=2):
    for hd in range(heads):
      r = np.concatenate([row[a - i + h - 1, hd], col[c - j + w - 1, hd]])
      out[:, hd, qi, ki] = q[:, qi, hd] @ r
  return out


@pytest.mark.parametrize("per_head", [False, True])
def test_rel_attn_logits_equal_numpy_eq2(per_head):
  shape, heads, d = (3, 4), 2, 6
  q = _random(2, 12, heads, d)
  module = RelativeAttention2D(grid_shape=shape, head_dim=d, num_heads=heads, per_head=per_head)
  per = (heads,) if per_head else ()
  params = {"row": _random(5, *per, 3, seed=1), "col": _random(7, *per, 3, seed=2)}
  row, col = np.asarray(params["row"]), np.asarray(params["col"])
  if not per_head:
    row, col = (np.repeat(t[:, None], heads, axis=1) for t in (row, col))
  out = module.apply({"params": params}, q)
  np.testing.assert_allclose(
    out, _numpy_rel_logits(np.asarray(q), row, col, shape), rtol=1e-5, atol=1e-5
  )


def test_rel_attn_depends_only_on_offsets_key_minus_query():
  shape, d = (3, 3), 4
  q = jnp.broadcast_to(jnp.array([1.0, 2.0, -1.0, 0.5]), (1, 9, 1, d))
  module = RelativeAttention2D(grid_shape=shape, head_dim=d)
  params = {"row": _random(5, 2, seed=1), "col": _random(5, 2, seed=2)}
  _same_offset_same_value(np.asarray(module.apply({"params": params}, q))[0, 0], shape)
  # Only the row offset a - i = +1 (key one row below the query) embedded: nonzero exactly there.
  params = {"row": jnp.zeros((5, 2)).at[3].set(1.0), "col": jnp.zeros((5, 2))}
  out = np.asarray(module.apply({"params": params}, q))[0, 0]
  below = np.array([[a == i + 1 for a, _ in _cells(3, 3)] for i, _ in _cells(3, 3)])
  np.testing.assert_array_equal(out, np.where(below, 3.0, 0.0))


def test_rel_attn_new_shape_resamples_offset_tables():
  q = _random(1, 20, 1, 4)
  module = RelativeAttention2D(grid_shape=(3, 3), head_dim=4)
  params = {"row": _random(5, 2, seed=1), "col": _random(5, 2, seed=2)}
  out = module.apply({"params": params}, q, (4, 5))
  row = np.asarray(resample(params["row"], (5,), (7,), "bicubic"))[:, None]
  col = np.asarray(resample(params["col"], (5,), (9,), "bicubic"))[:, None]
  np.testing.assert_allclose(
    out, _numpy_rel_logits(np.asarray(q), row, col, (4, 5)), rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize(
  "make, match",
  [
    (lambda: RelativeBias2D(num_heads=2), "grid_shape.*positive ints"),
    (lambda: RelativeBias2D(grid_shape=(2, 2, 2), num_heads=2), "grid_shape.*2-D"),
    (lambda: RelativeBias2D(grid_shape=(2, 2), num_heads=0), "num_heads"),
    (lambda: RelativeBias2D(grid_shape=(2, 2), resample_method="nearest"), "method"),
    (lambda: RelativeAttention2D(grid_shape=(2, 2), head_dim=5), "head_dim.*multiple of 2"),
    (lambda: RelativeAttention2D(grid_shape=(2, 2), head_dim=4, per_head=True), "num_heads"),
    (lambda: RelativeAttention2D(grid_shape=(2, 2), head_dim=4, init_scale=0.0), "init_scale"),
  ],
)
def test_bad_config_raises(make, match):
  with pytest.raises(ValueError, match=match):
    make()


def test_mismatched_shapes_raise():
  module = RelativeAttention2D(grid_shape=(2, 3), head_dim=4)
  with pytest.raises(ValueError, match=r"q.*N = prod\(shape"):
    module.init(jax.random.key(0), jnp.zeros((1, 7, 1, 4)))
  with pytest.raises(ValueError, match="shape.*2-D"):
    module.init(jax.random.key(0), jnp.zeros((1, 6, 1, 4)), (6,))
  module = RelativeAttention2D(grid_shape=(2, 3), head_dim=4, num_heads=2, per_head=True)
  with pytest.raises(ValueError, match="3 heads but num_heads=2"):
    module.init(jax.random.key(0), jnp.zeros((1, 6, 3, 4)))
