"""`lfpe.nn.patches`: the patch kernel carried to another patch size by FlexiViT's PI-resize,
checked against a bilinear resize written here from its definition (half-pixel centres,
edges clamped: `tf.image.resize(method="bilinear")`), and the module against `nn.Dense`."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.nn.patches import PatchEmbedding, resize_patch_kernel


def _bilinear_axis(n_old, n_new):
  """[n_new, n_old]: output pixel o reads input position (o + 0.5) n_old / n_new - 0.5,
  clamped to the patch, linearly between its two neighbours."""
  m = np.zeros((n_new, n_old))
  for o in range(n_new):
    x = min(max((o + 0.5) * n_old / n_new - 0.5, 0.0), n_old - 1.0)
    lo = int(np.floor(x))
    hi = min(lo + 1, n_old - 1)
    m[o, lo] += 1 - (x - lo)
    m[o, hi] += x - lo
  return m


def _resize_patches(x, new):
  """Patches [N, ph, pw, C] bilinearly resized to [N, ph', pw', C], axis by axis."""
  rows, cols = _bilinear_axis(x.shape[1], new[0]), _bilinear_axis(x.shape[2], new[1])
  return np.einsum("ah,bw,nhwc->nabc", rows, cols, x)


def _tokens(patches, kernel):
  return patches.reshape(len(patches), -1) @ kernel  # (ph, pw, C) flattened, as patchify


@pytest.mark.parametrize("old, new", [((2, 2), (4, 4)), ((3, 2), (6, 5)), ((1, 1), (2, 3))])
def test_an_enlarged_patch_gives_the_token_the_original_gave(old, new):
  """FlexiViT Eq. 6: <B x, ŵ> = <x, w> for every patch x when the patch grows."""
  rng = np.random.default_rng(0)
  kernel = rng.normal(size=(old[0] * old[1] * 3, 8))
  patches = rng.normal(size=(16, *old, 3))
  resized = resize_patch_kernel(kernel, old, new)
  assert resized.shape == (new[0] * new[1] * 3, 8)
  np.testing.assert_allclose(
    _tokens(_resize_patches(patches, new), resized), _tokens(patches, kernel), atol=1e-5
  )


def test_a_one_pixel_patch_spreads_its_weight_evenly():
  """1x1 -> 2x2: the resized patch repeats the pixel, so each of 4 weights is w / 4."""
  kernel = np.array([[4.0, -8.0]])  # C = 1, D = 2
  np.testing.assert_allclose(
    resize_patch_kernel(kernel, (1, 1), (2, 2)), np.tile(kernel / 4, (4, 1))
  )


@pytest.mark.parametrize("old, new", [((4, 4), (2, 2)), ((2, 4), (4, 2))])
def test_a_shrunk_or_transposed_patch_is_the_least_squares_kernel(old, new):
  """Where no kernel is exact, ŵ minimises |Bᵀŵ - w|: the residual is orthogonal to B's
  columns' span (B (Bᵀŵ - w) = 0), and a 2x4 -> 4x2 kernel is not copied row for row."""
  rng = np.random.default_rng(1)
  kernel = rng.normal(size=(old[0] * old[1] * 2, 5))
  resized = resize_patch_kernel(kernel, old, new)
  b = np.kron(_bilinear_axis(old[0], new[0]), _bilinear_axis(old[1], new[1]))  # [new px, old px]
  per_pixel = lambda k, shape: k.reshape(shape[0] * shape[1], -1)
  residual = b.T @ per_pixel(resized, new) - per_pixel(kernel, old)
  np.testing.assert_allclose(b @ residual, 0, atol=1e-5)
  assert resized.shape != kernel.shape or not np.allclose(resized, kernel)


def test_the_same_patch_keeps_the_kernel_and_a_wrong_kernel_is_named():
  kernel = np.arange(24.0).reshape(12, 2)
  np.testing.assert_array_equal(resize_patch_kernel(kernel, (2, 2), (2, 2)), kernel)
  with pytest.raises(
    ValueError, match=r"a kernel of 12 rows is not \(ph·pw·C\) for patches \(5, 5\)"
  ):
    resize_patch_kernel(kernel, (5, 5), (2, 2))


def test_the_module_is_a_dense_with_the_same_parameters_and_outputs():
  x = jax.random.normal(jax.random.key(0), (2, 5, 12))
  dense = nn.Dense(7, dtype=jnp.bfloat16)
  patches = PatchEmbedding(7, patch_size=(2, 2), dtype=jnp.bfloat16)
  variables = dense.init(jax.random.key(1), x)
  shapes = patches.init(jax.random.key(1), x)
  assert jax.tree.map(jnp.shape, shapes) == jax.tree.map(jnp.shape, variables)
  np.testing.assert_array_equal(patches.apply(variables, x), dense.apply(variables, x))
  params = variables["params"]
  out = patches.resize_params(params, (1, 4))  # 1x4 patches (C = 3) -> this module's 2x2
  np.testing.assert_array_equal(out["bias"], params["bias"])
  np.testing.assert_allclose(out["kernel"], resize_patch_kernel(params["kernel"], (1, 4), (2, 2)))


@pytest.mark.parametrize(
  "kernel_patch, given", [((2, 2), (4, 4)), ((2, 4), (4, 2)), ((4, 4), (2, 3))]
)
def test_patches_of_another_size_meet_the_pi_resized_kernel(kernel_patch, given):
  """On the fly (FlexiViT's evaluation): the parameters stay at the kernel's patch size, and
  each token is the one the PI-resized kernel gives; an enlarged patch of an image gives the
  token its original patch gave (FlexiViT Eq. 6), checked with the resize written here."""
  rng = np.random.default_rng(2)
  module = PatchEmbedding(6, patch_size=kernel_patch, input_patch_size=given)
  patches = rng.normal(size=(5, *given, 3)).astype(np.float32)
  x = patches.reshape(1, 5, -1)
  variables = module.init(jax.random.key(0), x)
  kernel, bias = variables["params"]["kernel"], variables["params"]["bias"]
  assert kernel.shape == (kernel_patch[0] * kernel_patch[1] * 3, 6)  # the trained layout
  expected = _tokens(patches, resize_patch_kernel(kernel, kernel_patch, given)) + bias
  np.testing.assert_allclose(module.apply(variables, x)[0], expected, atol=1e-5)
  if given[0] >= kernel_patch[0] and given[1] >= kernel_patch[1]:
    originals = rng.normal(size=(5, *kernel_patch, 3)).astype(np.float32)
    enlarged = _resize_patches(originals, given).reshape(1, 5, -1).astype(np.float32)
    np.testing.assert_allclose(
      module.apply(variables, enlarged)[0], _tokens(originals, kernel) + bias, atol=1e-4
    )


def test_patches_that_do_not_fit_the_input_patch_size_are_named():
  module = PatchEmbedding(4, patch_size=(2, 2), input_patch_size=(3, 3))
  with pytest.raises(ValueError, match=r"patches of 10 values .* input_patch_size=\(3, 3\)"):
    module.init(jax.random.key(0), jnp.zeros((1, 2, 10)))


def test_in_bfloat16_the_on_the_fly_kernel_is_the_resized_one():
  """The kernel is resized in float32 and then cast, as Dense casts `resize_patch_kernel`'s:
  bfloat16 tokens equal the offline kernel's (resizing the bfloat16 patches instead would
  round once more and differ)."""
  x = jax.random.normal(jax.random.key(0), (2, 5, 4 * 4 * 3))
  module = PatchEmbedding(8, patch_size=(8, 8), input_patch_size=(4, 4), dtype=jnp.bfloat16)
  variables = module.init(jax.random.key(1), x)
  params = variables["params"]
  resized = {**params, "kernel": resize_patch_kernel(params["kernel"], (8, 8), (4, 4))}
  offline = nn.Dense(8, dtype=jnp.bfloat16).apply({"params": resized}, x)
  np.testing.assert_array_equal(module.apply(variables, x), offline)
