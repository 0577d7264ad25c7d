"""2-D relative positions in attention: a learned bias table and relative logits.

* `RelativeBias2D` (`rel_bias_2d`, kind `bias`): Swin's relative position bias (001 Sec. 3).
  A learned `[(2H-1)(2W-1), heads]` table, read at index
  `(Δh + H - 1)(2W - 1) + (Δw + W - 1)` with `Δ = position(query) - position(key)`, gives
  `B [heads, N, N]`, added to the logits. Init N(0, 0.02²): 001 (and Swin) use PyTorch
  `trunc_normal_(std=.02)`, whose bounds are ±2 absolute (±100σ), so it is this normal;
  flax's `truncated_normal(0.02)` would cut at ±2σ and give std 0.0176.
* `RelativeAttention2D` (`rel_attn_2d`, kind `logits`): the 2-D relative attention of
  Ramachandran et al. (003 Eq. 2): logits `q_ij · r_{a-i, b-j}`, with `Δ = position(key) -
  position(query)` and `r` the concatenation of a row-offset embedding (first head_dim/2
  channels) and a column-offset embedding (last head_dim/2). Eq. 2 is written with the sum
  over a ≤ i, b ≤ j (a causal window in the thesis' transcription); here every key is
  attended and any mask is the attention module's business.

Both accept a `shape` other than `grid_shape`: the tables are resampled with
`resample.resample`; on NaFlex-packed batches (`packed`) each example's table is resampled to
its own grid the same way, at traced sizes. `rel_bias_2d`'s default,
`resample_method='bicubic_pytorch'`, is Swin's rule: Swin fine-tunes at a new window size with
PyTorch's `F.interpolate(mode='bicubic')` (a = -0.75, no antialiasing). `rel_attn_2d`'s default,
`'bicubic'`, is the antialiased bicubic (Keys' a = -0.5) of `jax.image.resize` and timm's
`resample_abs_pos_embed`; `rel_bias_2d` takes it too (`resample_method='bicubic'`). On a 7 -> 12
window (a 13^2 -> 23^2 table of N(0, 0.02^2) entries) the two kernels' largest difference is
5e-3 on average over random tables (6e-3 at the 95th percentile, 8e-3 at most in 400 draws),
about 5 % of the table's range. `resample_method='beit_geometric'` is BEiT's geometric spline
enlargement (`lfpe.encodings.geometric`), which keeps the offsets 0 and ±1 exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from lfpe.checked import Checked
from lfpe.encodings.base import Registration, check_divisible, check_positive
from lfpe.encodings.learned import INIT_STD, check_table_options, resample_table
from lfpe.encodings.resample import axis_weights, check_grid_shape, check_resample_options


def relative_offsets(shape: Sequence[int]) -> np.ndarray:
  """`offsets[i, j] = position(i) - position(j)` over a row-major 2-D grid, `[N, N, 2]` int."""
  h, w = shape
  pos = np.stack(np.meshgrid(np.arange(h), np.arange(w), indexing="ij"), -1).reshape(-1, 2)
  return pos[:, None, :] - pos[None, :, :]


def relative_index(shape: Sequence[int]) -> np.ndarray:
  """Swin's relative position index `[N, N]` (001 Sec. 3.1.1), query minus key."""
  h, w = shape
  d = relative_offsets(shape)
  return (d[..., 0] + h - 1) * (2 * w - 1) + (d[..., 1] + w - 1)


def relative_bias(table: jnp.ndarray, shape: Sequence[int]) -> jnp.ndarray:
  """The bias `[heads, N, N]` of a `[(2H-1)(2W-1), heads]` table on a grid of `shape`."""
  bias = table[relative_index(shape)]  # [N, N, heads]
  return jnp.transpose(bias, (2, 0, 1))


def relative_logits(
  q: jnp.ndarray, row: jnp.ndarray, col: jnp.ndarray, shape: Sequence[int]
) -> jnp.ndarray:
  """003 Eq. 2's `q_ij · r_{a-i, b-j}`, `[B, heads, N, N]`.

  q: `[B, N, heads, d]`; row: `[2H-1, heads, d/2]` embeddings of row offsets -(H-1)..H-1;
  col: `[2W-1, heads, d/2]` likewise for columns. `r = row ‖ col`, so the logit is
  `q[:d/2] · row[Δrow] + q[d/2:] · col[Δcol]`: each half is contracted with all offsets
  once (`[B, heads, N, 2H-1]`) and then gathered per key, never building `[N, N, d]`.
  """
  h, w = shape
  half = q.shape[-1] // 2
  delta = -relative_offsets(shape)  # [N, N, 2], key minus query
  n = np.arange(delta.shape[0])[:, None]  # [N, 1]
  q_row = jnp.einsum("bnhd,rhd->bhnr", q[..., :half], row)  # [B, heads, N, 2H-1]
  q_col = jnp.einsum("bnhd,rhd->bhnr", q[..., half:], col)  # [B, heads, N, 2W-1]
  return q_row[:, :, n, delta[..., 0] + h - 1] + q_col[:, :, n, delta[..., 1] + w - 1]


def check_grid_2d(shape, name: str, owner: str) -> tuple[int, int]:
  shape = check_grid_shape(shape if shape is None else tuple(shape), owner, name)
  if len(shape) != 2:
    raise ValueError(
      f"{owner}: `{name}`={shape} must be a 2-D grid (H, W); this encoding is 2-D relative."
    )
  return shape


def _num_offsets(n: int) -> int:
  return 2 * n - 1


def pair_cells(index: jnp.ndarray, shape: jnp.ndarray, key_minus_query: bool = False):
  """`[B, L, L, 2]`: each token pair's cell in its example's offset table (`index [B, L, 2]`
  cells of a packed batch, `shape [B, 2]` grids): Δ + n - 1 per axis, Δ = query - key (or
  key - query), clipped to the 2L-1 cells of `packed_offset_weights` (padding pairs)."""
  delta = index[:, :, None, :] - index[:, None, :, :]  # [B, L, L, 2], query minus key
  delta = -delta if key_minus_query else delta
  cells = delta + jnp.asarray(shape)[:, None, None, :] - 1
  return jnp.clip(cells, 0, 2 * index.shape[1] - 2)


def packed_offset_weights(module, index: jnp.ndarray, shape: jnp.ndarray) -> list[jnp.ndarray]:
  """Per axis a, `[B, 2L-1, 2 grid_shape[a] - 1]`: how the offset cells 0..2L-2 of `module`'s
  offset table, resampled by its policy to each example's `2 shape[b, a] - 1` offsets, mix the
  training grid's (cells past an example's own are unused)."""
  old = [_num_offsets(n) for n in module.grid_shape]
  cells = jnp.broadcast_to(
    jnp.arange(2 * index.shape[1] - 1)[None, :, None], (1, 2 * index.shape[1] - 1, 2)
  )
  return axis_weights(module, old, 2 * jnp.asarray(shape)[:, None, :] - 1, cells)


class RelativeBias2D(Checked, nn.Module):
  """Learned relative position bias `[heads, N, N]` of a 2-D grid (Swin; 001 Sec. 3).

  `__call__(shape=None)`: the bias for `grid_shape`, or for another `(H', W')` from the
  table resampled to `(2H'-1, 2W'-1)` with `resample_method`; `packed(index, shape)`: each
  example's, for NaFlex-packed batches.
  """

  grid_shape: tuple[int, ...] | None = None
  num_heads: int = 1
  init_std: float = INIT_STD
  resample_method: str = "bicubic_pytorch"  # Swin's F.interpolate (module docstring)
  align_corners: bool = False
  antialias: bool | None = None

  kind: ClassVar[str] = "bias"

  def check(self):
    super().check()
    owner = type(self).__name__
    check_grid_2d(self.grid_shape, "grid_shape", owner)
    check_divisible("num_heads", self.num_heads, 1, "one bias per head", owner)
    check_table_options(self, offsets=True)

  def setup(self):
    sizes = [_num_offsets(n) for n in self.grid_shape]
    init = nn.initializers.normal(self.init_std)
    self.table = self.param("table", init, (math.prod(sizes), self.num_heads))

  def __call__(self, shape: Sequence[int] | None = None) -> jnp.ndarray:
    shape = self.grid_shape if shape is None else check_grid_2d(shape, "shape", type(self).__name__)
    old, new = ([_num_offsets(n) for n in grid] for grid in (self.grid_shape, shape))
    return relative_bias(resample_table(self, self.table, old, new), shape)  # [heads, N, N]

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """The bias `[B, heads, L, L]` of a NaFlex-packed batch (`index [B, L, 2]`: each token's
    cell in its own example's grid; `shape [B, 2]`: the grids): each example's from the table
    resampled to its own grid, as `__call__(shape[b])` gives it. Each example's table is
    resampled over the (2L-1)^2 offsets an L-token grid can have (memory B (2L-1)^2 heads)
    and gathered. Padding tokens get a bias too; the attention mask hides them."""
    length, batch = index.shape[1], index.shape[0]
    wy, wx = packed_offset_weights(self, index, shape)  # [B, 2L-1, 2H-1], [B, 2L-1, 2W-1]
    table = self.table.reshape(wy.shape[-1], wx.shape[-1], self.num_heads)
    tables = jnp.einsum("bri,ijn,bcj->brcn", wy, table, wx)  # [B, 2L-1, 2L-1, heads]
    cells = pair_cells(index, shape)  # [B, L, L, 2], query minus key
    flat = (cells[..., 0] * (2 * length - 1) + cells[..., 1]).reshape(batch, -1, 1)
    bias = jnp.take_along_axis(tables.reshape(batch, -1, self.num_heads), flat, axis=1)
    return jnp.moveaxis(bias.reshape(batch, length, length, -1), -1, 1)

  def resize_params(self, params: dict, source_grid: Sequence[int]) -> dict:
    """This module's params from those of one trained at `source_grid` (`init_from`): the
    `(2H-1, 2W-1)` offset table resampled to this `grid_shape`'s, as `__call__` would."""
    old, new = ([_num_offsets(n) for n in grid] for grid in (source_grid, self.grid_shape))
    return {"table": resample_table(self, params["table"], old, new)}


class RelativeAttention2D(Checked, nn.Module):
  """2-D relative attention logits `[B, heads, N, N]` (Ramachandran et al.; 003 Eq. 2).

  Learned offset embeddings `row` `[2H-1, d/2]` and `col` `[2W-1, d/2]` shared by all
  heads, or `[2H-1, heads, d/2]` with `per_head=True` (then `num_heads` is required).
  Init N(0, 1/head_dim) (as timm's relative-logit embeddings), so for unit-variance q,
  `q · r` starts with unit variance, the scale of `q · k / √d`; `init_scale` multiplies that
  std (the scale knob a sweep tunes, `Registration.knob`). Returns `q · r` unscaled,
  exactly Eq. 2: pass the q that the attention module dots with k (already scaled by 1/√d
  or not) so both terms share the scaling.
  `__call__(q, shape=None)`; another `shape` resamples both tables (`resample_method`);
  `packed(q, index, shape)`: each example's, for NaFlex-packed batches.
  """

  grid_shape: tuple[int, ...] | None = None
  head_dim: int | None = None
  num_heads: int | None = None
  per_head: bool = False
  init_scale: float = 1.0
  resample_method: str = "bicubic"
  align_corners: bool = False
  antialias: bool | None = None

  kind: ClassVar[str] = "logits"

  def check(self):
    super().check()
    owner = type(self).__name__
    check_grid_2d(self.grid_shape, "grid_shape", owner)
    check_divisible("head_dim", self.head_dim, 2, "r = row ‖ col halves", owner)
    check_positive("init_scale", self.init_scale, owner)
    if self.per_head:
      check_divisible("num_heads", self.num_heads, 1, "per_head=True needs it", owner)
    check_resample_options(
      self.resample_method, self.align_corners, self.antialias, owner, offsets=True
    )

  def setup(self):
    heads = (self.num_heads,) if self.per_head else ()
    init = nn.initializers.normal(self.init_scale * self.head_dim**-0.5)
    h, w = (_num_offsets(n) for n in self.grid_shape)
    self.row = self.param("row", init, (h, *heads, self.head_dim // 2))
    self.col = self.param("col", init, (w, *heads, self.head_dim // 2))

  def __call__(self, q: jnp.ndarray, shape: Sequence[int] | None = None) -> jnp.ndarray:
    owner = type(self).__name__
    shape = self.grid_shape if shape is None else check_grid_2d(shape, "shape", owner)
    self._check_q(q, math.prod(shape), f"N = prod(shape={shape}) = {math.prod(shape)}")
    tables = []
    for t, old, new in zip((self.row, self.col), self.grid_shape, shape, strict=True):
      t = resample_table(self, t, (_num_offsets(old),), (_num_offsets(new),))
      tables.append(self._per_head(t, q.shape[2]))  # [2n-1, heads, d/2]
    return relative_logits(q, *tables, shape)

  def packed(self, q: jnp.ndarray, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """The logits `[B, heads, L, L]` of a NaFlex-packed batch (`q [B, L, heads, head_dim]`,
    `index [B, L, 2]` each token's cell in its own example's grid, `shape [B, 2]` the grids):
    each example's from the row and column tables resampled to its own grid, as
    `__call__(q[b], shape[b])` gives them. Padding tokens get logits too; the attention mask
    hides them."""
    self._check_q(q, index.shape[1], f"L = {index.shape[1]}, the length of `index`")
    half = self.head_dim // 2
    cells = pair_cells(index, shape, key_minus_query=True)  # [B, L, L, 2]
    logits = 0.0
    weights = packed_offset_weights(self, index, shape)  # per axis [B, 2L-1, 2n-1]
    for a, (w, t) in enumerate(zip(weights, (self.row, self.col), strict=True)):
      t = jnp.einsum("bri,i...->br...", w, self._per_head(t, q.shape[2]))  # [B, 2L-1, heads, d/2]
      q_t = jnp.einsum("blhd,brhd->bhlr", q[..., a * half : (a + 1) * half], t)  # [B, h, L, 2L-1]
      logits = logits + jnp.take_along_axis(q_t, cells[:, None, ..., a], axis=-1)
    return logits

  def _per_head(self, table: jnp.ndarray, heads: int) -> jnp.ndarray:
    """`[2n-1, heads, d/2]`: a table shared by all heads broadcast to `heads`."""
    table = table if self.per_head else table[:, None, :]
    return jnp.broadcast_to(table, (table.shape[0], heads, table.shape[-1]))

  def _check_q(self, q: jnp.ndarray, tokens: int, what: str) -> None:
    owner = type(self).__name__
    if q.ndim != 4 or q.shape[1] != tokens or q.shape[-1] != self.head_dim:
      raise ValueError(
        f"{owner}: `q` must be [B, N, heads, head_dim] with {what} and head_dim = "
        f"{self.head_dim}, got {tuple(q.shape)}; pass the grid tokens only (no class token)."
      )
    if self.per_head and q.shape[2] != self.num_heads:
      raise ValueError(f"{owner}: `q` has {q.shape[2]} heads but num_heads={self.num_heads}.")

  def resize_params(self, params: dict, source_grid: Sequence[int]) -> dict:
    """This module's params from those of one trained at `source_grid` (`init_from`): the
    row and column offset tables resampled to this `grid_shape`, as `__call__` would."""
    return {
      name: resample_table(self, params[name], (_num_offsets(old),), (_num_offsets(new),))
      for name, old, new in zip(("row", "col"), source_grid, self.grid_shape, strict=True)
    }


ENCODINGS = (
  Registration(
    "rel_bias_2d",
    RelativeBias2D,
    resolution_free=False,
    labels=("Relative bias (2-D)",),
    knob=("init_std", INIT_STD),
  ),
  Registration(
    "rel_attn_2d",
    RelativeAttention2D,
    resolution_free=False,
    labels=("Relative attention (2-D)",),
    knob=("init_scale", 1.0),
  ),
)
