"""Learned position tables: Embed-1D, Embed-2D/4D (one table per axis), and resampling.

* `Embed1D` (`embed_1d`): one learned vector per position of the raster-flattened grid,
  a `[prod(grid_shape), D]` table (002 Sec. 4.1 "Embed-1D"; ViT's default, 004).
* `EmbedND` (`embed_nd`, `embed_2d`, `embed_4d`): one table per coordinate axis,
  `[grid_shape[a], D / M]`, looked up independently and concatenated in axis order
  (002 Sec. 4.1 "Embed-2D": vertical [64, 384] ‖ horizontal [64, 384]; Sec. 4.4 "Embed-4D":
  top, left, bottom, right of a box).

Both init N(0, 0.02²) (ViT; 003 Sec. 3.1) and read integer index coordinates
(`coords_mode='index'`). A table only knows the positions it was trained on: `grid(shape)`
with a shape other than `grid_shape` resamples it with `resample()`.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.encodings import coords as coords_lib
from lfpe.encodings.base import AbsoluteEncoding, check_divisible, check_last_dim

METHODS = {"bilinear": "linear", "bicubic": "cubic", "bicubic_pytorch": "cubic-pytorch"}
INIT_STD = 0.02


def check_grid_shape(grid_shape, owner: str, name: str = "grid_shape") -> tuple[int, ...]:
  """`grid_shape` as a tuple of positive ints, or a ValueError that says how to pass it."""
  ok = (
    isinstance(grid_shape, Sequence)
    and len(grid_shape) > 0
    and all(
      isinstance(s, numbers.Integral) and not isinstance(s, bool) and s > 0 for s in grid_shape
    )
  )
  if not ok:
    raise ValueError(
      f"{owner}: `{name}` must be a non-empty tuple of positive ints (the "
      f"number of positions per axis), got {grid_shape!r}; pass e.g. "
      f"{name}=(14, 14)."
    )
  return tuple(int(s) for s in grid_shape)


def check_method(method: str, owner: str) -> str:
  """The jax.image kernel name for a resample `method`, or a ValueError listing them."""
  if method not in METHODS:
    raise ValueError(
      f"{owner}: unknown resample method={method!r}; use one of {', '.join(METHODS)}."
    )
  return METHODS[method]


def _scale_translation(n_old: int, n_new: int, align_corners: bool) -> tuple[float, float]:
  """jax.image.scale_and_translate's (scale, translation) for one axis.

  Output cell o samples input position (o + 0.5 - t) / s - 0.5. Half-pixel centres
  (align_corners=False): s = n_new / n_old, t = 0. Corner alignment: input position
  o (n_old - 1) / (n_new - 1), i.e. s = (n_new - 1) / (n_old - 1), t = (1 - s) / 2; an
  axis of length 1 has no corners and uses half-pixel centres.
  """
  if not align_corners or n_old == 1 or n_new == 1:
    return n_new / n_old, 0.0
  scale = (n_new - 1) / (n_old - 1)
  return scale, 0.5 * (1.0 - scale)


def resample(
  table: jnp.ndarray,
  old_shape: Sequence[int],
  new_shape: Sequence[int],
  method: str = "bilinear",
  num_prefix: int = 0,
  align_corners: bool = False,
  antialias: bool = True,
) -> jnp.ndarray:
  """Resample a learned position table from grid `old_shape` to grid `new_shape`.

  `table` is `[P + prod(old_shape), ...]`: `num_prefix` = P rows for prefix tokens (a
  class token) that are kept as they are, then the grid rows in row-major order. Returns
  `[P + prod(new_shape), ...]`. Any number of grid axes (1-D axis tables, 2-D grids).

  Conventions (a table is an image whose pixels are positions):
  * `align_corners=False` (default): half-pixel centres, exactly `jax.image.resize`, and
    PyTorch `F.interpolate(align_corners=False)` as used by timm's `resample_abs_pos_embed`
    and DeiT. Upsampling a linear ramp reproduces it except in the outermost half cells,
    which repeat the edge value.
  * `align_corners=True`: first and last positions map onto each other, as big_vision's
    `resample_posemb` (`scipy.ndimage.zoom(order=1)`; with `antialias=False` it is that,
    exactly). A linear ramp stays an exact linear ramp with the same end values.
  * `method`: `bilinear`; `bicubic` (Keys a=-0.5, = PyTorch bicubic with antialias=True, as
    timm); `bicubic_pytorch` (a=-0.75 when antialias=False, = PyTorch's default bicubic,
    e.g. Swin's relative-bias resizing).
  * `antialias` (default True, as jax.image.resize and timm) widens the kernel when
    downsampling only; it has no effect when upsampling.
  """
  kernel = check_method(method, "resample")
  old_shape = check_grid_shape(tuple(old_shape), "resample", "old_shape")
  new_shape = check_grid_shape(tuple(new_shape), "resample", "new_shape")
  if table.shape[0] != num_prefix + math.prod(old_shape):
    raise ValueError(
      f"resample: `table` has {table.shape[0]} rows but num_prefix={num_prefix} + "
      f"prod(old_shape={old_shape})={num_prefix + math.prod(old_shape)}; pass the grid "
      f"shape the table was trained on and the number of prefix (class) tokens."
    )
  if old_shape == new_shape:
    return table
  return _resample(table, old_shape, new_shape, kernel, num_prefix, align_corners, antialias)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _resample(table, old_shape, new_shape, kernel, num_prefix, align_corners, antialias):
  """`resample` after validation; jitted so that eager calls compile once per shape."""
  prefix, grid = table[:num_prefix], table[num_prefix:]
  features = grid.shape[1:]
  grid = grid.reshape(*old_shape, *features)  # [*old_shape, ...]
  st = [_scale_translation(o, n, align_corners) for o, n in zip(old_shape, new_shape, strict=True)]
  grid = jax.image.scale_and_translate(
    grid,
    (*new_shape, *features),
    tuple(range(len(old_shape))),
    jnp.array([s for s, _ in st]),
    jnp.array([t for _, t in st]),
    method=kernel,
    antialias=antialias,
  )
  grid = grid.reshape(math.prod(new_shape), *features).astype(table.dtype)  # [N', ...]
  return jnp.concatenate([prefix, grid], axis=0)


def lookup(tables: Sequence[jnp.ndarray], coords: jnp.ndarray) -> jnp.ndarray:
  """Concatenate `tables[a][coords[..., a]]` over axes a: `[..., M]` -> `[..., sum D_a]`.

  Coordinates are integer-valued (rounded); out-of-range indices give NaN rather than a
  silently clamped row.
  """
  idx = jnp.round(coords).astype(jnp.int32)  # [..., M]
  rows = []
  for a, t in enumerate(tables):
    i = jnp.where(idx[..., a] < 0, t.shape[0], idx[..., a])  # negative: out of range, no wrap
    rows.append(jnp.take(t, i, axis=0, mode="fill", fill_value=jnp.nan))
  return jnp.concatenate(rows, axis=-1)


class Embed1D(AbsoluteEncoding, nn.Module):
  """Embed-1D: a learned `[prod(grid_shape), dim]` table indexed by raster position.

  `__call__(coords [..., 1])` takes the flattened index (`coords.flat_index`).
  `grid(shape)` returns the table, reshaped to `grid_shape` and resampled with
  `resample_method` when `shape` differs.
  """

  dim: int
  grid_shape: tuple[int, ...] | None = None
  resample_method: str = "bilinear"

  coords_mode: ClassVar[str] = "index"
  flatten: ClassVar[bool] = True

  def __post_init__(self):
    super().__post_init__()
    check_divisible("dim", self.dim, 1, "the embedding width", type(self).__name__)
    check_grid_shape(self.grid_shape, type(self).__name__)
    check_method(self.resample_method, type(self).__name__)

  def setup(self):
    n = math.prod(self.grid_shape)
    self.table = self.param("table", nn.initializers.normal(INIT_STD), (n, self.dim))

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 1, type(self).__name__)
    return lookup([self.table], coords)  # [..., D]

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """The table for a row-major grid of `shape`, `[prod(shape), D]`."""
    shape = _check_same_ndim(shape, self.grid_shape, type(self).__name__)
    return resample(self.table, self.grid_shape, shape, self.resample_method)


class EmbedND(AbsoluteEncoding, nn.Module):
  """Embed-2D / Embed-4D: one learned `[grid_shape[a], dim / M]` table per axis.

  `__call__(coords [..., M])` looks up each integer coordinate in its axis table
  (`table_0`, `table_1`, ...) and concatenates in axis order. `grid(shape)` resamples each
  1-D axis table to `shape[a]` when `shape` differs from `grid_shape`.
  """

  dim: int
  grid_shape: tuple[int, ...] | None = None
  resample_method: str = "bilinear"

  coords_mode: ClassVar[str] = "index"

  def __post_init__(self):
    super().__post_init__()
    owner = type(self).__name__
    shape = check_grid_shape(self.grid_shape, owner)
    check_divisible("dim", self.dim, len(shape), f"split evenly over {len(shape)} axes", owner)
    check_method(self.resample_method, owner)

  def setup(self):
    width = self.dim // len(self.grid_shape)
    self.tables = [
      self.param(f"table_{a}", nn.initializers.normal(INIT_STD), (n, width))
      for a, n in enumerate(self.grid_shape)
    ]

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, len(self.grid_shape), type(self).__name__)
    return lookup(self.tables, coords)  # [..., D]

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """Every cell of a row-major grid of `shape`, `[prod(shape), D]`."""
    shape = _check_same_ndim(shape, self.grid_shape, type(self).__name__)
    tables = [
      resample(t, (o,), (n,), self.resample_method)
      for t, o, n in zip(self.tables, self.grid_shape, shape, strict=True)
    ]
    return lookup(tables, coords_lib.grid(shape, "index"))


def _check_same_ndim(shape: Sequence[int], grid_shape: tuple[int, ...], owner: str):
  shape = check_grid_shape(tuple(shape), owner, "shape")
  if len(shape) != len(grid_shape):
    raise ValueError(
      f"{owner}: `shape`={shape} must have as many axes as "
      f"grid_shape={tuple(grid_shape)}; pass a {len(grid_shape)}-D shape."
    )
  return shape
