"""Learned position tables: Embed-1D, Embed-2D/4D (one table per axis), and resampling.

* `Embed1D` (`embed_1d`): one learned vector per position of the raster-flattened grid,
  a `[prod(grid_shape), D]` table (002 Sec. 4.1 "Embed-1D"; ViT's default, 004).
* `EmbedND` (`embed_nd`, `embed_2d`, `embed_4d`): one table per coordinate axis,
  `[grid_shape[a], D / M]`, looked up independently and concatenated in axis order
  (002 Sec. 4.1 "Embed-2D": vertical [64, 384] ‖ horizontal [64, 384]; Sec. 4.4 "Embed-4D":
  top, left, bottom, right of a box).

Both init N(0, init_std²), 0.02 by default (ViT; 003 Sec. 3.1), and read integer index
coordinates (`coords_mode='index'`). A table only knows the positions it was trained on:
`grid(shape)` with a shape other than `grid_shape` resamples it with `resample()`, using the
module's `resample_method`, `align_corners` and `antialias` (the same choices as
`resample`; `antialias=None` is the method's own convention).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax.numpy as jnp

from lfpe.encodings import coords as coords_lib
from lfpe.encodings.base import (
  AbsoluteEncoding,
  Registration,
  check_divisible,
  check_last_dim,
  check_positive,
)
from lfpe.encodings.resample import (
  check_grid_shape,
  check_resample_options,
  packed_table,
  packed_weights,
  resample,
)

INIT_STD = 0.02


def check_table_options(module, offsets: bool = False) -> None:
  """The checks every learned table shares: its init std and its resampling options
  (`offsets`: a relative-offset table, which may also take `OFFSET_METHODS`)."""
  owner = type(module).__name__
  check_positive("init_std", module.init_std, owner)
  check_resample_options(
    module.resample_method, module.align_corners, module.antialias, owner, offsets=offsets
  )


def resample_table(
  module, table: jnp.ndarray, old_shape: Sequence[int], new_shape: Sequence[int]
) -> jnp.ndarray:
  """`resample` with `module`'s `resample_method`, `align_corners` and `antialias`."""
  return resample(
    table,
    old_shape,
    new_shape,
    module.resample_method,
    align_corners=module.align_corners,
    antialias=module.antialias,
  )


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
  init_std: float = INIT_STD
  resample_method: str = "bilinear"
  align_corners: bool = False
  antialias: bool | None = None

  coords_mode: ClassVar[str] = "index"
  flatten: ClassVar[bool] = True

  def check(self):
    super().check()
    check_divisible("dim", self.dim, 1, "the embedding width", type(self).__name__)
    check_grid_shape(self.grid_shape, type(self).__name__)
    check_table_options(self)

  def setup(self):
    n = math.prod(self.grid_shape)
    self.table = self.param("table", nn.initializers.normal(self.init_std), (n, self.dim))

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 1, type(self).__name__)
    return lookup([self.table], coords)  # [..., D]

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """The table for a row-major grid of `shape`, `[prod(shape), D]`."""
    shape = _check_same_ndim(shape, self.grid_shape, type(self).__name__)
    return resample_table(self, self.table, self.grid_shape, shape)

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """`grid(shape[b])` at the cells `index` of per-example grids, `[B, L, D]`: the table
    resampled per example (`AbsoluteEncoding.packed`)."""
    return packed_table(self, self.table, index, shape)

  def resize_params(self, params: dict, source_grid: Sequence[int]) -> dict:
    """This module's params from those of one trained at `source_grid` (`init_from`): the
    table resampled to `grid_shape` by this module's own policy, as `grid` would."""
    return {"table": resample_table(self, params["table"], source_grid, self.grid_shape)}


class EmbedND(AbsoluteEncoding, nn.Module):
  """Embed-2D / Embed-4D: one learned `[grid_shape[a], dim / M]` table per axis.

  `__call__(coords [..., M])` looks up each integer coordinate in its axis table
  (`table_0`, `table_1`, ...) and concatenates in axis order. `grid(shape)` resamples each
  1-D axis table to `shape[a]` when `shape` differs from `grid_shape`.
  """

  dim: int
  grid_shape: tuple[int, ...] | None = None
  init_std: float = INIT_STD
  resample_method: str = "bilinear"
  align_corners: bool = False
  antialias: bool | None = None

  coords_mode: ClassVar[str] = "index"

  def check(self):
    super().check()
    owner = type(self).__name__
    shape = check_grid_shape(self.grid_shape, owner)
    check_divisible("dim", self.dim, len(shape), f"split evenly over {len(shape)} axes", owner)
    check_table_options(self)

  def setup(self):
    width = self.dim // len(self.grid_shape)
    self.tables = [
      self.param(f"table_{a}", nn.initializers.normal(self.init_std), (n, width))
      for a, n in enumerate(self.grid_shape)
    ]

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, len(self.grid_shape), type(self).__name__)
    return lookup(self.tables, coords)  # [..., D]

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """Every cell of a row-major grid of `shape`, `[prod(shape), D]`."""
    shape = _check_same_ndim(shape, self.grid_shape, type(self).__name__)
    tables = [
      resample_table(self, t, (o,), (n,))
      for t, o, n in zip(self.tables, self.grid_shape, shape, strict=True)
    ]
    return lookup(tables, coords_lib.grid(shape, "index"))

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """`grid(shape[b])` at the cells `index` of per-example grids, `[B, L, D]`: each axis
    table resampled per example (`AbsoluteEncoding.packed`)."""
    weights = packed_weights(self, index, shape)
    return jnp.concatenate(
      [jnp.einsum("blh,hd->bld", w, t) for w, t in zip(weights, self.tables, strict=True)], -1
    )

  def resize_params(self, params: dict, source_grid: Sequence[int]) -> dict:
    """This module's params from those of one trained at `source_grid` (`init_from`): each
    axis table resampled to its length in `grid_shape`, as `grid` would."""
    return {
      f"table_{a}": resample_table(self, params[f"table_{a}"], (old,), (new,))
      for a, (old, new) in enumerate(zip(source_grid, self.grid_shape, strict=True))
    }


def _check_same_ndim(shape: Sequence[int], grid_shape: tuple[int, ...], owner: str):
  shape = check_grid_shape(tuple(shape), owner, "shape")
  if len(shape) != len(grid_shape):
    raise ValueError(
      f"{owner}: `shape`={shape} must have as many axes as "
      f"grid_shape={tuple(grid_shape)}; pass a {len(grid_shape)}-D shape."
    )
  return shape


ENCODINGS = (
  Registration(
    "embed_1d",
    Embed1D,
    resolution_free=False,
    labels=("Embed-1D",),
    knob=("init_std", INIT_STD),
  ),
  Registration(
    "embed_nd",
    EmbedND,
    aliases=("embed_2d", "embed_4d"),
    reads_boxes=True,
    resolution_free=False,
    labels=("Embed-ND", "Embed-2D", "Embed-4D"),
    knob=("init_std", INIT_STD),
  ),
)
