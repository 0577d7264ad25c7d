"""Axial and mixed RoPE on N-D grids, e.g. video (T, H, W): Heo et al.'s layouts in N-D.

`rope_axial_nd` (`ndim=3` for video) rotates `head_dim / (2·ndim)` channel pairs with
each axis, at magnitudes 1 / theta^(2·ndim·k / head_dim) (k < head_dim / (2·ndim)); the last
axis takes the first block of pairs, as Heo's 2-D layout puts x before y, so `ndim=2` is
`rope_axial` exactly. Then q'·k' depends on the N-D offset only. `grid_coords(shape)` gives
index coordinates of a row-major grid (frame, row, column for video); a new grid
extrapolates, as `rope_axial` does by default.

`rope_mixed_nd` learns the frequencies, `freqs [ndim, heads, head_dim/2]`, as RoPE-Mixed
does in 2-D. Its init is lfpe's generalisation of Heo's (not in the paper): per head, a
random orthonormal basis of the ndim axes (Haar-distributed: QR of a Gaussian matrix, signs
fixed by R's diagonal); pair block b rotates along basis vector b at the axial magnitudes
above. In 2-D Heo draws one angle a per head and uses the directions a and a + π/2, a basis
of the same distribution up to a reflection. The score depends on the N-D offset only, for
any learned frequencies (RoPE is linear in the coordinates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.checked import Checked
from lfpe.encodings import coords as coords_lib
from lfpe.encodings.base import Registration, check_divisible, check_last_dim, check_positive
from lfpe.encodings.rotary import rope


def nd_magnitudes(head_dim: int, ndim: int, theta: float) -> jnp.ndarray:
  """One block's magnitudes 1 / theta^(2·ndim·k / head_dim), k < head_dim / (2·ndim)."""
  pairs = head_dim // (2 * ndim)
  return 1.0 / theta ** (jnp.arange(pairs, dtype=jnp.float32) * 2 * ndim / head_dim)


def axial_nd_freqs(head_dim: int, ndim: int, theta: float) -> jnp.ndarray:
  """`[ndim, 1, head_dim/2]`: axis a's magnitudes on pair block ndim − 1 − a, zeros elsewhere."""
  mag = nd_magnitudes(head_dim, ndim, theta)
  rows = []
  for axis in range(ndim):
    blocks = [jnp.zeros_like(mag)] * ndim
    blocks[ndim - 1 - axis] = mag
    rows.append(jnp.concatenate(blocks))
  return jnp.stack(rows)[:, None]


class RotaryAxialND(Checked, nn.Module):
  """N-D axial RoPE: `__call__(x [B, N, heads, head_dim], coords [N, ndim]) -> same shape`."""

  head_dim: int | None = None
  ndim: int = 2  # 3 for video (T, H, W); 2 is `rope_axial`, what a 2-D model's grid takes
  theta: float = 100.0

  kind: ClassVar[str] = "rotary"

  def check(self):
    super().check()
    owner = type(self).__name__
    check_divisible("ndim", self.ndim, 1, "the number of grid axes", owner)
    check_divisible("head_dim", self.head_dim, 2 * self.ndim, "pairs split over the axes", owner)
    check_positive("theta", self.theta, owner)

  def grid_coords(self, shape: Sequence[int]) -> jnp.ndarray:
    """Index coordinates of a row-major grid of `shape` (ndim axes), `[prod(shape), ndim]`."""
    if len(shape) != self.ndim:
      raise ValueError(
        f"{type(self).__name__}: shape {tuple(shape)} has not ndim={self.ndim} axes."
      )
    return coords_lib.grid(tuple(shape), "index")

  def packed_coords(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """Index coordinates of per-example grids' cells (packed batches): `index` itself."""
    del shape  # index coordinates do not depend on the grid
    return jnp.asarray(index, jnp.float32)

  def __call__(
    self, x: jnp.ndarray, coords: jnp.ndarray, shape: Sequence[int] | None = None
  ) -> jnp.ndarray:
    del shape  # extrapolates: no policy reads the grid's length
    check_last_dim("coords", coords, self.ndim, type(self).__name__)
    return rope(x, coords, axial_nd_freqs(self.head_dim, self.ndim, self.theta))


def mixed_nd_freqs_init(theta: float):
  """The init of `freqs [ndim, heads, head_dim/2]`: per head a Haar-random orthonormal basis,
  pair block b along basis vector b at `nd_magnitudes` (module docstring)."""

  def init(key, shape, dtype=jnp.float32):
    ndim, heads, half = shape
    gauss = jax.random.normal(key, (heads, ndim, ndim), jnp.float32)
    q, r = jnp.linalg.qr(gauss)
    basis = q * jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))[:, None, :]  # [h, axis, block]
    mag = nd_magnitudes(2 * half, ndim, theta)  # [pairs]
    freqs = basis[..., None] * mag  # [heads, axis, block, pairs]
    return jnp.transpose(freqs.reshape(heads, ndim, half), (1, 0, 2)).astype(dtype)

  return init


class RotaryMixedND(RotaryAxialND):
  """N-D mixed RoPE: learned `freqs [ndim, heads, head_dim/2]` (module docstring);
  `__call__(x [B, N, heads, head_dim], coords [N, ndim]) -> same shape`."""

  num_heads: int | None = None
  theta: float = 10.0  # Heo's RoPE-Mixed default

  def check(self):
    super().check()
    owner = type(self).__name__
    check_divisible("num_heads", self.num_heads, 1, "frequencies are learned per head", owner)

  @nn.compact
  def __call__(
    self, x: jnp.ndarray, coords: jnp.ndarray, shape: Sequence[int] | None = None
  ) -> jnp.ndarray:
    del shape  # extrapolates
    check_last_dim("coords", coords, self.ndim, type(self).__name__)
    init = mixed_nd_freqs_init(self.theta)
    freqs = self.param("freqs", init, (self.ndim, self.num_heads, self.head_dim // 2))
    return rope(x, coords, freqs)


ENCODINGS = (
  Registration("rope_axial_nd", RotaryAxialND, labels=("RoPE-Axial (N-D)",), knob=("theta", 100.0)),
  Registration("rope_mixed_nd", RotaryMixedND, labels=("RoPE-Mixed (N-D)",), knob=("theta", 10.0)),
)
