"""SwinV2's log-spaced continuous position bias against its formulas and its transfer property."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import relative, relative_cpb
from lfpe.models import vit


def _cpb(grid=(4, 4), heads=2, **options):
  spec = encodings.spec("rel_cpb_2d", **options)
  return encodings.build(spec, dim=32, grid_shape=grid, num_heads=heads, head_dim=16, ndim=2)


def test_log_spaced_offsets_by_hand():
  """A 3x3 training grid: offsets −2..2 scale to −8..8, then sign · log2(1 + |x|) / log2(8)."""
  got = relative_cpb.log_spaced_offsets((3, 3), (3, 3)).reshape(5, 5, 2)
  want = np.array([-np.log2(9), -np.log2(5), 0.0, np.log2(5), np.log2(9)]) / 3.0
  np.testing.assert_allclose(got[:, 2, 0], want, rtol=1e-6)  # Δy down the rows
  np.testing.assert_allclose(got[2, :, 1], want, rtol=1e-6)  # Δx along the columns
  # At twice the grid the same log scale runs on: offset 5 of a 3-grid is 20 → log2(21)/3.
  wide = relative_cpb.log_spaced_offsets((6, 6), (3, 3)).reshape(11, 11, 2)
  assert wide[10, 5, 0] == pytest.approx(np.log2(21) / 3, rel=1e-6)


def test_span_scales_the_offsets_before_the_log():
  """`span` s (the knob a sweep tunes): offsets −2..2 of a 3-grid scale to −s..s, then the
  log divided by SwinV2's log2(8) as before; the module reads it (s = 8, SwinV2's, default)."""
  got = relative_cpb.log_spaced_offsets((3, 3), (3, 3), span=4.0).reshape(5, 5, 2)
  want = np.array([-np.log2(5), -np.log2(3), 0.0, np.log2(3), np.log2(5)]) / 3.0
  np.testing.assert_allclose(got[:, 2, 0], want, rtol=1e-6)
  variables = _cpb(grid=(3, 3)).init(jax.random.key(0))
  default, wide = (np.asarray(_cpb(grid=(3, 3), span=s).apply(variables)) for s in (8.0, 4.0))
  assert not np.allclose(default, wide)
  np.testing.assert_allclose(default, np.asarray(_cpb(grid=(3, 3)).apply(variables)))


def test_the_bias_is_16_sigmoid_of_the_mlp_gathered_by_swins_index():
  module = _cpb()
  variables = module.init(jax.random.key(0))
  params = variables["params"]
  coords = relative_cpb.log_spaced_offsets((4, 4), (4, 4))
  hidden = np.maximum(coords @ params["hidden"]["kernel"] + params["hidden"]["bias"], 0)
  table = 16 / (1 + np.exp(-(hidden @ params["out"]["kernel"])))  # [49, heads]
  want = np.transpose(table[relative.relative_index((4, 4))], (2, 0, 1))
  got = np.asarray(module.apply(variables))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert got.shape == (2, 16, 16) and 0 < got.min() and got.max() < 16
  assert "bias" not in params["out"]  # SwinV2: the second layer has no bias


def test_an_offset_seen_in_training_keeps_its_bias_on_a_larger_grid():
  module = _cpb()
  variables = module.init(jax.random.key(1))
  small = np.asarray(module.apply(variables))  # [heads, 16, 16]
  large = np.asarray(module.apply(variables, (6, 6)))  # [heads, 36, 36]
  rows, cols = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
  inner = (rows * 6 + cols).reshape(-1)  # the 4x4 corner of the 6x6 grid
  np.testing.assert_allclose(large[:, inner][:, :, inner], small, rtol=1e-6)


def test_a_vit_with_it_runs_at_other_image_sizes():
  model = vit.Model(3, variant="mu/4", image_size=16, posemb="rel_cpb_2d(hidden_dim=16)")
  variables = model.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  for size in (16, 24):
    out = model.apply(variables, jnp.ones((2, size, size, 3)), train=False)
    assert out.shape == (2, 3) and np.isfinite(np.asarray(out)).all()


def test_bad_fields_name_the_field():
  with pytest.raises(ValueError, match="hidden_dim"):
    _cpb(hidden_dim=0)
  with pytest.raises(ValueError, match="`span` must be a positive number"):
    _cpb(span=0.0)


def test_packed_gives_each_example_its_own_grids_bias():
  """NaFlex-packed grids (2x3 and 4x4 cells, padded to 16 tokens): each example's block of
  the packed bias is the bias of its own grid from the same MLP."""
  module = _cpb(grid=(4, 4))
  variables = module.init(jax.random.key(3))
  cells = [np.argwhere(np.ones(shape, bool)) for shape in ((2, 3), (4, 4))]
  index = np.stack([np.pad(c, ((0, 16 - len(c)), (0, 0))) for c in cells])
  packed = np.asarray(module.apply(variables, jnp.asarray(index), method="packed"))
  assert packed.shape == (2, 2, 16, 16)
  for b, shape in enumerate(((2, 3), (4, 4))):
    n = shape[0] * shape[1]
    alone = np.asarray(module.apply(variables, shape))
    np.testing.assert_allclose(packed[b, :, :n, :n], alone, rtol=1e-6, atol=1e-6)


def test_the_mlp_starts_as_swinv2s_a_nearly_constant_bias_of_8():
  """SwinV2 initialises every Linear with N(0, 0.02²) weights and zero biases: the bias starts
  at 16·sigmoid(≈0) ≈ 8 at every offset (flax's default init spread it over 3-12)."""
  module = relative_cpb.RelativeCPB2D(grid_shape=(7, 7), num_heads=4)
  variables = module.init(jax.random.key(0))
  params = variables["params"]
  for kernel in (params["hidden"]["kernel"], params["out"]["kernel"]):
    assert float(jnp.std(kernel)) == pytest.approx(0.02, rel=0.1)
  np.testing.assert_array_equal(params["hidden"]["bias"], 0.0)
  bias = module.apply(variables)
  assert abs(float(bias.mean()) - 8.0) < 0.05 and float(bias.std()) < 0.1
