"""Learned tables (Embed-1D, Embed-ND) and resample(): init, lookups, resampling numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage

from lfpe.encodings import coords
from lfpe.encodings.learned import Embed1D, EmbedND
from lfpe.encodings.relative import RelativeBias2D, relative_bias
from lfpe.encodings.resample import resample


def _init(module, x):
  return jax.jit(module.init)(jax.random.key(0), x)["params"]  # one compile, not one per op


def _tables(**shapes):
  """Random parameters of the given shapes (cheaper than module.init, which compiles)."""
  rng = np.random.default_rng(0)
  return {name: jnp.asarray(rng.normal(size=shape), jnp.float32) for name, shape in shapes.items()}


def _half_pixel(n_old, n_new):
  """Input positions sampled by half-pixel resizing (PyTorch align_corners=False)."""
  return (np.arange(n_new) + 0.5) * n_old / n_new - 0.5


def _corners(n_old, n_new):
  return np.arange(n_new) * (n_old - 1) / (n_new - 1)


def _interp_2d(grid, rows, cols):
  """numpy bilinear interpolation of grid [H, W, D] at positions rows x cols (edge-clamped)."""
  h, w, d = grid.shape
  along_w = np.stack(
    [[np.interp(cols, np.arange(w), grid[i, :, k]) for k in range(d)] for i in range(h)]
  )
  out = np.stack(
    [[np.interp(rows, np.arange(h), along_w[:, k, j]) for k in range(d)] for j in range(len(cols))]
  )  # [W', D, H']
  return out.transpose(2, 0, 1)  # [H', W', D]


def test_tables_init_normal_002():
  p1 = _init(Embed1D(dim=64, grid_shape=(16, 16)), coords.flat_index((16, 16)))
  pn = _init(EmbedND(dim=64, grid_shape=(128, 96)), coords.grid((2, 2)))
  assert p1["table"].shape == (256, 64)
  assert pn["table_0"].shape == (128, 32) and pn["table_1"].shape == (96, 32)
  for t in (p1["table"], jnp.concatenate([pn["table_0"], pn["table_1"]])):
    assert abs(float(jnp.std(t)) - 0.02) < 0.001
    assert abs(float(jnp.mean(t))) < 0.001


def test_embed1d_lookup_returns_table_rows():
  module = Embed1D(dim=8, grid_shape=(3, 4))
  params = _tables(table=(12, 8))
  table = np.asarray(params["table"])
  out = module.apply({"params": params}, jnp.array([[[5.0], [0.0]], [[11.0], [7.0]]]))
  np.testing.assert_array_equal(out, table[[[5, 0], [11, 7]]])
  np.testing.assert_array_equal(module.apply({"params": params}, (3, 4), method=module.grid), table)


def test_embednd_concatenates_axis_tables_in_axis_order():
  module = EmbedND(dim=8, grid_shape=(5, 6, 5, 6))  # Embed-4D: 4 tables of width 2
  box = jnp.array([[1.0, 2.0, 4.0, 5.0], [0.0, 0.0, 3.0, 1.0]])  # top, left, bottom, right
  params = _tables(table_0=(5, 2), table_1=(6, 2), table_2=(5, 2), table_3=(6, 2))
  out = np.asarray(module.apply({"params": params}, box))
  t = [np.asarray(params[f"table_{a}"]) for a in range(4)]
  np.testing.assert_array_equal(out[0], np.concatenate([t[0][1], t[1][2], t[2][4], t[3][5]]))
  np.testing.assert_array_equal(out[1], np.concatenate([t[0][0], t[1][0], t[2][3], t[3][1]]))


def test_embednd_grid_cell_is_row_then_column_embedding():
  module = EmbedND(dim=6, grid_shape=(3, 4))
  params = _tables(table_0=(3, 3), table_1=(4, 3))
  out = np.asarray(module.apply({"params": params}, (3, 4), method=module.grid))
  row, col = np.asarray(params["table_0"]), np.asarray(params["table_1"])
  np.testing.assert_array_equal(out[2 * 4 + 1], np.concatenate([row[2], col[1]]))


def test_out_of_range_index_is_nan_not_clamped():
  module = Embed1D(dim=4, grid_shape=(2, 3))
  params = _tables(table=(6, 4))
  out = module.apply({"params": params}, jnp.array([[6.0], [-1.0], [5.0]]))
  assert np.isnan(out[:2]).all() and np.isfinite(out[2]).all()


def test_resample_identity_when_shapes_equal():
  table = _tables(t=(1 + 12, 5))["t"]
  np.testing.assert_array_equal(resample(table, (3, 4), (3, 4), "bicubic", num_prefix=1), table)


@pytest.mark.parametrize("new", [(5, 7), (6, 4), (3, 9)])
def test_resample_linear_ramp_align_corners_is_exact(new):
  old, (a, b, c) = (3, 4), np.array([[0.3, -1.0], [2.0, 0.5], [-0.7, 1.5]])
  y, x = np.meshgrid(np.arange(3.0), np.arange(4.0), indexing="ij")
  table = (a + b * y[..., None] + c * x[..., None]).reshape(12, 2)
  out = resample(jnp.asarray(table, jnp.float32), old, new, align_corners=True)
  ny, nx = np.meshgrid(_corners(3, new[0]), _corners(4, new[1]), indexing="ij")
  want = (a + b * ny[..., None] + c * nx[..., None]).reshape(-1, 2)
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(out)[[0, -1]], table[[0, -1]], atol=1e-5)  # corners


@pytest.mark.parametrize("new", [(7, 5), (2, 3)])
def test_align_corners_without_antialias_equals_big_vision_scipy_zoom(new):
  grid = np.asarray(_tables(t=(4, 6, 2))["t"])
  zoom = (new[0] / 4, new[1] / 6, 1)
  want = scipy.ndimage.zoom(grid, zoom, order=1)  # big_vision's resample_posemb
  out = resample(jnp.asarray(grid.reshape(24, 2)), (4, 6), new, align_corners=True, antialias=False)
  np.testing.assert_allclose(out, want.reshape(-1, 2), rtol=1e-5, atol=1e-5)


def test_resample_downsample_ramp_align_corners_without_antialias():
  table = np.arange(9.0, dtype=np.float32)[:, None] * 2.0  # 1-D ramp 0..16
  out = resample(jnp.asarray(table), (9,), (5,), align_corners=True, antialias=False)
  np.testing.assert_allclose(out[:, 0], [0.0, 4.0, 8.0, 12.0, 16.0], atol=1e-5)


@pytest.mark.parametrize("new", [(5, 7), (6, 8)])
def test_resample_half_pixel_upsampling_matches_numpy_bilinear(new):
  grid = np.asarray(_tables(t=(3, 4, 3))["t"])
  out = resample(jnp.asarray(grid.reshape(12, 3)), (3, 4), new)
  want = _interp_2d(grid, _half_pixel(3, new[0]), _half_pixel(4, new[1]))
  np.testing.assert_allclose(out, want.reshape(-1, 3), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(out, jax.image.resize(grid, (*new, 3), "bilinear").reshape(-1, 3))


def test_resample_half_pixel_ramp_exact_inside_clamped_outside():
  table = 3.0 + 0.5 * np.arange(4.0, dtype=np.float32)[:, None]  # ramp at positions 0..3
  out = np.asarray(resample(jnp.asarray(table), (4,), (8,)))[:, 0]
  pos = _half_pixel(4, 8)  # -0.25, 0.25, ..., 3.25
  np.testing.assert_allclose(out, 3.0 + 0.5 * np.clip(pos, 0, 3), atol=1e-6)


def test_resample_keeps_prefix_tokens_apart():
  grid = _tables(t=(12, 4))["t"]
  cls = jnp.full((1, 4), 7.0)
  out = resample(jnp.concatenate([cls, grid]), (3, 4), (6, 5), "bicubic", num_prefix=1)
  assert out.shape == (1 + 30, 4)
  np.testing.assert_array_equal(out[:1], cls)
  np.testing.assert_allclose(out[1:], resample(grid, (3, 4), (6, 5), "bicubic"), atol=1e-6)


def test_embed_grid_at_new_shape_resamples_tables():
  e1, en = Embed1D(dim=4, grid_shape=(3, 4)), EmbedND(dim=4, grid_shape=(3, 4))
  p1, pn = _tables(table=(12, 4)), _tables(table_0=(3, 2), table_1=(4, 2))
  out1 = e1.apply({"params": p1}, (6, 8), method=e1.grid)
  want1 = _interp_2d(np.asarray(p1["table"]).reshape(3, 4, 4), _half_pixel(3, 6), _half_pixel(4, 8))
  np.testing.assert_allclose(out1, want1.reshape(48, 4), atol=1e-6)
  outn = np.asarray(en.apply({"params": pn}, (6, 8), method=en.grid)).reshape(6, 8, 4)
  row = [np.interp(_half_pixel(3, 6), np.arange(3), pn["table_0"][:, k]) for k in range(2)]
  col = [np.interp(_half_pixel(4, 8), np.arange(4), pn["table_1"][:, k]) for k in range(2)]
  np.testing.assert_allclose(outn[:, 3, :2], np.stack(row, -1), atol=1e-6)
  np.testing.assert_allclose(outn[5, :, 2:], np.stack(col, -1), atol=1e-6)


@pytest.mark.parametrize(
  "make, match",
  [
    (lambda: EmbedND(dim=7, grid_shape=(3, 4)), "dim.*multiple of 2"),
    (lambda: EmbedND(dim=8), "grid_shape.*positive ints"),
    (lambda: Embed1D(dim=8, grid_shape=(3, 0)), "grid_shape"),
    (lambda: Embed1D(dim=8, grid_shape=(3, 4), resample_method="area"), "method.*bilinear"),
    (lambda: Embed1D(dim=0, grid_shape=(3, 4)), "dim"),
  ],
)
def test_bad_config_raises_before_compiling(make, match):
  with pytest.raises(ValueError, match=match):
    make()


def test_bad_inputs_raise():
  module = EmbedND(dim=4, grid_shape=(3, 4))
  with pytest.raises(ValueError, match="coords.*last dimension 2"):
    module.init(jax.random.key(0), jnp.zeros((5, 3)))
  params = _tables(table_0=(3, 2), table_1=(4, 2))
  with pytest.raises(ValueError, match="shape.*2-D"):
    module.apply({"params": params}, (3, 4, 2), method=module.grid)
  with pytest.raises(ValueError, match="table.*rows.*num_prefix"):
    resample(jnp.zeros((13, 2)), (3, 4), (5, 5))
  with pytest.raises(ValueError, match="method"):
    resample(jnp.zeros((12, 2)), (3, 4), (5, 5), method="cubic")


@pytest.mark.parametrize("method", ["bilinear", "bicubic", "bicubic_pytorch"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_modules_resample_with_their_options(method, align_corners):
  """Every module that resamples passes method, align_corners and antialias through."""
  options = dict(resample_method=method, align_corners=align_corners)
  embed = Embed1D(dim=4, grid_shape=(3, 4), **options)
  variables = embed.init(jax.random.key(0), jnp.zeros((1, 1)))
  table = variables["params"]["table"]
  expected = resample(table, (3, 4), (5, 7), method, align_corners=align_corners)
  np.testing.assert_allclose(embed.apply(variables, (5, 7), method="grid"), expected, atol=1e-6)
  bias = RelativeBias2D(grid_shape=(3, 4), num_heads=2, **options)
  table = bias.init(jax.random.key(0))["params"]["table"]
  expected = relative_bias(
    resample(table, (5, 7), (9, 13), method, align_corners=align_corners), (5, 7)
  )
  np.testing.assert_allclose(bias.apply({"params": {"table": table}}, (5, 7)), expected, atol=1e-6)


def test_bicubic_pytorch_in_a_module_is_not_keys_bicubic():
  """The reported bug: modules gave `bicubic` tables for `bicubic_pytorch`."""
  tables = {}
  for method in ("bicubic", "bicubic_pytorch"):
    embed = EmbedND(dim=4, grid_shape=(4, 4), resample_method=method)
    variables = embed.init(jax.random.key(0), jnp.zeros((1, 2)))
    tables[method] = embed.apply(variables, (7, 7), method="grid")
  assert np.abs(tables["bicubic"] - tables["bicubic_pytorch"]).max() > 1e-3


def test_module_resample_options_are_checked():
  with pytest.raises(ValueError, match="antialias"):
    Embed1D(dim=4, grid_shape=(3, 4), resample_method="bicubic_pytorch", antialias=True)
  with pytest.raises(ValueError, match="align_corners"):
    EmbedND(dim=4, grid_shape=(3, 4), align_corners="yes")
  with pytest.raises(ValueError, match="init_std"):
    RelativeBias2D(grid_shape=(3, 4), init_std=0.0)


def test_video_tables_resample_on_a_3d_grid():
  """(T, H, W) grids: the full table and the per-axis tables resample along every axis."""
  full = Embed1D(dim=8, grid_shape=(2, 3, 4))
  params = full.init(jax.random.key(0), (2, 3, 4), method="grid")
  assert full.apply(params, (4, 3, 4), method="grid").shape == (48, 8)
  same = full.apply(params, (2, 3, 4), method="grid")
  np.testing.assert_array_equal(same, params["params"]["table"])
  axes = EmbedND(dim=12, grid_shape=(2, 3, 4))
  params = axes.init(jax.random.key(0), (2, 3, 4), method="grid")
  table = axes.apply(params, (4, 6, 4), method="grid").reshape(4, 6, 4, 12)  # T, H doubled
  width = params["params"]["table_2"]  # [4, 4]: W is unchanged, so its rows are kept
  np.testing.assert_allclose(table[..., 8:], np.broadcast_to(width, (4, 6, 4, 4)), atol=1e-6)
