"""Resampling learned position tables to a new grid (an image whose pixels are positions).

`resample(table, old_shape, new_shape, ...)` keeps prefix rows (a class token) apart and
resizes the grid rows with `jax.image.scale_and_translate`; the conventions of timm,
big_vision and PyTorch (Swin, MAE) are options (see its docstring). Modules check their
resampling fields with `check_resample_options`. For NaFlex-packed batches (each example its
own grid, sizes traced) `dynamic_weights` computes the same weights one output cell at a time
(`packed_table`, `axis_weights`): every method but BEiT's geometric resize, half-pixel centres.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from lfpe.encodings import geometric

METHODS = {"bilinear": "linear", "bicubic": "cubic", "bicubic_pytorch": "cubic-pytorch"}
OFFSET_METHODS = ("beit_geometric",)  # for relative-offset tables only (lfpe.encodings.geometric)


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


def check_method(
  method: str, owner: str, name: str = "resample_method", offsets: bool = False
) -> str:
  """The jax.image kernel name for a resample `method` (the method itself for one of
  `OFFSET_METHODS`, allowed with `offsets`: a relative-offset table), or a ValueError
  listing them."""
  known = (*METHODS, *OFFSET_METHODS) if offsets else tuple(METHODS)
  if not isinstance(method, str) or method not in known:
    hint = "" if offsets or method not in OFFSET_METHODS else " (it is for relative tables)"
    raise ValueError(f"{owner}: unknown `{name}`={method!r}{hint}; use one of {', '.join(known)}.")
  return METHODS.get(method, method)


def check_resample_options(
  method: str,
  align_corners: bool,
  antialias: bool | None,
  owner: str,
  method_name: str = "resample_method",
  offsets: bool = False,
) -> None:
  """Validate resampling options before anything compiles; a ValueError names the field and fix.

  `method_name` is how `owner` calls the method field (`method` for `resample` itself);
  `offsets`: `owner` resamples relative-offset tables (then `OFFSET_METHODS` are allowed).
  """
  check_method(method, owner, method_name, offsets)
  if method in OFFSET_METHODS and (align_corners or antialias is not None):
    raise ValueError(
      f"{owner}: `{method_name}`={method!r} places the offsets itself; leave `align_corners`"
      f"=False and `antialias`=None (got {align_corners!r}, {antialias!r})."
    )
  if not isinstance(align_corners, bool):
    raise ValueError(
      f"{owner}: `align_corners` must be True or False, got {align_corners!r}; False for "
      f"half-pixel centres (timm, PyTorch's default), True to map the first and last "
      f"positions onto each other (big_vision)."
    )
  if antialias is not None and not isinstance(antialias, bool):
    raise ValueError(
      f"{owner}: `antialias` must be None (the method's own convention), True or False, "
      f"got {antialias!r}."
    )
  if method == "bicubic_pytorch" and antialias:
    raise ValueError(
      f"{owner}: `{method_name}`='bicubic_pytorch' is PyTorch's bicubic without antialiasing "
      f"(a=-0.75, edges replicated) and takes no `antialias`=True: PyTorch's antialiased "
      f"bicubic (a=-0.5, as timm) is `{method_name}`='bicubic'. Use that, or leave "
      f"`antialias`=None."
    )


def _scale_translation(
  n_old: int, n_new: int, align_corners: bool, antialias: bool
) -> tuple[float, float]:
  """jax.image.scale_and_translate's (scale, translation) for one axis.

  Output cell o samples input position (o + 0.5 - t) / s - 0.5. Half-pixel centres
  (align_corners=False): s = n_new / n_old, t = 0. Corner alignment: input position
  o (n_old - 1) / (n_new - 1), i.e. s = (n_new - 1) / (n_old - 1), t = (1 - s) / 2 (which
  maps o = 0 to 0 for any s). An input axis of length 1 uses half-pixel centres (every
  output is that one value). An output axis of length 1 samples input position 0 without
  antialias, as PyTorch and scipy.ndimage.zoom; with antialias, its half-pixel centre, the
  middle.
  """
  if not align_corners or n_old == 1 or (n_new == 1 and antialias):
    return n_new / n_old, 0.0
  scale = (n_new - 1) / (n_old - 1) if n_new > 1 else n_new / n_old
  return scale, 0.5 * (1.0 - scale)


def resample(
  table: jnp.ndarray,
  old_shape: Sequence[int],
  new_shape: Sequence[int],
  method: str = "bilinear",
  num_prefix: int = 0,
  align_corners: bool = False,
  antialias: bool | None = None,
) -> jnp.ndarray:
  """Resample a learned position table from grid `old_shape` to grid `new_shape`.

  `table` is `[P + prod(old_shape), ...]`: `num_prefix` = P rows for prefix tokens (a
  class token) that are kept as they are, then the grid rows in row-major order. Returns
  `[P + prod(new_shape), ...]`. Any number of grid axes (1-D axis tables, 2-D grids),
  resized separably.

  Grid conventions (a table is an image whose pixels are positions):
  * `align_corners=False` (default): half-pixel centres, as `jax.image.resize` and PyTorch
    `F.interpolate(align_corners=False)`.
  * `align_corners=True`: first and last positions map onto each other, as PyTorch
    `F.interpolate(align_corners=True)` without antialiasing and `scipy.ndimage.zoom`. With
    antialiasing (the default of `bilinear` and `bicubic`) lfpe still aligns the corners;
    PyTorch's `antialias=True, align_corners=True` does not (it maps pixel i to
    scale·(i + 0.5), a 0..6 ramp resized 7 -> 12 ends at 5.77, not 6): no PyTorch call
    equals that combination, pass `antialias=False` to match PyTorch.

  `method` with `antialias` (None: the method's own convention, shown first):
  * `bilinear`, antialias True: `jax.image.resize(method="bilinear")`; on upsampling PyTorch
    `F.interpolate(mode="bilinear")`. antialias only widens the triangle when downsampling.
    `align_corners=True, antialias=False` is big_vision's `resample_posemb`
    (`scipy.ndimage.zoom(order=1)`), exactly.
  * `bicubic`, antialias True: Keys cubic a=-0.5, taps past the border dropped and weights
    renormalised: `jax.image.resize(method="bicubic")`, and (align_corners=False) PyTorch
    `F.interpolate(mode="bicubic", antialias=True)` as timm's `resample_abs_pos_embed`.
    antialias=False keeps a=-0.5 and only stops widening the kernel when downsampling.
  * `bicubic_pytorch`, antialias False: exactly PyTorch's default `F.interpolate(mode=
    "bicubic", align_corners=align_corners)` (antialias=False), as Swin's relative-bias and
    MAE's position-table resizing: a=-0.75, edge values replicated, no widening when
    downsampling. antialias=True raises: in PyTorch it also switches the kernel to a=-0.5,
    which is `bicubic`.
  * `beit_geometric` (relative-offset tables only: odd axes of 2n-1 offsets, enlarged):
    BEiT's geometric spline resize (`lfpe.encodings.geometric`).
  """
  check_resample_options(method, align_corners, antialias, "resample", "method", offsets=True)
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
  if method in OFFSET_METHODS:
    return geometric.resize(table, old_shape, new_shape, num_prefix)
  if antialias is None:
    antialias = method != "bicubic_pytorch"
  kernel = METHODS[method]
  return _resample(table, old_shape, new_shape, kernel, num_prefix, align_corners, antialias)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _resample(table, old_shape, new_shape, kernel, num_prefix, align_corners, antialias):
  """`resample` after validation; jitted so that eager calls compile once per shape.

  jax's "cubic-pytorch" kernel without antialias replicates edges (PyTorch's index clamp);
  with antialias it silently falls back to Keys a=-0.5, which `resample` never asks for.
  """
  prefix, grid = table[:num_prefix], table[num_prefix:]
  features = grid.shape[1:]
  grid = grid.reshape(*old_shape, *features)  # [*old_shape, ...]
  st = [
    _scale_translation(o, n, align_corners, antialias)
    for o, n in zip(old_shape, new_shape, strict=True)
  ]
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


def _triangle(x: jnp.ndarray) -> jnp.ndarray:
  return jnp.maximum(0.0, 1.0 - jnp.abs(x))


def _keys_cubic(x: jnp.ndarray, a: float = -0.5) -> jnp.ndarray:
  """Keys' cubic: a = -0.5 as jax.image's `cubic` kernel, a = -0.75 as PyTorch's (and
  jax's `cubic-pytorch`) without antialiasing."""
  out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
  out = jnp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
  return jnp.where(x >= 2.0, 0.0, out)


DYNAMIC_KERNELS = {
  "bilinear": _triangle,
  "bicubic": _keys_cubic,
  "bicubic_pytorch": functools.partial(_keys_cubic, a=-0.75),
}
EDGE_PAD = 2  # bicubic_pytorch: taps up to 2 cells past either edge, folded onto the edge


def dynamic_weights(
  n_old: int, size: jnp.ndarray, index: jnp.ndarray, method: str, antialias: bool | None
) -> jnp.ndarray:
  """`[..., n_old]`: the weights with which `resample` (half-pixel centres) makes cell
  `index` of an axis of `n_old` cells resized to `size`, for traced `size` and `index`
  (broadcast together): jax.image.scale_and_translate's weight computation, one output cell
  at a time, so a packed batch resamples each example's table to its own grid.
  `bicubic_pytorch` replicates the edge cells (PyTorch's index clamp, jax's edge padding):
  the taps past an edge add to the edge cell."""
  problem = packed_problem(method, align_corners=False)
  if problem:
    raise ValueError(f"{problem}.")
  edge_padding = method == "bicubic_pytorch"
  antialias = not edge_padding if antialias is None else antialias
  size, index = jnp.broadcast_arrays(jnp.asarray(size, jnp.float32), jnp.asarray(index))
  inv_scale = n_old / size
  kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else jnp.ones_like(inv_scale)
  sample = (index.astype(jnp.float32) + 0.5) * inv_scale - 0.5
  pad = EDGE_PAD if edge_padding else 0
  cells = jnp.arange(-pad, n_old + pad, dtype=jnp.float32)
  weights = DYNAMIC_KERNELS[method](jnp.abs(sample[..., None] - cells) / kernel_scale[..., None])
  if edge_padding:  # fold the taps outside [0, n_old) onto the edge cells
    inner = weights[..., pad : pad + n_old]
    inner = inner.at[..., 0].add(weights[..., :pad].sum(-1))
    weights = inner.at[..., -1].add(weights[..., pad + n_old :].sum(-1))
  total = jnp.sum(weights, axis=-1, keepdims=True)
  tiny = 1000.0 * float(jnp.finfo(jnp.float32).eps)
  weights = jnp.where(jnp.abs(total) > tiny, weights / jnp.where(total != 0, total, 1.0), 0.0)
  if edge_padding:
    return weights
  inside = (sample >= -0.5) & (sample <= n_old - 0.5)
  return jnp.where(inside[..., None], weights, 0.0)


def packed_problem(method: str, align_corners: bool) -> str | None:
  """Why a resampling policy has no per-example version (packed batches), or None: the one
  check behind `dynamic_weights`, `axis_weights` and `encodings.packed_refusal`."""
  if method not in DYNAMIC_KERNELS:
    return (
      f"resample_method={method!r} has no per-example version (packed batches); use one of "
      f"{', '.join(DYNAMIC_KERNELS)}"
    )
  if align_corners:
    return "packed batches resample with half-pixel centres only; use align_corners=False"
  return None


def axis_weights(
  module, old: Sequence[int], new: jnp.ndarray, index: jnp.ndarray
) -> list[jnp.ndarray]:
  """Per axis a, `[..., old[a]]`: how cell `index[..., a]` of a table of `old` cells, resampled
  by `module`'s policy to the traced size `new[..., a]` (broadcast with `index`), mixes the old
  cells: `resample_table` one cell at a time, so each example of a packed batch gets its own."""
  problem = packed_problem(module.resample_method, module.align_corners)
  if problem:
    raise ValueError(f"{type(module).__name__}: {problem}.")
  return [
    dynamic_weights(n, new[..., a], index[..., a], module.resample_method, module.antialias)
    for a, n in enumerate(old)
  ]


def packed_weights(module, index: jnp.ndarray, shape: jnp.ndarray) -> list[jnp.ndarray]:
  """Per axis a, `[B, L, grid_shape[a]]`: how each token's row of `module`'s table, resampled
  to its example's grid (`shape [B, M]`), mixes the training grid's rows."""
  return axis_weights(module, module.grid_shape, jnp.asarray(shape)[:, None, :], index)


def packed_table(module, table: jnp.ndarray, index: jnp.ndarray, shape: jnp.ndarray):
  """`[B, L, D]`: a `[prod(grid_shape), D]` raster table resampled to each example's grid
  (`shape [B, M]`) and read at its tokens' cells (`index [B, L, M]`), separably."""
  weights = packed_weights(module, index, shape)
  out = jnp.einsum("blh,h...->bl...", weights[0], table.reshape(*module.grid_shape, -1))
  for w in weights[1:]:
    out = jnp.einsum("blh,blh...->bl...", w, out)
  return out
