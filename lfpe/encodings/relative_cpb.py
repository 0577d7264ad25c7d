"""SwinV2's log-spaced continuous relative position bias (Liu et al. 2022, Sec. 3.3).

`rel_cpb_2d` (kind `bias`): instead of a learned table indexed by the offset, a small MLP
maps each relative offset (Δy, Δx) to one bias per head, so the bias exists at any grid:

  Δ̂ = Δ / (L − 1) · s           per axis, L the training grid's length (SwinV2's
                                  `pretrained_window_size`), so the training offsets span [−s, s]
  Δ̃ = sign(Δ̂) · log2(1 + |Δ̂|) / log2(8)                      (log-spaced coordinates)
  B = 16 · sigmoid(MLP(Δ̃))       MLP: Linear(2, 512) → ReLU → Linear(512, heads, no bias)

and `B[heads, N, N]` is gathered with Swin's relative index, as `rel_bias_2d` gathers its
table. At a larger grid the offsets run past ±s on the same log scale (SwinV2's transfer
across window sizes); an offset seen in training keeps its bias exactly.

`span` s is 8 in SwinV2 (its code writes 8 for both the scale and the log's divisor); here
it is the encoding's scale knob (`Registration.knob`), the distance scaling a sweep tunes: a
larger s compresses far offsets more against near ones. The divisor stays log2(8), a constant
the first layer could absorb, so any s > 0 is valid and s = 8 is SwinV2 exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe.checked import Checked
from lfpe.encodings.base import Registration, check_divisible, check_positive
from lfpe.encodings.relative import check_grid_2d, relative_bias

SPAN = 8.0  # SwinV2: offsets of the training grid normalised to [-8, 8] (`span`'s default)
SCALE = 16.0  # SwinV2: 16 · sigmoid


def log_spaced_offsets(
  shape: Sequence[int], train_shape: Sequence[int], span: float = SPAN
) -> np.ndarray:
  """Δ̃ of every offset of a `shape` grid, `[(2H−1)(2W−1), 2]` in Swin's table order."""
  axes = [np.arange(-(n - 1), n, dtype=np.float64) / max(t - 1, 1) * span
          for n, t in zip(shape, train_shape, strict=True)]  # fmt: skip
  grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
  return (np.sign(grid) * np.log2(1.0 + np.abs(grid)) / np.log2(SPAN)).astype(np.float32)


class RelativeCPB2D(Checked, nn.Module):
  """SwinV2's continuous relative position bias `[heads, N, N]` (module docstring).

  `__call__(shape=None)`: the bias for `grid_shape`, or for another `(H', W')` from the same
  MLP (offsets normalised by `grid_shape`, the training grid); `packed(index)`: per example,
  for NaFlex-packed batches.
  """

  grid_shape: tuple[int, ...] | None = None
  num_heads: int = 1
  hidden_dim: int = 512
  span: float = SPAN

  kind: ClassVar[str] = "bias"

  def check(self):
    super().check()
    owner = type(self).__name__
    check_grid_2d(self.grid_shape, "grid_shape", owner)
    check_divisible("num_heads", self.num_heads, 1, "one bias per head", owner)
    check_divisible("hidden_dim", self.hidden_dim, 1, "the MLP's width", owner)
    check_positive("span", self.span, owner)

  def setup(self):
    # SwinV2's `_init_weights` for every Linear, its CPB MLP's included: trunc_normal_(std=.02)
    # (bounds ±2 absolute, i.e. a normal at this std) and zero biases, so the bias starts near
    # 16·sigmoid(0) = 8 at every offset (flax's default lecun-normal started it at 3-12)
    init = nn.initializers.normal(0.02)
    self.hidden = nn.Dense(self.hidden_dim, kernel_init=init)
    self.out = nn.Dense(self.num_heads, use_bias=False, kernel_init=init)

  def __call__(self, shape: Sequence[int] | None = None) -> jnp.ndarray:
    shape = self.grid_shape if shape is None else check_grid_2d(shape, "shape", type(self).__name__)
    return relative_bias(self._table(shape), shape)

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray | None = None) -> jnp.ndarray:
    """The bias `[B, heads, L, L]` of a NaFlex-packed batch (`index [B, L, 2]`: each token's
    cell in its own example's grid; `shape`, the grids, is not needed): the MLP read at every
    offset between two tokens of an example, so each example gets the bias its own grid
    would. Offsets within an example are below L along each axis, so the MLP runs once over
    the (2L-1)^2 offsets of an L x L grid (memory (2L-1)^2 x hidden_dim) and is gathered.
    Padding tokens get a bias too; the attention mask hides them."""
    length = index.shape[1]
    table = self._table((length, length))  # [(2L-1)^2, heads]
    delta = index[:, :, None, :] - index[:, None, :, :] + (length - 1)  # [B, L, L, 2]
    bias = table[delta[..., 0] * (2 * length - 1) + delta[..., 1]]  # [B, L, L, heads]
    return jnp.moveaxis(bias, -1, 1)

  def _table(self, shape: Sequence[int]) -> jnp.ndarray:
    """16 sigmoid(MLP) at every offset of a `shape` grid, `[(2H-1)(2W-1), heads]`."""
    coords = jnp.asarray(log_spaced_offsets(shape, self.grid_shape, self.span))
    return SCALE * jax.nn.sigmoid(self.out(jax.nn.relu(self.hidden(coords))))


ENCODINGS = (
  Registration(
    "rel_cpb_2d", RelativeCPB2D, labels=("Log-spaced CPB (SwinV2)",), knob=("span", SPAN)
  ),
)
