"""Policies for a new resolution, against formulas: RoPE position interpolation and NTK-aware
scaling (the relative-bias resize is checked against an explicit bicubic resize in
test_relative.py, table resampling against PyTorch's kernels in test_resample.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import coords as coords_lib
from lfpe.encodings import rotary

HEAD_DIM, TRAIN = 16, (8, 8)


def _rope(spec: str):
  return encodings.build(spec, dim=32, grid_shape=TRAIN, num_heads=2, head_dim=HEAD_DIM, ndim=2)


def _apply(module, shape, seed=0):
  x = jax.random.normal(jax.random.key(seed), (1, shape[0] * shape[1], 2, HEAD_DIM))
  coords = module.grid_coords(shape)
  variables = module.init(jax.random.key(1), x, coords, shape)
  return x, coords, np.asarray(module.apply(variables, x, coords, shape))


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_pi_at_the_training_grid_is_the_identity(mode):
  plain, pi = _rope(f"rope_{mode}"), _rope(f"rope_{mode}(scaling='pi')")
  np.testing.assert_array_equal(pi.grid_coords(TRAIN), plain.grid_coords(TRAIN))


def test_pi_scales_each_axis_by_the_training_length_over_the_new_one():
  pi = _rope("rope_axial(scaling='pi')")
  got = np.asarray(pi.grid_coords((16, 24)))
  expected = np.asarray(coords_lib.grid((16, 24), "index")) * np.array([8 / 16, 8 / 24])
  np.testing.assert_allclose(got, expected)
  # the largest coordinate is (L' − 1)·L/L' = L − L/L' (here 7.5): inside [0, L)
  assert got[:, 0].max() == pytest.approx(8 - 8 / 16)


@pytest.mark.parametrize("mode", ["axial", "mixed"])
def test_pi_never_stretches_a_smaller_grid(mode):
  """Chen et al.'s PI only extends (rotary-embedding-torch asserts `interpolate_factor >= 1`):
  a 4x16 grid keeps its steps of 1 along the shorter axis, not 8/4 = 2."""
  plain, pi = _rope(f"rope_{mode}"), _rope(f"rope_{mode}(scaling='pi')")
  got = np.asarray(pi.grid_coords((4, 16)))
  want = np.asarray(plain.grid_coords((4, 16))) * np.array([1.0, 8 / 16])
  np.testing.assert_allclose(got, want)
  index = jnp.asarray(coords_lib.grid((4, 16), "index"))[None]
  packed = pi.packed_coords(index, jnp.asarray([[4, 16]]))
  np.testing.assert_allclose(np.asarray(packed)[0], want)


@pytest.mark.parametrize("scaling", ["pi", "ntk", "yarn"])
def test_trained_grid_sets_the_training_length_of_every_scaling(scaling):
  """A model trained up to 12x12 (mixed resolution) whose nominal grid is 8x8: with
  `trained_grid=(12, 12)` each policy is the identity at 12x12 (a size it trained at) and at
  16x16 equals the policy of a model whose grid is 12x12."""
  mode = "mixed" if scaling == "pi" else "axial"
  spec = f"rope_{mode}(scaling={scaling!r}"
  told = _rope(f"{spec}, trained_grid=(12, 12))")
  twelve = encodings.build(
    f"{spec})", dim=32, grid_shape=(12, 12), num_heads=2, head_dim=HEAD_DIM, ndim=2
  )
  plain = _rope(f"rope_{mode}")
  for shape in ((12, 12), (16, 16)):
    _, _, got = _apply(told, shape)
    _, _, want = _apply(twelve, shape)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_array_equal(told.grid_coords(shape), twelve.grid_coords(shape))
  _, _, at_twelve = _apply(plain, (12, 12))
  np.testing.assert_allclose(_apply(told, (12, 12))[2], at_twelve, atol=1e-6)
  if scaling == "pi":
    # without it, L is the nominal 8: PI compresses the 12x12 grid the model trained at
    assert np.asarray(_rope(f"{spec})").grid_coords((12, 12))).max() < 8
    index = jnp.asarray(coords_lib.grid((16, 16), "index"))[None]
    packed = told.packed_coords(index, jnp.asarray([[16, 16]]))
    np.testing.assert_allclose(np.asarray(packed)[0], twelve.grid_coords((16, 16)))


def test_ntk_at_the_training_grid_is_the_identity():
  _, _, plain = _apply(_rope("rope_axial"), TRAIN)
  _, _, ntk = _apply(_rope("rope_axial(scaling='ntk')"), TRAIN)
  np.testing.assert_allclose(ntk, plain, atol=1e-6)


def test_ntk_matches_the_closed_form_of_its_base_change():
  shape = (16, 24)  # s = 2 on y, 3 on x
  x, coords, got = _apply(_rope("rope_axial(scaling='ntk')"), shape)
  d_axis = HEAD_DIM // 2
  theta_y, theta_x = (100.0 * s ** (d_axis / (d_axis - 2)) for s in (2.0, 3.0))
  freqs = rotary.axial_freqs(HEAD_DIM, theta_y, theta_x)
  np.testing.assert_allclose(got, np.asarray(rotary.rope(x, coords, freqs)), atol=1e-5)
  # The NTK property: the highest frequency is kept, the lowest divided by s.
  plain = np.asarray(rotary.magnitudes(HEAD_DIM, 100.0))
  scaled = np.asarray(rotary.magnitudes(HEAD_DIM, theta_y))
  assert scaled[0] == pytest.approx(plain[0]) and scaled[-1] == pytest.approx(plain[-1] / 2)


def test_ntk_reads_the_test_length_from_the_grid_not_from_augmented_coordinates():
  """Under DINOv3-style augmentation the largest coordinate is not L' − 1 (17.7 for a grid of
  16 in the issue); the length comes from `shape`, as models pass it."""
  shape = (16, 24)
  module = _rope("rope_axial(scaling='ntk')")
  x, coords, want = _apply(module, shape)
  jittered = coords_lib.augment(coords, jax.random.key(4), shift=0.1, jitter=1.1, rescale=1.25)
  assert float(np.max(np.asarray(jittered)[:, 0])) + 1 != 16.0
  variables = module.init(jax.random.key(1), x, coords, shape)
  got = module.apply(variables, x, jittered, shape)
  d_axis = HEAD_DIM // 2
  theta_y, theta_x = (100.0 * s ** (d_axis / (d_axis - 2)) for s in (2.0, 3.0))
  freqs = rotary.axial_freqs(HEAD_DIM, theta_y, theta_x)
  np.testing.assert_allclose(got, np.asarray(rotary.rope(x, jittered, freqs)), atol=1e-5)


@pytest.mark.parametrize("scaling", ["ntk", "yarn"])
def test_ntk_and_yarn_without_the_grid_stop_with_a_message(scaling):
  """Coordinates do not tell the length L' (augmented ones least): a call without `shape`
  stops, unless `ntk_factor` fixes the factor."""
  module = _rope(f"rope_axial(scaling='{scaling}')")
  x = jnp.zeros((1, 64, 2, HEAD_DIM))
  with pytest.raises(ValueError, match=f"scaling='{scaling}' needs the grid's `shape`"):
    module.init(jax.random.key(0), x, module.grid_coords(TRAIN))
  fixed = _rope(f"rope_axial(scaling='{scaling}', ntk_factor=2.0)")
  fixed.init(jax.random.key(0), x, fixed.grid_coords(TRAIN))


@pytest.mark.parametrize("scaling", ["ntk", "yarn"])
def test_packed_grids_take_a_fixed_ntk_factor(scaling):
  """With `ntk_factor` θ is the same for every grid, so a packed batch of two grids rotates
  each example as its own grid would; without it packing is refused."""
  module = _rope(f"rope_axial(scaling='{scaling}', ntk_factor=2.0)")
  shapes = ((4, 6), (8, 3))
  index = [np.asarray(coords_lib.grid(s, "index")) for s in shapes]
  width = max(len(i) for i in index)
  packed_index = np.stack([np.pad(i, ((0, width - len(i)), (0, 0))) for i in index])
  coords = module.packed_coords(jnp.asarray(packed_index), jnp.asarray(shapes))
  x = jax.random.normal(jax.random.key(2), (2, width, 2, HEAD_DIM))
  variables = module.init(jax.random.key(1), x, coords)
  packed = np.asarray(module.apply(variables, x, coords))
  for b, shape in enumerate(shapes):
    n = len(index[b])
    alone = module.apply(variables, x[b : b + 1, :n], module.grid_coords(shape), shape)
    np.testing.assert_allclose(packed[b, :n], np.asarray(alone)[0], atol=1e-5)
  with pytest.raises(ValueError, match="set `ntk_factor`"):
    _rope(f"rope_axial(scaling='{scaling}')").packed_coords(
      jnp.asarray(packed_index), jnp.asarray(shapes)
    )


def test_a_user_set_ntk_factor_replaces_the_grid_ratio():
  shape = (8, 8)  # the training grid: without a factor NTK is the identity here
  x, coords, got = _apply(_rope("rope_axial(scaling='ntk', ntk_factor=4.0)"), shape)
  d_axis = HEAD_DIM // 2
  theta = 100.0 * 4.0 ** (d_axis / (d_axis - 2))
  want = rotary.rope(x, coords, rotary.axial_freqs(HEAD_DIM, theta, theta))
  np.testing.assert_allclose(got, np.asarray(want), atol=1e-5)


def test_yarn_interpolates_slow_frequencies_keeps_fast_ones_and_scales_the_logits():
  """NTK-by-parts per axis: γ = clip((r − α)/(β − α)), r = L·f/2π; temperature 0.1 ln s + 1."""
  shape, alpha, beta = (16, 32), 0.1, 1.0  # s = 2 on y, 4 on x; L = 8 (r from 0.04 to 1.27)
  spec = f"rope_axial(scaling='yarn', yarn_alpha={alpha}, yarn_beta={beta})"
  x, coords, got = _apply(_rope(spec), shape)
  mags = np.asarray(rotary.magnitudes(HEAD_DIM, 100.0))
  periods = 8 * mags / (2 * np.pi)
  gamma = np.clip((periods - alpha) / (beta - alpha), 0, 1)
  assert gamma.max() == 1.0 and gamma.min() == 0.0  # both regimes occur at these settings
  by_axis = [(1 - gamma) * mags / s + gamma * mags for s in (2.0, 4.0)]
  freqs = rotary.axes_freqs(*(jnp.asarray(m) for m in by_axis))
  temperature = 0.1 * np.log(4.0) + 1.0
  want = np.asarray(rotary.rope(x, coords, freqs)) * temperature
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _released_yarn_gamma(dim, base, length, beta_fast, beta_slow):
  """jquesnelle/yarn's extrapolation weight per frequency (`1 - inv_freq_mask`'s complement),
  written out from its `_yarn_find_correction_range` and `_yarn_linear_ramp_mask`."""
  correction = lambda rot: dim * np.log(length / (rot * 2 * np.pi)) / (2 * np.log(base))
  low = max(int(np.floor(correction(beta_fast))), 0)
  high = min(int(np.ceil(correction(beta_slow))), dim - 1)
  high = high + 0.001 if low == high else high
  ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
  return 1 - ramp  # the code's `inv_freq_mask` (extrapolation_factor 1): 1 keeps f


@pytest.mark.parametrize(
  ("head_dim", "theta", "length", "want"),
  [(64, 100.0, 14, [1, 2 / 3, 1 / 3] + [0] * 13), (16, 100.0, 8, None), (32, 10.0, 64, None)],
)
def test_yarn_code_ramp_is_the_released_codes(head_dim, theta, length, want):
  """`yarn_ramp='code'`: linear in the frequency index, as jquesnelle/yarn; the paper's ramp
  (linear in r) differs at ViT lengths: [0.04, 0.02, 0.01, 0, ...] for the first example."""
  got = np.asarray(rotary.yarn_kept(head_dim, theta, length, 1.0, 32.0, "code"))
  reference = _released_yarn_gamma(head_dim // 2, theta, length, 32.0, 1.0)
  np.testing.assert_allclose(got, reference, atol=1e-6)
  if want is not None:
    np.testing.assert_allclose(got, want, atol=1e-6)
    paper = np.asarray(rotary.yarn_kept(head_dim, theta, length, 1.0, 32.0, "paper"))
    assert paper.max() < 0.05


def test_yarn_code_ramp_reaches_the_model():
  shape = (16, 32)
  x, coords, got = _apply(_rope("rope_axial(scaling='yarn', yarn_ramp='code')"), shape)
  gamma = _released_yarn_gamma(HEAD_DIM // 2, 100.0, 8, 32.0, 1.0)
  mags = np.asarray(rotary.magnitudes(HEAD_DIM, 100.0))
  by_axis = [(1 - gamma) * mags / s + gamma * mags for s in (2.0, 4.0)]
  freqs = rotary.axes_freqs(*(jnp.asarray(m, jnp.float32) for m in by_axis))
  want = np.asarray(rotary.rope(x, coords, freqs)) * (0.1 * np.log(4.0) + 1.0)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  _, _, paper = _apply(_rope("rope_axial(scaling='yarn')"), shape)
  assert np.abs(paper - got).max() > 1e-3


def test_yarn_at_the_training_grid_is_the_identity():
  _, _, plain = _apply(_rope("rope_axial"), TRAIN)
  _, _, yarn = _apply(_rope("rope_axial(scaling='yarn')"), TRAIN)
  np.testing.assert_allclose(yarn, plain, atol=1e-6)


def test_ntk_never_shrinks_a_smaller_grid():
  _, _, plain = _apply(_rope("rope_axial"), (4, 4))
  _, _, ntk = _apply(_rope("rope_axial(scaling='ntk')"), (4, 4))
  np.testing.assert_allclose(ntk, plain, atol=1e-6)


@pytest.mark.parametrize(
  ("spec", "match"),
  [
    ("rope_mixed(scaling='ntk')", "scaling='ntk'.*use scaling='pi'"),
    ("rope_axial(scaling='ntx')", "unknown scaling"),
    ("rope_mixed(scaling='yarn')", "scaling='yarn'.*use scaling='pi'"),
    ("rope_axial(ntk_factor=2.0)", "ntk_factor=2.0 is a number >= 1 for scaling='ntk' or 'yarn'"),
    ("rope_axial(scaling='yarn', yarn_ramp='linear')", "unknown yarn_ramp='linear'"),
    ("rope_axial(scaling='pi', trained_grid=12)", "trained_grid=12 is the .rows, columns."),
    ("rope_axial(scaling='pi', trained_grid=(12, 0))", "e.g. .12, 12. for a model trained up"),
  ],
)
def test_bad_policies_name_the_field_and_the_fix(spec, match):
  with pytest.raises(ValueError, match=match):
    _rope(spec)


def test_a_policy_without_the_training_grid_is_refused():
  with pytest.raises(ValueError, match="needs the 2-D training grid_shape"):
    encodings.build("rope_axial(scaling='pi')", head_dim=HEAD_DIM, num_heads=2)
  alone = encodings.build("rope_axial(scaling='pi', trained_grid=(8, 8))", head_dim=HEAD_DIM)
  assert alone.training_length == (8, 8)  # trained_grid alone tells the length


def test_policies_reach_the_vit_at_a_new_size():
  """The model gives RoPE its training grid: PI changes a 16x16 forward pass, not an 8x8 one."""
  from lfpe.models import vit  # noqa: PLC0415

  images = {s: jax.random.uniform(jax.random.key(2), (2, s, s, 3)) for s in (32, 64)}
  outputs = {}
  for scaling in ("none", "pi"):
    model = vit.Model(
      2,
      variant="mu/4",
      image_size=32,
      pool="gap",
      head_init_std=1.0,
      posemb=f"rope_axial(scaling={scaling!r})",
    )
    variables = model.init(jax.random.key(0), images[32], train=False)
    outputs[scaling] = {
      s: np.asarray(model.apply(variables, x, train=False)) for s, x in images.items()
    }
  np.testing.assert_allclose(outputs["pi"][32], outputs["none"][32], atol=1e-6)
  assert np.abs(outputs["pi"][64] - outputs["none"][64]).max() > 1e-4
