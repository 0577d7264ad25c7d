"""N-D axial RoPE: `ndim=2` is `rope_axial`; in 3-D (video) the score depends on the offset only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import rotary, rotary_nd


def test_two_dimensions_are_rope_axial_exactly():
  x = jax.random.normal(jax.random.key(0), (2, 12, 3, 16))
  coords = rotary.Rotary2D(head_dim=16).grid_coords((3, 4))
  want = rotary.rope(x, coords, rotary.axial_freqs(16, 100.0))
  got = encodings.create("rope_axial_nd", ndim=2, head_dim=16).apply({}, x, coords)
  np.testing.assert_array_equal(got, want)


def test_video_scores_depend_on_the_3d_offset_only():
  pos = encodings.create("rope_axial_nd", ndim=3, head_dim=24)
  q, k = jax.random.normal(jax.random.key(1), (2, 1, 1, 1, 24))
  score = lambda p, r: jnp.sum(
    pos.apply({}, q, jnp.asarray([p], jnp.float32))
    * pos.apply({}, k, jnp.asarray([r], jnp.float32))
  )
  base = score((1, 2, 3), (0, 5, 1))
  np.testing.assert_allclose(score((4, 7, 0), (3, 10, -2)), base, rtol=1e-4)  # same offset
  assert abs(float(score((2, 2, 3), (0, 5, 1))) - float(base)) > 1e-3  # time offset matters


def test_each_axis_rotates_its_own_block_of_pairs():
  freqs = np.asarray(rotary_nd.axial_nd_freqs(24, 3, 100.0))[:, 0]  # [3, 12]
  assert (freqs[0, 8:] > 0).all() and not freqs[0, :8].any()  # time: the last block
  assert (freqs[2, :4] > 0).all() and not freqs[2, 4:].any()  # width: the first block
  np.testing.assert_allclose(freqs[1, 4:8], 1 / 100.0 ** (np.arange(4) * 6 / 24))


def test_grid_and_head_dim_are_checked():
  pos = encodings.create("rope_axial_nd", ndim=3, head_dim=24)
  assert pos.grid_coords((2, 3, 4)).shape == (24, 3)
  with pytest.raises(ValueError, match="has not ndim=3 axes"):
    pos.grid_coords((3, 4))
  with pytest.raises(ValueError, match="head_dim"):
    encodings.create("rope_axial_nd", ndim=3, head_dim=16)


def test_mixed_nd_scores_depend_on_the_3d_offset_per_head():
  pos = encodings.create("rope_mixed_nd", ndim=3, head_dim=24, num_heads=2)
  params = pos.init(jax.random.key(0), jnp.ones((1, 1, 2, 24)), jnp.zeros((1, 3)))
  q, k = jax.random.normal(jax.random.key(1), (2, 1, 1, 2, 24))
  score = lambda p, r: jnp.sum(
    pos.apply(params, q, jnp.asarray([p], jnp.float32))
    * pos.apply(params, k, jnp.asarray([r], jnp.float32)),
    axis=-1,
  )  # [1, 1, heads]
  base = score((1, 2, 3), (0, 5, 1))
  np.testing.assert_allclose(score((4, 7, 0), (3, 10, -2)), base, rtol=1e-4, atol=1e-4)
  assert float(jnp.abs(score((2, 2, 3), (0, 5, 1)) - base).max()) > 1e-3


def test_mixed_nd_init_is_an_orthonormal_basis_per_head_at_axial_magnitudes():
  freqs = rotary_nd.mixed_nd_freqs_init(10.0)(jax.random.key(3), (3, 4, 12))  # d = 24
  mag = np.asarray(rotary_nd.nd_magnitudes(24, 3, 10.0))  # 4 pairs per block
  blocks = np.asarray(freqs).reshape(3, 4, 3, 4) / mag  # [axis, head, block, pair]
  np.testing.assert_allclose(blocks, blocks[..., :1].repeat(4, -1), rtol=1e-5)  # one direction
  for h in range(4):
    basis = blocks[:, h, :, 0]  # [axis, block]
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-5)
  assert not np.allclose(blocks[:, 0], blocks[:, 1])  # each head its own basis
  with pytest.raises(ValueError, match="num_heads"):
    encodings.create("rope_mixed_nd", ndim=3, head_dim=24).init(
      jax.random.key(0), jnp.ones((1, 1, 2, 24)), jnp.zeros((1, 3))
    )
