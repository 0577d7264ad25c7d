"""BEiT's geometric resize of relative-offset tables (`resample_method='beit_geometric'`).

BEiT (Bao et al. 2022) fine-tunes at a larger window by enlarging each relative position
bias table from 2r+1 offsets per axis to 2r'+1: the old offsets are placed at the
geometrically spaced positions 0, ±1, ±(1+q), ±(1+q+q²), ..., with the ratio q found by
bisection on [1.01, 1.5] so that the outermost lands at r', and an interpolating cubic
spline through them (scipy's `interp2d(kind='cubic')`, FITPACK's `regrid` with s = 0) is
read at the integer offsets -r'..r', clamped to the placed range as FITPACK evaluates (the
bisection lands the outermost within 1e-5 of r' unless q stops at its lower bound 1.01, where
it lands beyond r', e.g. 25.7 for r' = 24 from r = 23, as in BEiT). The offsets 0 and ±1 keep
their learned values exactly; the far ones are stretched. BEiT keeps its three extra rows
(offsets to and from the class token) as they are, stored *last* in its table
(`rel_pos_bias[-num_extra_tokens:]`); here such rows come first (`num_prefix`), so move a BEiT
table's last three rows to the front before resizing it.

The spline is linear in the table, so it is built once per axis as a `[2r'+1, 2r+1]`
matrix (numpy, at trace time: shapes are static) and applied as one matmul per axis:
jit-able and differentiable. The tensor-product spline of `regrid` with s = 0 is the 1-D
not-a-knot interpolating spline along each axis in turn (tested against scipy's
`RectBivariateSpline`, the same FITPACK routine).

lfpe's generalisations, not in BEiT's code: each axis finds its own q (BEiT's windows are
square), and an axis whose size does not change is kept exactly (timm's non-square
`resize_rel_pos_bias_table` still searches q on it, which stops at 1.01 and moves its far
offsets: 3.9e-2 on a 13x27 -> 13x47 table of std 0.02); 1-D tables (`rel_attn_2d`'s row
and column offsets) use the 1-D spline. (An axis that grows has at least 5 offsets: from 3,
q <= 1.5 reaches offset 1 only, `check_axes`.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from scipy import interpolate

Q_RANGE = (1.01, 1.5)  # BEiT's bisection bounds for the ratio q
TOLERANCE = 1e-6  # BEiT's: bisection stops when the bracket is this narrow


def _reach(q: float, steps: int) -> float:
  """The outermost source position: 1 + q + ... + q^(steps-1)."""
  return float(sum(q**i for i in range(steps)))


def ratio(old: int, new: int) -> float:
  """BEiT's q for an axis of `old` = 2r+1 offsets enlarged to `new` = 2r'+1: the bisection
  on `Q_RANGE` for 1 + q + ... + q^(r-1) = r'."""
  left, right = Q_RANGE
  while right - left > TOLERANCE:
    q = (left + right) / 2.0
    if _reach(q, old // 2) > new // 2:
      right = q
    else:
      left = q
  return q


def positions(old: int, new: int) -> np.ndarray:
  """Where the `old` offsets sit on the enlarged axis: 0, ±1, ±(1+q), ... (ascending)."""
  q = ratio(old, new)
  far = np.cumsum([q**i for i in range(old // 2)])  # 1, 1+q, 1+q+q², ...
  return np.concatenate([-far[::-1], [0.0], far])


def check_axes(old_shape: Sequence[int], new_shape: Sequence[int], owner: str) -> None:
  """ValueError unless every axis is an offset axis (odd length) that stays or grows within
  what BEiT's q range can reach."""
  for old, new in zip(old_shape, new_shape, strict=True):
    if old % 2 == 0 or new % 2 == 0:
      raise ValueError(
        f"{owner}: resample_method='beit_geometric' resizes relative-offset tables (2n-1 "
        f"offsets per axis), got an axis of {old} -> {new}; use 'bicubic' or "
        "'bicubic_pytorch' for an absolute position table."
      )
    if new < old:
      raise ValueError(
        f"{owner}: resample_method='beit_geometric' only enlarges a table (BEiT fine-tunes "
        f"at larger windows), got {old} -> {new} offsets; use 'bicubic_pytorch' to shrink."
      )
    if new > old and old > 1 and _reach(Q_RANGE[1], old // 2) < new // 2:
      raise ValueError(
        f"{owner}: resample_method='beit_geometric' cannot stretch {old} offsets to {new}: "
        f"BEiT's ratio q <= {Q_RANGE[1]} reaches offset {_reach(Q_RANGE[1], old // 2):.1f} "
        f"only; use 'bicubic_pytorch', or resize in steps."
      )


@functools.cache
def matrix(old: int, new: int) -> np.ndarray:
  """`[new, old]`: the geometric spline resize of one offset axis as a linear map."""
  if old == new:
    return np.eye(old)
  if old == 1:
    return np.ones((new, 1))  # one offset: every new offset takes its value
  x = positions(old, new)
  spline = interpolate.make_interp_spline(x, np.eye(old), k=3)  # old >= 5 (`check_axes`)
  target = np.arange(-(new // 2), new // 2 + 1, dtype=np.float64)
  return spline(np.clip(target, x[0], x[-1]))  # FITPACK clamps to the data's range


def resize(
  table: jnp.ndarray, old_shape: Sequence[int], new_shape: Sequence[int], num_prefix: int = 0
) -> jnp.ndarray:
  """`table` `[P + prod(old_shape), ...]` (P = `num_prefix` rows kept) with its offset grid
  enlarged to `new_shape` by BEiT's geometric spline, axis by axis."""
  check_axes(old_shape, new_shape, "beit_geometric")
  prefix, grid = table[:num_prefix], table[num_prefix:]
  features = grid.shape[1:]
  grid = grid.reshape(*old_shape, *features)
  for axis, (old, new) in enumerate(zip(old_shape, new_shape, strict=True)):
    weights = jnp.asarray(matrix(old, new), dtype=jnp.float32)
    grid = jnp.moveaxis(jnp.tensordot(weights, grid, axes=([1], [axis])), 0, axis)
  grid = grid.reshape(math.prod(new_shape), *features).astype(table.dtype)
  return jnp.concatenate([prefix, grid], axis=0)
