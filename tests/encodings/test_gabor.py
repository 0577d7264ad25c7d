"""Gabor + edge position embedding against 000 Eq. 6/8/9 written in numpy, and Table 1."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings import coords
from lfpe.encodings.gabor import GaborEdge, edge_markers


def _reference(params, h, w):
  """000 Eq. 9 on an h x w feature map, loops over cells; edges from indices (Eq. 8)."""
  d = params["bias"].shape[0]
  p = {k: np.asarray(v, np.float64) for k, v in params.items()}
  out = np.zeros((h, w, d))
  for i in range(h):
    for j in range(w):
      x, y = -1 + 2 * j / (w - 1), -1 + 2 * i / (h - 1)  # 000 Fig. 5: corners at -1, 1
      out[i, j] = p["bias"]
      if "w_gabor" in p:
        for axis, v in ((0, y), (1, x)):
          g = np.exp(-(v**2) / (2 * p["sigma"][axis] ** 2)) * np.cos(
            2 * np.pi * v / p["lam"][axis] + p["psi"][axis]
          )
          out[i, j] += g * p["w_gabor"][axis]
      if "w_edge" in p:
        marks = [j == 0, j == w - 1, i == 0, i == h - 1]  # left, right, top, bottom
        out[i, j] += sum(m * p["w_edge"][e] for e, m in enumerate(marks))
  return out.reshape(h * w, d)


def _params(dim, use_gabor=True, use_edge=True, seed=0):
  """Random parameters in the init ranges, bias included (module.init compiles: slow)."""
  rng = np.random.default_rng(seed)
  p = {"bias": rng.normal(size=dim)}
  if use_gabor:
    p.update(
      lam=rng.uniform(0.5, 4.0, (2, dim)),
      sigma=rng.uniform(0.5, 2.0, (2, dim)),
      psi=rng.uniform(-np.pi, np.pi, (2, dim)),
      w_gabor=rng.normal(size=(2, dim)),
    )
  if use_edge:
    p["w_edge"] = rng.normal(size=(4, dim))
  return {k: jnp.asarray(v, jnp.float32) for k, v in p.items()}


def _count(module):
  params = jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, 2)))["params"]
  return {k: v.shape for k, v in params.items()}


@pytest.mark.parametrize("use_gabor, use_edge", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("shape", [(4, 5), (14, 14)])
def test_module_equals_numpy_eq9(use_gabor, use_edge, shape):
  module = GaborEdge(dim=6, use_gabor=use_gabor, use_edge=use_edge)
  params = _params(6, use_gabor, use_edge)
  assert _count(module) == {k: v.shape for k, v in params.items()}
  out = module.apply({"params": params}, shape, method=module.grid)
  np.testing.assert_allclose(out, _reference(params, *shape), rtol=1e-5, atol=1e-5)


def test_hand_computed_entries():
  module = GaborEdge(dim=1)
  params = {
    "bias": jnp.array([0.25]),
    "lam": jnp.array([[1.0], [2.0]]),
    "sigma": jnp.array([[1.0], [1.0]]),
    "psi": jnp.array([[0.0], [0.0]]),
    "w_gabor": jnp.array([[0.0], [1.0]]),
    "w_edge": jnp.array([[10.0], [20.0], [30.0], [40.0]]),
  }
  out = module.apply({"params": params}, (3, 4), method=module.grid).reshape(3, 4)
  # x = 1/3 (column 2) in the middle row: exp(-1/18) cos(pi/3) + B, no edge.
  np.testing.assert_allclose(out[1, 2], 0.5 * math.exp(-1 / 18) + 0.25, rtol=1e-6)
  # top-left corner, x = -1: exp(-1/2) cos(-pi) + B + W_left + W_top.
  np.testing.assert_allclose(out[0, 0], -math.exp(-0.5) + 0.25 + 10 + 30, rtol=1e-6)
  # bottom-right corner, x = 1: exp(-1/2) cos(pi) + B + W_right + W_bottom.
  np.testing.assert_allclose(out[2, 3], -math.exp(-0.5) + 0.25 + 20 + 40, rtol=1e-6)


def test_x_gabor_makes_longitudinal_stripes():
  """Coordinates are (y, x): a channel with only W_x set is constant down each column."""
  module = GaborEdge(dim=3, use_edge=False)
  params = _params(3, use_edge=False)
  params["w_gabor"] = params["w_gabor"].at[0].set(0.0)
  out = np.asarray(module.apply({"params": params}, (5, 6), method=module.grid)).reshape(5, 6, 3)
  np.testing.assert_allclose(out, np.broadcast_to(out[:1], out.shape), atol=1e-7)
  assert np.ptp(out[0], axis=0).min() > 0


@pytest.mark.parametrize("shape", [(2, 2), (3, 7), (14, 14), (37, 50)])
def test_edge_markers_exactly_on_the_four_borders(shape):
  h, w = shape
  marks = np.asarray(edge_markers(coords.grid(shape, "centered"))).reshape(h, w, 4)
  i, j = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
  want = np.stack([j == 0, j == w - 1, i == 0, i == h - 1], axis=-1).astype(np.float32)
  np.testing.assert_array_equal(marks, want)


@pytest.mark.parametrize(
  "use_gabor, use_edge, per_channel, table1",
  [(True, True, 13, 10.7), (True, False, 9, 7.6), (False, True, 5, 4.6)],
)
def test_param_counts_match_000_table1(use_gabor, use_edge, per_channel, table1):
  dim = 768  # ViT-B / DeiT-B
  shapes = _count(GaborEdge(dim=dim, use_gabor=use_gabor, use_edge=use_edge))
  count = sum(math.prod(s) for s in shapes.values())
  assert count == per_channel * dim
  # Table 1 also counts one learned vector for the class token (LE: 197 * 768 = 151K).
  assert math.floor((count + dim) / 100) / 10 == table1


def test_init_ranges():
  params = jax.jit(GaborEdge(dim=4096).init)(jax.random.key(0), jnp.zeros((1, 2)))["params"]
  lam, sigma, psi = (np.asarray(params[k]) for k in ("lam", "sigma", "psi"))
  assert 0.5 <= lam.min() and lam.max() <= 4.0 and 0.5 <= sigma.min() and sigma.max() <= 2.0
  assert -math.pi <= psi.min() and psi.max() <= math.pi and abs(psi.mean()) < 0.1
  assert abs(float(np.std(params["w_edge"])) - 0.02) < 0.002
  np.testing.assert_array_equal(params["bias"], 0.0)


def test_validation():
  with pytest.raises(ValueError, match="use_gabor and use_edge.*none"):
    GaborEdge(dim=8, use_gabor=False, use_edge=False)
  with pytest.raises(ValueError, match="sigma_range"):
    GaborEdge(dim=8, sigma_range=(0.0, 1.0))
  with pytest.raises(ValueError, match="dim"):
    GaborEdge(dim=-2)
  with pytest.raises(ValueError, match="coords.*last dimension 2"):
    GaborEdge(dim=8).init(jax.random.key(0), jnp.zeros((4, 3)))
