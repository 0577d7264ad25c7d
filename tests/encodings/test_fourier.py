"""Learnable Fourier features (002 Sec. 3, Alg. 1) against numpy, the kernel, the ablations."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erf

from lfpe import encodings
from lfpe.encodings import coords
from lfpe.encodings.fourier import (
  FourierFeatures,
  LearnableFourierMLP,
  PositionMLP,
  fourier_features,
)

RNG = np.random.default_rng(0)


def np_features(x, wr):
  """002 Eq. 2 / Alg. 1 line 1 in float64."""
  proj = np.asarray(x, np.float64) @ np.asarray(wr, np.float64).T
  return np.concatenate([np.cos(proj), np.sin(proj)], -1) / math.sqrt(2 * wr.shape[0])


def np_mlp(f, p):
  """002 Eq. 6 / Alg. 1 line 2 with the exact GELU."""
  h = f @ np.float64(p["hidden"]["kernel"]) + np.float64(p["hidden"]["bias"])
  h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
  return h @ np.float64(p["out"]["kernel"]) + np.float64(p["out"]["bias"])


def random_params(module, x):
  """Params with the module's own names and shapes, drawn in numpy (init is tested apart)."""
  shapes = jax.eval_shape(module.init, jax.random.key(0), x)["params"]
  return jax.tree.map(lambda s: jnp.float32(RNG.normal(size=s.shape)), shapes)


def np_algorithm1(x, p):
  """Alg. 1 on X [N, G, M] -> [N, D], with the module's own parameters."""
  y = np_mlp(np_features(x, p["wr"]), p)  # [N, G, D/G]
  return y.reshape(x.shape[0], -1)  # line 3


def test_fourier_features_match_eq2():
  x, wr = RNG.normal(size=(5, 3)), RNG.normal(size=(4, 3))
  out = fourier_features(jnp.float32(x), jnp.float32(wr))
  assert out.shape == (5, 8)
  np.testing.assert_allclose(out, np_features(x, wr), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out[0, 0], np.cos(x[0] @ wr[0]) / math.sqrt(8), rtol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_learnable_fourier_mlp_matches_algorithm1_on_boxes(groups):
  box = jnp.float32(RNG.uniform(size=(6, 4)))
  x = coords.boxes(box, groups)  # [6, G, 4 // G]
  module = LearnableFourierMLP(
    dim=24, fourier_dim=16, hidden_dim=8, groups=groups, ndim=4 // groups
  )
  x_in = x[:, 0] if groups == 1 else x  # G = 1: [..., M]
  params = random_params(module, x_in)
  out = jax.jit(module.apply)({"params": params}, x_in)
  assert out.shape == (6, 24)
  np.testing.assert_allclose(out, np_algorithm1(np.asarray(x), params), rtol=1e-5, atol=1e-5)


def test_groups_share_wr_and_mlp_and_fill_channels_in_group_order():
  x = jnp.float32(RNG.uniform(size=(5, 4, 1)))  # G = 4 groups of M = 1
  grouped = LearnableFourierMLP(dim=12, fourier_dim=8, hidden_dim=4, groups=4, ndim=1)
  variables = {"params": random_params(grouped, x)}
  out = jax.jit(grouped.apply)(variables, x)
  single = LearnableFourierMLP(dim=3, fourier_dim=8, hidden_dim=4, ndim=1)  # W2 [H, D/G]
  for g in range(4):
    np.testing.assert_allclose(
      out[:, 3 * g : 3 * g + 3], jax.jit(single.apply)(variables, x[:, g]), rtol=1e-6, atol=1e-6
    )


def test_group_axis_is_optional_only_for_one_group():
  """Algorithm 1: `[N, 1, M]` -> `[N, D]`, the same as `[N, M]` (G = 1)."""
  module = LearnableFourierMLP(dim=8, fourier_dim=8, hidden_dim=4)
  box = jnp.float32(RNG.uniform(size=(3, 4)))
  variables = {"params": random_params(module, box)}
  grouped = jax.jit(module.apply)(variables, coords.boxes(box, 1))  # [3, 1, 4]
  assert grouped.shape == (3, 8)
  np.testing.assert_allclose(grouped, jax.jit(module.apply)(variables, box), rtol=1e-6)
  single = module.apply(variables, box[:1])  # [1, M]: a size-1 axis before M is the group axis
  np.testing.assert_allclose(single, grouped[0], rtol=1e-6)


@pytest.mark.parametrize("name", ["fourier", "fourier_no_mlp", "fixed_fourier_mlp", "mlp"])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_algorithm1_shapes_with_m_from_the_input(name, groups):
  """`[N, G, M]` -> `[N, D]` for every G with M read from the input (no `ndim`)."""
  x = coords.boxes(jnp.float32(RNG.uniform(size=(50, 4))), groups)  # [50, G, 4 // G]
  module = encodings.create(name, dim=64, groups=groups)
  variables = module.init(jax.random.key(0), x)
  assert module.apply(variables, x).shape == (50, 64)
  wr = {**variables.get("params", {}), **variables.get("constants", {})}.get("wr")
  assert wr is None or wr.shape[-1] == 4 // groups  # W_r `[F/2, M]`


def test_ndim_when_given_is_checked_against_the_input():
  module = LearnableFourierMLP(dim=8, fourier_dim=4, hidden_dim=4, groups=2, ndim=2)
  with pytest.raises(ValueError, match="`x` must have last dimension 2"):
    jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((4, 2, 3)))


def test_features_alone_and_mlp_alone_match_numpy():
  x = jnp.float32(RNG.uniform(size=(7, 2, 2)))
  ff = FourierFeatures(dim=12, gamma=0.5, groups=2)
  p = random_params(ff, x)
  assert p["wr"].shape == (3, 2)  # |F| = D/G = 6
  np.testing.assert_allclose(
    jax.jit(ff.apply)({"params": p}, x),
    np_features(x, p["wr"]).reshape(7, 12),
    rtol=1e-5,
    atol=1e-6,
  )
  mlp = PositionMLP(dim=12, hidden_dim=5, groups=2)
  p = random_params(mlp, x)
  assert p["hidden"]["kernel"].shape == (2, 5) and p["out"]["kernel"].shape == (5, 6)
  np.testing.assert_allclose(
    jax.jit(mlp.apply)({"params": p}, x),
    np_mlp(np.asarray(x), p).reshape(7, 12),
    rtol=1e-5,
    atol=1e-5,
  )


def test_mlp_input_scale_scales_the_coordinates_before_the_first_layer():
  """`input_scale` s: the MLP of s·x with the same parameters (the knob a sweep tunes)."""
  x = jnp.float32(RNG.uniform(0, 7, size=(5, 2)))
  scaled, plain = PositionMLP(dim=8, input_scale=0.25), PositionMLP(dim=8)
  p = {"params": random_params(plain, x)}
  np.testing.assert_allclose(scaled.apply(p, x), plain.apply(p, 0.25 * x), rtol=1e-6)
  assert not np.allclose(scaled.apply(p, x), plain.apply(p, x))


def test_eq3_dot_product_depends_only_on_the_difference():
  ff = FourierFeatures(dim=64, gamma=0.7)
  x, y, shift = (jnp.float32(RNG.uniform(-2, 2, size=(10, 2))) for _ in range(3))
  variables = {"params": random_params(ff, x)}
  dot = lambda a, b: jnp.sum(jax.jit(ff.apply)(variables, a) * jax.jit(ff.apply)(variables, b), -1)
  np.testing.assert_allclose(dot(x + shift, y + shift), dot(x, y), atol=2e-6)
  wr = np.float64(variables["params"]["wr"])
  h = np.cos((np.float64(x) - np.float64(y)) @ wr.T).sum(-1) / 64  # h_{W_r}(x - y), Eq. 3
  np.testing.assert_allclose(dot(x, y), h, atol=2e-6)
  np.testing.assert_allclose(dot(x, x), 0.5, rtol=1e-6)  # |F|/2 cos² + sin² terms over |F|


def test_kernel_at_init_is_half_a_gaussian_in_the_distance():
  gamma, f = 2.0, 65536
  ff = FourierFeatures(dim=f, gamma=gamma)
  dist = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
  x = np.zeros((6, 2), np.float32)
  y = np.float32(np.stack([dist * 0.6, dist * 0.8], -1))  # ‖x - y‖ = dist
  variables = jax.jit(ff.init)(jax.random.key(3), jnp.asarray(x))
  wr = np.asarray(variables["params"]["wr"])
  assert wr.shape == (f // 2, 2)  # [F/2, M]
  assert abs(wr.std() - 1 / gamma) < 0.01 / gamma and abs(wr.mean()) < 0.01 / gamma  # Eq. 4
  dot = np.sum(jax.jit(ff.apply)(variables, x) * jax.jit(ff.apply)(variables, y), -1)
  exact = 0.5 * np.exp(-(dist**2) / (2 * gamma**2))
  # sampling error of a mean of 32768 cosines: std <= 0.5 * sqrt(0.5 / 32768) = 0.002
  np.testing.assert_allclose(dot, exact, atol=0.01)
  eq5_as_printed = np.exp(-(dist**2) / gamma**2)
  assert np.max(np.abs(dot - eq5_as_printed)) > 0.3  # Eq. 5 drops the 1/2 and the 2


def _shapes(module, x):
  return jax.tree.map(jnp.shape, jax.eval_shape(module.init, jax.random.key(0), x))


def test_param_shapes_follow_algorithm1():
  module = LearnableFourierMLP(dim=12, fourier_dim=10, hidden_dim=6, groups=3, ndim=3)
  assert _shapes(module, jnp.zeros((2, 3, 3))) == {
    "params": {
      "wr": (5, 3),
      "hidden": {"kernel": (10, 6), "bias": (6,)},
      "out": {"kernel": (6, 4), "bias": (4,)},
    }
  }  # W_r [F/2, M], W1 [F, H], W2 [H, D/G]


def test_fixed_fourier_mlp_keeps_wr_out_of_the_params():
  x = jnp.float32(RNG.uniform(size=(3, 2)))
  trainable = encodings.create("fourier", dim=8, fourier_dim=4096, hidden_dim=4, gamma=2.0)
  module = encodings.create("fixed_fourier_mlp", dim=8, fourier_dim=4096, hidden_dim=4, gamma=2.0)
  assert "wr" in _shapes(trainable, x)["params"]
  variables = jax.jit(module.init)(jax.random.key(0), x)
  assert set(variables["params"]) == {"hidden", "out"}  # what an optimizer sees
  wr = variables["constants"]["wr"]
  assert wr.shape == (2048, 2) and abs(float(wr.std()) - 0.5) < 0.02  # drawn N(0, γ⁻²)
  other = jax.jit(module.init)(jax.random.key(1), x)["constants"]["wr"]
  assert not np.allclose(other, wr)  # drawn from the "params" rng
  np.testing.assert_allclose(
    jax.jit(module.apply)(variables, x), np_mlp(np_features(x, wr), variables["params"]), atol=1e-5
  )


def _count(module, x):
  shapes = jax.eval_shape(module.init, jax.random.key(0), x)["params"]
  return sum(math.prod(s.shape) for s in jax.tree.leaves(shapes))


def test_parameter_counts_of_002_sec_4_1():
  lf_mlp = _count(
    encodings.create("fourier", dim=768, fourier_dim=384, hidden_dim=32), jnp.zeros((1, 2))
  )
  by_hand = 192 * 2 + (384 * 32 + 32) + (32 * 768 + 768)  # W_r, W1 B1, W2 B2
  embed_2d = 2 * 64 * 384  # Reformer's vertical and horizontal [64, 384] tables
  print(f"002 Sec. 4.1: Learnable-Fourier+MLP {lf_mlp:,} params vs Embed-2D {embed_2d:,}")
  assert lf_mlp == by_hand == 38_048 and embed_2d == 49_152


def test_defaults_are_the_papers():
  module = encodings.build("fourier", dim=768, grid_shape=(14, 14), ndim=2)
  assert (module.fourier_dim, module.hidden_dim, module.gamma, module.groups) == (384, 32, 1.0, 1)
  assert module.coords_mode == "unit" and module.kind == "absolute"
  np.testing.assert_allclose(module.grid_coords((2, 3)), coords.grid((2, 3), "unit")[:, None])


@pytest.mark.parametrize(
  "make, match",
  [
    (lambda: LearnableFourierMLP(dim=8, fourier_dim=7), "fourier_dim"),
    (lambda: LearnableFourierMLP(dim=8, gamma=0.0), "gamma"),
    (lambda: LearnableFourierMLP(dim=8, gamma=-1.0), "gamma"),
    (lambda: LearnableFourierMLP(dim=10, groups=4), "dim"),
    (lambda: LearnableFourierMLP(dim=8, coords_mode="pixels"), "coords_mode"),
    (lambda: FourierFeatures(dim=6, groups=2), "dim"),
    (lambda: FourierFeatures(dim=8, gamma=0), "gamma"),
    (lambda: PositionMLP(dim=8, hidden_dim=0), "hidden_dim"),
  ],
)
def test_bad_config_names_the_argument(make, match):
  with pytest.raises(ValueError, match=match):
    make()


@pytest.mark.parametrize(
  "dim, hint",
  [
    ("64", "dim=64"),
    (64.0, "dim=64"),
    (True, "dim=4"),
    (0, "dim=4"),
    (67, "dim=68"),
    ("x", "dim=4"),
  ],
)
def test_a_dim_that_is_not_a_positive_int_multiple_names_the_nearest_one(dim, hint):
  """`dim` must be an int multiple of `groups`; the hint reads the number a string or a float
  names (a config or command line gave '64'), never accepts a bool."""
  with pytest.raises(ValueError, match=rf"`dim`={dim!r} must be a positive int.*use e.g. {hint}\."):
    encodings.create("fourier", dim=dim, groups=4)


@pytest.mark.parametrize(
  "x, match",
  [
    (jnp.zeros((4, 3)), "groups"),
    (jnp.zeros((4, 3, 2)), "groups"),
    (jnp.zeros((2,)), "groups"),
  ],
)
def test_bad_positions_name_the_argument(x, match):
  module = LearnableFourierMLP(dim=8, fourier_dim=4, hidden_dim=4, groups=2)
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(module.init, jax.random.key(0), x)
