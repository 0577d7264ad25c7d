"""2-D RoPE (Heo et al. 2024): relative dot products, norms, numpy rotation, Heo's init."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings.rotary import Rotary2D, axial_freqs

HEADS, D = 2, 8


def _random(*shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _module_and_params(mode):
  module = Rotary2D(head_dim=D, num_heads=HEADS, mode=mode)
  params = {} if mode == "axial" else {"freqs": _random(2, HEADS, D // 2, seed=9)}
  return module, {"params": params}


def _dots(q, k):
  return jnp.einsum("bnhd,bmhd->bhnm", q, k)


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_dot_products_depend_only_on_offsets(mode):
  module, variables = _module_and_params(mode)
  q, k = _random(2, 6, HEADS, D, seed=1), _random(2, 6, HEADS, D, seed=2)
  pos = jnp.asarray(np.random.default_rng(3).integers(0, 5, (6, 2)), jnp.float32)
  dots = _dots(module.apply(variables, q, pos), module.apply(variables, k, pos))
  for shift in ([3.0, -2.0], [40.0, 17.0], [0.5, 0.25]):  # also beyond any training grid
    moved = pos + jnp.array(shift)
    dots2 = _dots(module.apply(variables, q, moved), module.apply(variables, k, moved))
    np.testing.assert_allclose(dots2, dots, rtol=1e-4, atol=1e-4)
  moved = pos.at[0].add(1.0)  # one token moved: its dot products change
  dots3 = _dots(module.apply(variables, q, moved), module.apply(variables, k, moved))
  assert float(jnp.abs(dots3 - dots)[:, :, 0, 1:].min()) > 1e-4


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_norm_preserved_and_offset_zero_is_plain_dot(mode):
  module, variables = _module_and_params(mode)
  q, k = _random(1, 12, HEADS, D, seed=4), _random(1, 12, HEADS, D, seed=5)
  pos = module.grid_coords((3, 4)) * 3.0
  rq, rk = module.apply(variables, q, pos), module.apply(variables, k, pos)
  np.testing.assert_allclose(jnp.linalg.norm(rq, axis=-1), jnp.linalg.norm(q, axis=-1), rtol=1e-5)
  same = jnp.einsum("bnhd,bnhd->bhn", rq, rk)  # q and k at the same position
  np.testing.assert_allclose(same, jnp.einsum("bnhd,bnhd->bhn", q, k), rtol=1e-4, atol=1e-5)
  assert float(jnp.abs(rq - q).max()) > 0.1  # yet the vectors do rotate
  np.testing.assert_allclose(module.apply(variables, q, jnp.zeros((12, 2))), q, atol=1e-7)


def test_axial_equals_hand_written_numpy_rotation():
  module = Rotary2D(head_dim=D, num_heads=HEADS, mode="axial")
  x = _random(1, 12, HEADS, D, seed=6)
  pos = module.grid_coords((3, 4))  # (y, x)
  out = np.asarray(module.apply({}, x, pos))
  xn, want = np.asarray(x, np.float64), np.zeros((1, 12, HEADS, D))
  for n, (y, xc) in enumerate(np.asarray(pos)):
    for i in range(D // 2):  # pair (2i, 2i+1); first D/4 pairs use x (column), rest y (row)
      k, coord = (i, xc) if i < D // 4 else (i - D // 4, y)
      a = coord / 100.0 ** (4 * k / D)  # Heo's axial theta = 100
      c, s = math.cos(a), math.sin(a)
      re, im = xn[0, n, :, 2 * i], xn[0, n, :, 2 * i + 1]
      want[0, n, :, 2 * i], want[0, n, :, 2 * i + 1] = re * c - im * s, re * s + im * c
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_mixed_with_axial_frequencies_equals_axial():
  x, pos = _random(1, 12, HEADS, D, seed=7), Rotary2D(head_dim=D).grid_coords((3, 4))
  freqs = jnp.broadcast_to(axial_freqs(D, 100.0), (2, HEADS, D // 2))
  mixed = Rotary2D(head_dim=D, num_heads=HEADS, mode="mixed").apply(
    {"params": {"freqs": freqs}}, x, pos
  )
  axial = Rotary2D(head_dim=D, num_heads=HEADS, mode="axial").apply({}, x, pos)
  np.testing.assert_allclose(mixed, axial, atol=1e-6)


def test_mixed_init_follows_heo():
  heads, d = 3, 16
  module = Rotary2D(head_dim=d, num_heads=heads, mode="mixed")
  x = jnp.zeros((1, 1, heads, d))
  freqs = np.asarray(
    jax.jit(module.init)(jax.random.key(0), x, jnp.zeros((1, 2)))["params"]["freqs"]
  )  # [2 (y, x), heads, d/2]
  mag = 1.0 / 10.0 ** (np.arange(0, d, 4) / d)  # theta 10, d/4 magnitudes
  np.testing.assert_allclose(np.hypot(freqs[0], freqs[1]), np.tile(mag, (heads, 2)), rtol=1e-5)
  direction = np.arctan2(freqs[0], freqs[1])  # angle of (fx, fy) per pair
  q = d // 4
  np.testing.assert_allclose(np.cos(direction[:, :q] - direction[:, :1]), 1.0, atol=1e-5)
  np.testing.assert_allclose(
    np.cos(direction[:, q:] - direction[:, :1] - np.pi / 2), 1.0, atol=1e-5
  )
  assert np.ptp(direction[:, 0]) > 1e-3  # a random direction per head


def test_grid_coords_are_row_major_indices():
  np.testing.assert_array_equal(
    Rotary2D(head_dim=4).grid_coords((2, 3)), [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
  )


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(head_dim=6), "head_dim.*multiple of 4"),
    (dict(head_dim=8, mode="spiral"), "mode.*axial"),
    (dict(head_dim=8, mode="mixed"), "num_heads"),
    (dict(head_dim=8, theta=-1.0), "theta"),
  ],
)
def test_bad_config_raises(kwargs, match):
  with pytest.raises(ValueError, match=match):
    Rotary2D(**kwargs)


def test_bad_shapes_raise():
  module = Rotary2D(head_dim=8, num_heads=2, mode="mixed")
  with pytest.raises(ValueError, match="coords.*last dimension 2"):
    module.init(jax.random.key(0), jnp.zeros((1, 4, 2, 8)), jnp.zeros((4, 3)))
  with pytest.raises(ValueError, match=r"x.*\[B, 5, 2, 8\]"):
    module.init(jax.random.key(0), jnp.zeros((1, 4, 2, 8)), jnp.zeros((5, 2)))
  with pytest.raises(ValueError, match=r"x.*\[B, 4, 2, 8\]"):
    module.init(jax.random.key(0), jnp.zeros((1, 4, 3, 8)), jnp.zeros((4, 2)))
