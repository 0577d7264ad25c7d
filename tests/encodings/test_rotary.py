"""2-D RoPE (Heo et al. 2024): relative dot products, norms, numpy rotation, Heo's init."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings import coords as coords_lib
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


def _dinov3_rope(x: np.ndarray, h: int, w: int, base: float = 100.0) -> np.ndarray:
  """DINOv3's RopePositionEmbedding (separate normalisation, no augmentation) and rope_apply
  on `x [N, D]`, written from its equations: periods base^(2k/(D/2)), rotate-half layout."""
  d = x.shape[-1]
  periods = base ** (2 * np.arange(d // 4) / (d // 2))
  ch, cw = (np.arange(0.5, h) / h), (np.arange(0.5, w) / w)
  coords = 2 * np.stack(np.meshgrid(ch, cw, indexing="ij"), -1).reshape(-1, 2) - 1
  angles = (2 * np.pi * coords[:, :, None] / periods).reshape(len(coords), -1)
  angles = np.concatenate([angles, angles], -1)
  half = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], -1)
  return x * np.cos(angles) + half * np.sin(angles)


def test_dinov3_coords_equal_dinov3_rope_up_to_its_channel_layout():
  h, w, d = 3, 5, 16
  x = np.random.default_rng(3).normal(size=(h * w, d))
  # lfpe's channel c is DINOv3's perm[c]: lfpe pair i (x on the first d/4, y after) is
  # DINOv3's rotate-half pair (j, j + d/2), j = d/4 + i (x) or i - d/4 (y): y comes first.
  pairs = [d // 4 + i if i < d // 4 else i - d // 4 for i in range(d // 2)]
  perm = np.ravel([[j, j + d // 2] for j in pairs])
  module = Rotary2D(head_dim=d, coords_mode="dinov3")  # theta 100: DINOv3's base
  got = module.apply({}, jnp.asarray(x[:, perm])[None, :, None], module.grid_coords((h, w)))
  np.testing.assert_allclose(got[0, :, 0], _dinov3_rope(x, h, w)[:, perm], rtol=1e-5, atol=1e-5)
  # any grid spans ±2π(1 - 1/n), finer when larger; packed batches read the same coordinates
  wide = np.asarray(module.grid_coords((6, 10)))
  np.testing.assert_allclose(wide.max(0), 2 * np.pi * (1 - 1 / np.array([6, 10])), rtol=1e-6)
  index = coords_lib.grid((h, w), "index")[None]
  packed = module.packed_coords(index, jnp.asarray([[h, w]]))
  np.testing.assert_allclose(packed[0], module.grid_coords((h, w)), rtol=1e-6)


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
    (dict(head_dim=8, coords_mode="unit"), "coords_mode.*dinov3"),
    (dict(head_dim=8, coords_mode="dinov3", scaling="pi", grid_shape=(4, 4)), "Drop one"),
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
