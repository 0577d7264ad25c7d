"""resample(): `bicubic_pytorch` against a numpy transcription of PyTorch's bicubic, the
antialias conventions of each method, and `check_resample_options`' errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage

from lfpe import encodings
from lfpe.encodings.resample import check_resample_options, resample


def _taps(n_old, n_new, align_corners, a):
  """PyTorch's bicubic source taps for one axis: indices and weights, both `[n_new, 4]`.

  Source index (o + 0.5) n_old / n_new - 0.5 (half-pixel) or o (n_old - 1) / (n_new - 1)
  (corners; 0 when n_new = 1); taps floor(src) - 1 .. floor(src) + 2 clamped to the edge;
  cubic convolution weights with coefficient `a` (PyTorch: -0.75).
  """
  o = np.arange(n_new, dtype=np.float64)
  if align_corners:
    src = o * ((n_old - 1) / (n_new - 1) if n_new > 1 else 0.0)
  else:
    src = (o + 0.5) * n_old / n_new - 0.5
  base = np.floor(src)
  t = (src - base)[:, None]
  d = np.abs(t - np.arange(-1, 3))  # distances to the 4 taps: 1 + t, t, 1 - t, 2 - t
  near = ((a + 2) * d - (a + 3)) * d * d + 1  # |d| <= 1
  far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a  # 1 < |d| < 2
  weights = np.where(d <= 1, near, far)
  index = np.clip(base[:, None].astype(int) + np.arange(-1, 3), 0, n_old - 1)
  return index, weights


def _torch_bicubic(grid, new_shape, align_corners, a=-0.75):
  """PyTorch `F.interpolate(mode="bicubic", antialias=False)` of `grid` `[*old, C]` (1-D or
  2-D), summing its 4 (or 4 x 4) clamped taps per output as PyTorch's kernel does."""
  grid = np.asarray(grid, np.float64)
  if len(new_shape) == 1:
    index, w = _taps(grid.shape[0], new_shape[0], align_corners, a)
    return np.einsum("ok,okc->oc", w, grid[index])
  (iy, wy), (ix, wx) = (
    _taps(n, m, align_corners, a) for n, m in zip(grid.shape[:2], new_shape, strict=True)
  )
  taps = grid[iy[:, :, None, None], ix[None, None]]  # [H', 4, W', 4, C]
  return np.einsum("ik,jl,ikjlc->ijc", wy, wx, taps)


def _grid(*shape, seed=0):
  return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
  "old, new",
  [
    ((7, 7), (12, 12)),  # square upsampling (a Swin window 7 -> 12)
    ((12, 12), (7, 7)),  # square downsampling
    ((4, 6), (11, 9)),  # non-square upsampling
    ((5, 9), (9, 4)),  # up one axis, down the other
    ((3, 5), (1, 5)),  # to a single row
    ((13,), (23,)),  # 1-D offset table (2 * 7 - 1 -> 2 * 12 - 1)
    ((9,), (4,)),  # 1-D downsampling
  ],
)
def test_bicubic_pytorch_matches_numpy_pytorch_bicubic(old, new, align_corners):
  grid = _grid(*old, 3)
  cls = _grid(1, 3, seed=1)
  table = jnp.asarray(np.concatenate([cls, grid.reshape(-1, 3)]))  # [1 + prod(old), 3]
  out = resample(table, old, new, "bicubic_pytorch", num_prefix=1, align_corners=align_corners)
  want = _torch_bicubic(grid, new, align_corners).reshape(-1, 3)
  assert out.shape == (1 + want.shape[0], 3)
  np.testing.assert_array_equal(out[:1], cls)
  np.testing.assert_allclose(out[1:], want, rtol=1e-5, atol=1e-5)


def test_bicubic_pytorch_antialias_false_is_its_default():
  table = jnp.asarray(_grid(20, 2))
  default = resample(table, (4, 5), (7, 3), "bicubic_pytorch")
  explicit = resample(table, (4, 5), (7, 3), "bicubic_pytorch", antialias=False)
  np.testing.assert_array_equal(default, explicit)


def test_reference_distinguishes_the_cubic_coefficient():
  """The tolerance above separates a = -0.75 from a = -0.5 and edge replication from
  renormalisation: Keys a = -0.5 (`bicubic`) is far from PyTorch's default bicubic."""
  grid = _grid(7, 7, 3)
  want = _torch_bicubic(grid, (12, 12), False)
  assert np.abs(_torch_bicubic(grid, (12, 12), False, a=-0.5) - want).max() > 0.05
  bicubic = resample(jnp.asarray(grid.reshape(49, 3)), (7, 7), (12, 12), "bicubic")
  assert np.abs(np.asarray(bicubic) - want.reshape(-1, 3)).max() > 0.05


def test_bicubic_is_antialiased_keys_as_jax_image_resize():
  """`bicubic` (antialias on) is unchanged: `jax.image.resize` (Keys a = -0.5, PyTorch's
  antialiased bicubic); away from the borders upsampling is the a = -0.5 cubic."""
  grid = _grid(7, 7, 3)
  for new in [(12, 12), (4, 5)]:
    out = resample(jnp.asarray(grid.reshape(49, 3)), (7, 7), new, "bicubic")
    want = jax.image.resize(grid, (*new, 3), "bicubic").reshape(-1, 3)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-6)  # float32 rounding apart
  out = np.asarray(resample(jnp.asarray(grid.reshape(49, 3)), (7, 7), (14, 14), "bicubic"))
  keys = _torch_bicubic(grid, (14, 14), False, a=-0.5)  # no clamped tap in rows/cols 3..10
  np.testing.assert_allclose(out.reshape(14, 14, 3)[3:11, 3:11], keys[3:11, 3:11], atol=1e-5)


@pytest.mark.parametrize("method", ["bilinear", "bicubic"])
def test_antialias_none_is_on_for_bilinear_and_bicubic(method):
  table = jnp.asarray(_grid(96, 2))  # 8 x 12 -> 3 x 5: antialias changes the result
  default = resample(table, (8, 12), (3, 5), method)
  np.testing.assert_array_equal(default, resample(table, (8, 12), (3, 5), method, antialias=True))
  off = resample(table, (8, 12), (3, 5), method, antialias=False)
  assert np.abs(np.asarray(default) - np.asarray(off)).max() > 1e-2


def test_align_corners_to_one_row_without_antialias_samples_the_first_position():
  """PyTorch and scipy.ndimage.zoom (big_vision) map a length-1 output to position 0."""
  grid = _grid(5, 4, 2)
  out = resample(
    jnp.asarray(grid.reshape(20, 2)), (5, 4), (1, 7), align_corners=True, antialias=False
  )
  want = scipy.ndimage.zoom(grid, (1 / 5, 7 / 4, 1), order=1)
  np.testing.assert_allclose(out, want.reshape(-1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
  "args, match",
  [
    (("bicubic_torch", False, None), r"unknown `resample_method`='bicubic_torch'.*bicubic_pytorch"),
    ((None, False, None), r"unknown `resample_method`=None"),
    (("bilinear", "yes", None), r"`align_corners` must be True or False, got 'yes'"),
    (("bilinear", 1, None), r"`align_corners` must be True or False, got 1"),
    (("bicubic", False, "on"), r"`antialias` must be None.*True or False, got 'on'"),
    (("bicubic_pytorch", False, True), r"Embed1D: `resample_method`='bicubic_pytorch'.*'bicubic'"),
  ],
)
def test_check_resample_options_names_the_field_and_fix(args, match):
  with pytest.raises(ValueError, match=match):
    check_resample_options(*args, owner="Embed1D")


@pytest.mark.parametrize("method", ["bilinear", "bicubic", "bicubic_pytorch"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_check_resample_options_accepts_valid_options(method, align_corners):
  for antialias in (None, False) if method == "bicubic_pytorch" else (None, False, True):
    check_resample_options(method, align_corners, antialias, "Embed1D")


def test_resample_rejects_antialiased_bicubic_pytorch():
  with pytest.raises(ValueError, match=r"resample: `method`='bicubic_pytorch'.*a=-0.75.*'bicubic'"):
    resample(jnp.zeros((12, 2)), (3, 4), (5, 5), "bicubic_pytorch", antialias=True)
  with pytest.raises(ValueError, match="align_corners"):
    resample(jnp.zeros((12, 2)), (3, 4), (5, 5), align_corners=None)


def test_sine_1d_resamples_its_training_table_when_asked():
  """By default a new grid gets its own raster indices (rows restart at other indices); with
  `resample_method` the training grid's table is resized as a 2-D image (MAE's fixed tables)."""
  build = lambda spec: encodings.build(
    spec, dim=16, grid_shape=(4, 4), num_heads=2, head_dim=8, ndim=1
  )
  plain, resampled = build("sine_1d"), build("sine_1d(resample_method='bicubic')")
  at_train = plain.apply({}, (4, 4), method="grid")
  np.testing.assert_array_equal(resampled.apply({}, (4, 4), method="grid"), at_train)
  np.testing.assert_allclose(
    resampled.apply({}, (8, 8), method="grid"),
    encodings.resample(at_train, (4, 4), (8, 8), "bicubic"),
    atol=1e-6,
  )
  own = np.asarray(plain.apply({}, (8, 8), method="grid"))
  np.testing.assert_allclose(own, np.asarray(plain.apply({}, jnp.arange(64.0)[:, None])), atol=1e-6)
  with pytest.raises(ValueError, match="resample_method needs grid_shape"):
    encodings.create("sine_1d(resample_method='bicubic')", dim=16)


def test_a_3d_table_resamples_as_pytorch_bicubic_along_each_axis():
  """A (T, H, W) learned table (video) with `bicubic_pytorch`: PyTorch's 1-D taps applied
  along T, then H, then W (numpy, `_taps`): the separable kernel PyTorch's bicubic is on
  each axis, extended to a third."""
  old, new = (2, 3, 4), (3, 5, 7)
  table = _grid(*old, 3, seed=4)  # [T, H, W, C]
  want = table
  for axis, (n, m) in enumerate(zip(old, new, strict=True)):
    index, weights = _taps(n, m, False, -0.75)
    moved = np.moveaxis(want, axis, 0)
    want = np.moveaxis(np.einsum("ok,ok...->o...", weights, moved[index]), 0, axis)
  got = resample(jnp.asarray(table.reshape(-1, 3)), old, new, "bicubic_pytorch")
  np.testing.assert_allclose(np.asarray(got).reshape(*new, 3), want, rtol=1e-5, atol=1e-6)
  module = encodings.build("embed_1d(resample_method='bicubic_pytorch')", dim=3, grid_shape=old)
  params = {"params": {"table": jnp.asarray(table.reshape(-1, 3))}}
  np.testing.assert_allclose(
    module.apply(params, new, method="grid"), want.reshape(-1, 3), rtol=1e-5, atol=1e-6
  )
