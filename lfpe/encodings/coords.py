"""Coordinates: the one convention every positional encoding in lfpe reads.

Absolute encodings take real-valued coordinates `[..., M]` (grouped Fourier:
`[..., G, M]`) and return `[..., D]`. This module makes those coordinates:

* `grid(shape, mode)`: a row-major grid `[prod(shape), len(shape)]` in one of
  - `index`:    integer positions 0 .. n-1 (as float32),
  - `unit`:     [0, 1], endpoints included (0 for an axis of length 1),
  - `centered`: [-1, 1], endpoints included (the Gabor paper's Fig. 5).
* `flat_index(shape)`: the raster-order index `[prod(shape), 1]` (1-D encodings).
* `detr(mask)`: DETR's 1-based cumulative sum over the valid region, normalised
  by the last valid value to (0, 2π]; `[B, H, W, 2]` as (y, x).
* `boxes(boxes, groups)`: 4-D boxes (top, left, bottom, right) split into
  `groups` groups of `4 // groups` coordinates, `[..., G, M]` (002 Sec. 4.4).
* `augment(coords, key, shift=, jitter=, rescale=)`: DINOv3's coordinate augmentation
  for training (random shift, per-axis jitter, global rescale), in any mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

MODES = ("index", "unit", "centered")


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
  shape = tuple(int(s) for s in shape)
  if not shape or any(s < 1 for s in shape):
    raise ValueError(f"grid shape must be a non-empty tuple of positive ints, got {shape}.")
  return shape


def axis_values(n: int, mode: str) -> np.ndarray:
  """The `n` coordinate values of one axis in `mode`, float32 `[n]`."""
  if mode not in MODES:
    raise ValueError(f"mode={mode!r} is not a coordinate mode; use one of {MODES}.")
  return values(np.arange(n, dtype=np.float32), n, mode)


def values(index, n, mode: str):
  """The coordinates in `mode` of cells `index` of axes of `n` cells (broadcast), float32:
  numpy in, numpy out (a static grid, `axis_values`); jax in, jax out (traced per-example
  grids of packed batches)."""
  static = all(isinstance(a, (np.ndarray, np.generic, int, float)) for a in (index, n))
  xp = np if static else jnp
  index, n = xp.asarray(index, xp.float32), xp.asarray(n, xp.float32)
  if mode == "index":
    return index
  unit = index / xp.maximum(n - 1.0, 1.0)
  # one cell: 0 in `unit`, -1 in `centered` (the first end; gabor.edge_markers relies on it)
  return unit if mode == "unit" else 2.0 * unit - 1.0


def grid(shape: Sequence[int], mode: str = "index") -> jnp.ndarray:
  """Row-major grid of coordinates, `[prod(shape), len(shape)]` float32."""
  shape = _check_shape(shape)
  axes = [axis_values(n, mode) for n in shape]
  mesh = np.meshgrid(*axes, indexing="ij")
  return jnp.asarray(np.stack([m.reshape(-1) for m in mesh], axis=-1))


def flat_index(shape: Sequence[int]) -> jnp.ndarray:
  """Raster-order position index of every grid cell, `[prod(shape), 1]` float32."""
  shape = _check_shape(shape)
  return jnp.arange(math.prod(shape), dtype=jnp.float32)[:, None]


DETR_SCALE, DETR_EPS = 2 * math.pi, 1e-6  # DETR's PositionEmbeddingSine defaults


def detr(
  mask: jnp.ndarray, normalize: bool = True, scale: float = DETR_SCALE, eps: float = DETR_EPS
) -> jnp.ndarray:
  """DETR positions from a padding mask (True = padding), `[B, H, W, 2]` (y, x).

  Positions are the 1-based cumulative count of valid pixels along each axis
  (001 Sec. 4.2). With `normalize`, each is divided by the last value along its
  axis and multiplied by `scale`, giving (0, 2π] on the valid region: a padded
  image then has the same positions as the unpadded one where it is valid.
  """
  mask = jnp.asarray(mask)
  if mask.ndim != 3 or mask.dtype != jnp.bool_:
    raise ValueError(
      f"mask must be a boolean [B, H, W] array (True = padding), got "
      f"{mask.dtype}{tuple(mask.shape)}; pass e.g. `mask=pixels_are_padding.astype(bool)`."
    )
  valid = (~mask).astype(jnp.float32)
  y = jnp.cumsum(valid, axis=1)
  x = jnp.cumsum(valid, axis=2)
  if normalize:
    y = y / (y[:, -1:, :] + eps) * scale
    x = x / (x[:, :, -1:] + eps) * scale
  return jnp.stack([y, x], axis=-1)


def boxes(box: jnp.ndarray, groups: int = 1) -> jnp.ndarray:
  """Split boxes `[..., 4]` (top, left, bottom, right) into `[..., G, 4 // G]`.

  G=1: one 4-D group; G=2: (top, left), (bottom, right); G=4: four 1-D groups.
  """
  box = jnp.asarray(box)
  if box.shape[-1] != 4:
    raise ValueError(
      f"boxes must end in 4 coordinates (top, left, bottom, right), got shape {tuple(box.shape)}."
    )
  if groups not in (1, 2, 4):
    raise ValueError(f"groups={groups} must divide the 4 box coordinates: use 1, 2 or 4.")
  return box.reshape(*box.shape[:-1], groups, 4 // groups)


AUGMENT_KEYS = ("shift", "jitter", "rescale", "convention")
CONVENTIONS = ("extent", "dinov3")
# DINOv3's released ViT configs (`pos_embed_rope_shift_coords: null`, `jitter_coords: null`,
# `rescale_coords: 2`): the box [-1, 1] scaled by s, log-uniform in [1/2, 2].
DINOV3 = {"rescale": 2.0, "convention": "dinov3"}


def check_augment(options, owner: str) -> dict[str, float | str]:
  """`options` ({shift, jitter, rescale, convention}, any subset) with defaults, or ValueError
  naming the field: shift >= 0, jitter >= 1 and rescale >= 1 (1: off), convention one of
  `CONVENTIONS`."""
  options = dict(options or {})
  unknown = sorted(set(options) - set(AUGMENT_KEYS))
  if unknown:
    raise ValueError(f"{owner}: coord_augment.{unknown[0]} is unknown; use {AUGMENT_KEYS}.")
  out = {"shift": 0.0, "jitter": 1.0, "rescale": 1.0, "convention": "extent"}
  convention = options.pop("convention", "extent")
  if convention not in CONVENTIONS:
    raise ValueError(f"{owner}: coord_augment.convention={convention!r}; use one of {CONVENTIONS}.")
  out["convention"] = convention
  for key, value in options.items():
    low = 0.0 if key == "shift" else 1.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < low:
      raise ValueError(
        f"{owner}: coord_augment.{key} must be a number >= {low:g} ({low:g}: off), got {value!r}."
      )
    out[key] = float(value)
  return out


def augment(
  coords,
  key,
  *,
  shift: float = 0.0,
  jitter: float = 1.0,
  rescale: float = 1.0,
  convention: str = "extent",
  num_positions: Sequence[int] | None = None,
):
  """DINOv3's coordinate augmentation (Siméoni et al. 2025, RoPE "box jittering"): one draw
  for all of `coords` `[..., M]`, for training only.

  Each axis is normalised to [-1, 1] about its centre, then, as DINOv3 does in this order: a
  shift u ~ U(-shift, shift) per axis is added, the axis is multiplied by a jitter
  exp(U(-log jitter, log jitter)) per axis and by one rescale exp(U(-log rescale, log
  rescale)) for all axes, and the result is mapped back to the coordinates' own mode. With
  the defaults (0, 1, 1) it is the identity. `convention` says what [-1, 1] spans:
  `extent` (lfpe's first convention, the recorded runs'): the first and last positions, so a
  shift u moves an axis of n positions by u·(n − 1)/2 index steps; `dinov3`: DINOv3's pixel
  centres, (i + 0.5)/n · 2 − 1, so it moves by u·n/2 (needs `num_positions`, the grid's n
  per axis). An axis of one position has no spacing to read its unit from, so a shift on it
  is taken in index units (half a cell per unit of u): DINOv3's for index coordinates, not
  for other coordinate modes (e.g. `dinov3`'s, where it moves about 1/(4π) of DINOv3's; the
  released preset has no shift). The rescale and jitter scale
  about the centre, the same in both; `DINOV3` is the released preset (rescale 2 only).
  """
  coords = jnp.asarray(coords, jnp.float32)
  flat = coords.reshape(-1, coords.shape[-1])
  low, high = flat.min(axis=0), flat.max(axis=0)
  centre, half = (high + low) / 2, jnp.maximum((high - low) / 2, 1e-6)
  if convention == "dinov3":
    if num_positions is None:
      raise ValueError("augment: convention='dinov3' needs num_positions (the grid's shape).")
    counts = tuple(num_positions)
    if len(counts) != coords.shape[-1]:  # a flattened 1-D index of the grid
      counts = (math.prod(counts),) * coords.shape[-1]
    n = jnp.asarray(counts, jnp.float32)
    # half a cell beyond the outer centres; a one-cell axis has no spacing to read, so it is
    # taken in index units (DINOv3's c = 0 moves to u: u·n/2 = u/2 of a step)
    half = jnp.where(n > 1, half * n / jnp.maximum(n - 1, 1), 0.5)
  k_shift, k_jitter, k_rescale = jax.random.split(key, 3)
  m = coords.shape[-1]
  offset = jax.random.uniform(k_shift, (m,), minval=-shift, maxval=shift)
  log_j, log_r = math.log(jitter), math.log(rescale)
  scale = jnp.exp(jax.random.uniform(k_jitter, (m,), minval=-log_j, maxval=log_j))
  scale = scale * jnp.exp(jax.random.uniform(k_rescale, (), minval=-log_r, maxval=log_r))
  return centre + ((coords - centre) / half + offset) * scale * half
