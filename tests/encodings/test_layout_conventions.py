"""MAE, big_vision and DETR 2-D sin-cos tables as lfpe recipes (the sinusoidal module docstring).

Each reference is a numpy transcription of that codebase's function; each test also checks that
the nearby wrong recipe (y first, the default temperature, the other layout) does not match.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import coords
from lfpe.encodings.sinusoidal import DetrSine, sincos_nd

ATOL = 1e-5
SHAPES = [(3, 5), (6, 4), (7, 7)]
WIDTHS = [32, 64]


def assert_differs(actual, reference):
  assert not np.allclose(actual, reference, atol=ATOL)


def mae_1d(embed_dim, pos):
  """MAE get_1d_sincos_pos_embed_from_grid: [sin(pos ω) ‖ cos(pos ω)], ω = 1/10000^(i/(D/2))."""
  omega = np.arange(embed_dim // 2, dtype=np.float64)
  omega /= embed_dim / 2.0
  omega = 1.0 / 10000**omega
  out = np.einsum("m,d->md", pos.reshape(-1), omega)
  return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_2d(embed_dim, grid_size, cls_token=False):
  """MAE util/pos_embed.py get_2d_sincos_pos_embed; `grid_size` int (MAE) or (h, w)."""
  gh, gw = (grid_size, grid_size) if isinstance(grid_size, int) else grid_size
  grid_h = np.arange(gh, dtype=np.float32)
  grid_w = np.arange(gw, dtype=np.float32)
  grid = np.meshgrid(grid_w, grid_h)  # here w goes first
  grid = np.stack(grid, axis=0).reshape([2, 1, gh, gw])
  emb_h = mae_1d(embed_dim // 2, grid[0])  # MAE's name: grid[0] holds w
  emb_w = mae_1d(embed_dim // 2, grid[1])
  emb = np.concatenate([emb_h, emb_w], axis=1)
  if cls_token:
    emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
  return emb


def big_vision_2d(h, w, width, temperature=10_000.0):
  """big_vision models/vit.py posemb_sincos_2d, `[1, h * w, width]`."""
  y, x = np.mgrid[:h, :w]
  omega = np.arange(width // 4) / (width // 4 - 1)
  omega = 1.0 / (temperature**omega)
  y = np.einsum("m,d->md", y.flatten(), omega)
  x = np.einsum("m,d->md", x.flatten(), omega)
  pe = np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)
  return pe[None, :, :]


def detr_2d(mask, num_pos_feats=64, temperature=10000, normalize=False, scale=None):
  """DETR models/position_encoding.py PositionEmbeddingSine.forward, `[B, 2 F, H, W]`."""
  scale = 2 * math.pi if scale is None else scale
  not_mask = ~mask
  y_embed = np.cumsum(not_mask, 1, dtype=np.float64)
  x_embed = np.cumsum(not_mask, 2, dtype=np.float64)
  if normalize:
    eps = 1e-6
    y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
    x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
  dim_t = np.arange(num_pos_feats, dtype=np.float64)
  dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
  pos_x = x_embed[:, :, :, None] / dim_t
  pos_y = y_embed[:, :, :, None] / dim_t
  pos_x = np.stack((np.sin(pos_x[..., 0::2]), np.cos(pos_x[..., 1::2])), axis=4)
  pos_y = np.stack((np.sin(pos_y[..., 0::2]), np.cos(pos_y[..., 1::2])), axis=4)
  pos_x, pos_y = pos_x.reshape(*mask.shape, -1), pos_y.reshape(*mask.shape, -1)  # flatten(3)
  return np.concatenate((pos_y, pos_x), axis=3).transpose(0, 3, 1, 2)


def padding_mask():
  """3 examples on a 5 x 7 canvas: unpadded, 3 x 7 valid, 4 x 4 valid (True = padding)."""
  mask = np.zeros((3, 5, 7), bool)
  mask[1, 3:, :] = True
  mask[2, 4:, :] = True
  mask[2, :, 4:] = True
  return mask


@pytest.mark.parametrize("dim", WIDTHS)
@pytest.mark.parametrize("shape", SHAPES)
def test_mae(dim, shape):
  xy = coords.grid(shape)[:, ::-1]
  ref = mae_2d(dim, shape)
  pe = sincos_nd(xy, dim, layout="concat")
  np.testing.assert_allclose(pe, ref, atol=ATOL)
  sine_2d = encodings.create("sine_2d", dim=dim, layout="concat")
  np.testing.assert_allclose(sine_2d.apply({}, xy), ref, atol=ATOL)
  y_first = sine_2d.apply({}, shape, method="grid")  # what models get: MAE's halves swapped
  np.testing.assert_allclose(np.roll(y_first, dim // 2, axis=-1), ref, atol=ATOL)
  assert_differs(sincos_nd(coords.grid(shape), dim, layout="concat"), ref)  # y first
  assert_differs(sincos_nd(xy, dim), ref)  # interleaved
  if shape[0] == shape[1]:  # MAE proper: an int grid_size, optionally a zero class-token row
    np.testing.assert_allclose(pe, mae_2d(dim, shape[0]), atol=ATOL)
    with_cls = jnp.concatenate([jnp.zeros((1, dim)), pe])
    np.testing.assert_allclose(with_cls, mae_2d(dim, shape[0], cls_token=True), atol=ATOL)


@pytest.mark.parametrize("temperature", [10_000.0, 100.0])
@pytest.mark.parametrize("dim", WIDTHS)
@pytest.mark.parametrize("shape", SHAPES)
def test_big_vision(dim, shape, temperature):
  xy, k = coords.grid(shape)[:, ::-1], dim // 4
  ref = big_vision_2d(*shape, dim, temperature)
  pe = sincos_nd(xy, dim, temperature=temperature ** (k / (k - 1)), layout="concat")
  np.testing.assert_allclose(pe[None], ref, atol=ATOL)
  sine_2d = encodings.create("sine_2d", dim=dim, temperature=temperature ** (k / (k - 1)))
  assert_differs(sine_2d.apply({}, xy)[None], ref)  # interleaved
  sine_2d = sine_2d.clone(layout="concat")
  np.testing.assert_allclose(sine_2d.apply({}, xy)[None], ref, atol=ATOL)
  assert_differs(sincos_nd(xy, dim, temperature=temperature, layout="concat")[None], ref)
  y_first = sine_2d.apply({}, shape, method="grid")[None]  # what models get: halves swapped
  assert_differs(y_first, ref)
  np.testing.assert_allclose(np.roll(y_first, dim // 2, axis=-1), ref, atol=ATOL)


@pytest.mark.parametrize("temperature", [10000, 20])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dim", WIDTHS)
def test_detr(dim, normalize, temperature):
  mask = padding_mask()
  ref = detr_2d(mask, dim // 2, temperature, normalize).transpose(0, 2, 3, 1)  # [B, H, W, D]
  detr = DetrSine(dim=dim, temperature=temperature, normalize=normalize)
  np.testing.assert_allclose(detr.apply({}, jnp.asarray(mask), method="from_mask"), ref, atol=ATOL)
  pos = coords.detr(jnp.asarray(mask), normalize)
  np.testing.assert_allclose(sincos_nd(pos, dim, temperature), ref, atol=ATOL)
  assert_differs(sincos_nd(pos, dim, temperature, layout="concat"), ref)
  assert_differs(sincos_nd(pos[..., ::-1], dim, temperature), ref)  # x first
  if normalize:  # a scale other than 2π goes through coords.detr
    ref = detr_2d(mask, dim // 2, temperature, True, scale=1.0).transpose(0, 2, 3, 1)
    pos = coords.detr(jnp.asarray(mask), True, scale=1.0)
    np.testing.assert_allclose(sincos_nd(pos, dim, temperature), ref, atol=ATOL)
