"""Resampling learned position tables to a new grid (an image whose pixels are positions).

`resample(table, old_shape, new_shape, ...)` keeps prefix rows (a class token) apart and
resizes the grid rows with `jax.image.scale_and_translate`; the conventions of timm,
big_vision and PyTorch are options (see its docstring).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence

import jax
import jax.numpy as jnp

METHODS = {"bilinear": "linear", "bicubic": "cubic", "bicubic_pytorch": "cubic-pytorch"}


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
