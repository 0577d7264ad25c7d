"""The intuitive encodings of 001 Sec. 2.1: `index`, `unit` ([0, 1]) and `binary`.

All three read the 1-D token position p (a grid is raster-flattened, `flatten=True`)
and return `[..., D]`, D channels because the encoding is added to D-channel token
embeddings (001 Sec. 2.1.3). How the scalar p becomes D channels:

* `index` (2.1.1): the token index p = 0, 1, ..., N - 1, the same value in all D channels.
  Unbounded, the blog's point against it.
* `unit` (2.1.2): p / (N - 1) in [0, 1] (first token 0, last 1: N = 3 gives 0, 0.5, 1),
  in all D channels. The same position gets a different value in a sequence of another
  length, the blog's point against it. `grid(shape)` makes these from N = prod(shape).
* `binary` (2.1.3): the D-bit binary code of the integer index, most significant bit
  first (channel j holds bit D - 1 - j, so p = 5, D = 3 gives [1, 0, 1]; channel j has
  period 2^(D - j)). Positions are rounded to integers, must be non-negative, and only
  their low D bits are kept (p ≥ 2^D wraps around).
"""

from __future__ import annotations

import functools
from typing import ClassVar

import flax.linen as nn
import jax.numpy as jnp

from lfpe.encodings.base import AbsoluteEncoding, Registration, check_divisible, check_last_dim

CODES = ("index", "unit", "binary")


def binary_code(pos: jnp.ndarray, dim: int) -> jnp.ndarray:
  """The `dim`-bit binary code of integer positions `pos [...]`, MSB first, `[..., dim]`."""
  p = jnp.round(jnp.asarray(pos)).astype(jnp.int32)
  shift = jnp.minimum(jnp.arange(dim - 1, -1, -1), 31)  # bits above 31 are 0 for int32 p >= 0
  return ((p[..., None] >> shift) & 1).astype(jnp.float32)


class Intuitive(AbsoluteEncoding, nn.Module):
  """`index`, `unit` and `binary` (001 Sec. 2.1): `__call__(coords [..., 1]) -> [..., D]`.

  `coords` are token indices for `index` and `binary`, and positions in [0, 1] for `unit`;
  `coords_mode` follows from `code` ('unit' for `unit`, else 'index') and is therefore not
  a separate field: the blog defines each code on exactly these positions.
  """

  dim: int
  code: str = "index"
  flatten: ClassVar[bool] = True

  def check(self):
    owner = type(self).__name__
    if self.code not in CODES:
      raise ValueError(
        f"{owner}: `code`={self.code!r} is not an intuitive encoding; use one of {CODES}."
      )
    check_divisible("dim", self.dim, 1, "the number of output channels", owner)
    super().check()

  @property
  def coords_mode(self) -> str:
    return "unit" if self.code == "unit" else "index"

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 1, type(self).__name__)
    pos = jnp.asarray(coords, jnp.float32)[..., 0]  # [...]
    if self.code == "binary":
      return binary_code(pos, self.dim)
    return jnp.broadcast_to(pos[..., None], (*pos.shape, self.dim))


ENCODINGS = tuple(
  Registration(code, functools.partial(Intuitive, code=code), labels=(label,))
  for code, label in (("index", "Index"), ("unit", "Unit"), ("binary", "Binary"))
)
