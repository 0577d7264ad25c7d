"""BEiT's geometric resize of relative-offset tables, against BEiT's own steps and FITPACK."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import interpolate

from lfpe import encodings
from lfpe import nnx as pe
from lfpe.encodings import geometric
from lfpe.encodings.learned import EmbedND
from lfpe.encodings.relative import RelativeBias2D, relative_bias
from lfpe.encodings.resample import resample


def beit_positions(src_size: int, dst_size: int) -> list[float]:
  """BEiT's fine-tuning code, step by step: bisection for q, then the distances."""
  left, right = 1.01, 1.5
  while right - left > 1e-6:
    q = (left + right) / 2.0
    gp = 1.0 * (1.0 - q ** (src_size // 2)) / (1.0 - q)  # geometric_progression(1, q, n)
    if gp > dst_size // 2:
      right = q
    else:
      left = q
  dis, cur = [], 1
  for i in range(src_size // 2):
    dis.append(cur)
    cur += q ** (i + 1)
  return [-d for d in reversed(dis)] + [0] + dis


@pytest.mark.parametrize(("old", "new"), [(27, 47), (13, 23), (7, 9), (9, 13)])
def test_positions_are_beits(old, new):
  np.testing.assert_allclose(geometric.positions(old, new), beit_positions(old, new), rtol=1e-12)
  assert geometric.positions(old, new)[-1] == pytest.approx(new // 2, abs=1e-4)


def fitpack(table: np.ndarray, old_shape, new_shape) -> np.ndarray:
  """What BEiT's `interp2d(x, y, z, kind='cubic')(dx, dy)` computes, per head: FITPACK's
  rectangular-grid interpolating spline (s = 0) on BEiT's positions, read at integers."""
  xs = [np.asarray(beit_positions(o, n)) for o, n in zip(old_shape, new_shape, strict=True)]
  new = [np.arange(-(n // 2), n // 2 + 1.0) for n in new_shape]
  heads = table.reshape(*old_shape, -1)
  out = [
    interpolate.RectBivariateSpline(*xs, heads[..., h], kx=3, ky=3, s=0)(*new)
    for h in range(heads.shape[-1])
  ]
  return np.stack(out, -1).reshape(-1, heads.shape[-1])


@pytest.mark.parametrize(("old", "new"), [((13, 13), (23, 23)), ((13, 9), (23, 15))])
def test_resize_is_fitpacks_spline_on_beits_positions(old, new):
  table = np.random.default_rng(0).normal(0, 0.02, (np.prod(old), 3))
  ours = geometric.resize(jnp.asarray(table, jnp.float32), old, new)
  np.testing.assert_allclose(np.asarray(ours), fitpack(table, old, new), atol=2e-7)


def test_near_offsets_keep_their_learned_values_and_prefix_rows_stay():
  old, new = (13, 13), (23, 23)
  table = jax.random.normal(jax.random.key(1), (3 + 13 * 13, 2))
  out = resample(table, old, new, "beit_geometric", num_prefix=3)
  np.testing.assert_array_equal(out[:3], table[:3])  # BEiT's extra (class-token) rows
  before, after = table[3:].reshape(13, 13, 2), out[3:].reshape(23, 23, 2)
  np.testing.assert_allclose(after[10:13, 10:13], before[5:8, 5:8], atol=1e-6)  # 0 and ±1
  np.testing.assert_allclose(after[0, 0], before[0, 0], atol=1e-3)  # the far corner moves out


def test_relative_bias_module_resizes_geometrically_under_jit_and_grad():
  module = RelativeBias2D(grid_shape=(7, 7), num_heads=2, resample_method="beit_geometric")
  params = module.init(jax.random.key(0))
  bias = jax.jit(lambda p: module.apply(p, (12, 12)))(params)
  table = params["params"]["table"]
  expected = relative_bias(geometric.resize(table, (13, 13), (23, 23)), (12, 12))
  np.testing.assert_allclose(bias, expected, atol=1e-7)
  grad = jax.grad(lambda p: module.apply(p, (12, 12)).sum())(params)
  assert float(jnp.abs(grad["params"]["table"]).sum()) > 0


def test_bad_uses_fail_with_the_fix():
  with pytest.raises(ValueError, match="relative-offset tables"):
    geometric.resize(jnp.zeros((16, 1)), (4, 4), (6, 6))  # an absolute table's even axes
  with pytest.raises(ValueError, match="only enlarges"):
    geometric.resize(jnp.zeros((169, 1)), (13, 13), (9, 9))
  with pytest.raises(ValueError, match="cannot stretch"):
    geometric.resize(jnp.zeros((9, 1)), (3, 3), (41, 41))
  with pytest.raises(ValueError, match="it is for relative tables"):
    EmbedND(dim=8, grid_shape=(4, 4), resample_method="beit_geometric").check()
  with pytest.raises(ValueError, match="align_corners"):
    RelativeBias2D(grid_shape=(7, 7), resample_method="beit_geometric", align_corners=True).check()


def test_the_nnx_module_resizes_as_the_linen_one():
  spec = "rel_bias_2d(resample_method='beit_geometric')"
  pos = pe.build(spec, grid_shape=(7, 7), num_heads=2, rngs=nnx.Rngs(0))
  linen = encodings.build(spec, grid_shape=(7, 7), num_heads=2)
  np.testing.assert_allclose(pos((12, 12)), linen.apply(pos.variables(), (12, 12)), atol=1e-7)
