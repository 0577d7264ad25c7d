"""What every encoding module shares: its kind, grid evaluation, argument checks.

Kinds tell a model where an encoding enters attention:
* `absolute`: `__call__(coords [..., M]) -> [..., D]`, added to (or concatenated
  with) tokens; `grid(shape) -> [prod(shape), D]` evaluates it once per grid.
* `bias`: `__call__(shape) -> [heads, N, N]`, added to the attention logits.
* `logits`: `__call__(q [B, N, heads, d], shape) -> [B, heads, N, N]`, added to
  the attention logits (2-D relative attention).
* `rotary`: `__call__(x [B, N, heads, d], coords [N, M]) -> [B, N, heads, d]`,
  applied to q and k.
* `none`: contributes nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import jax
import jax.numpy as jnp

from lfpe.checked import Checked
from lfpe.encodings import coords as coords_lib

KINDS = ("absolute", "bias", "logits", "rotary", "none")


@dataclasses.dataclass(frozen=True)
class Registration:
  """One encoding name, declared once in its own module's `ENCODINGS` tuple.

  The registry, `lfpe.encodings.__all__`, `lfpe.nnx`, the models' checks, the README's table
  and the tests all read these (lfpe/encodings/registry.py finds them).

  name: the spec name. factory: the linen class, or a `functools.partial` of it fixing some
  options (`gabor` is `GaborEdge(use_gabor=True, use_edge=False)`). aliases: other names.
  reads_boxes: it can encode a 4-D box (top, left, bottom, right; `coords.boxes`) as the
  layout captioner needs: an M-D encoding, not a 1-D raster code nor a 2-D-only one.
  resolution_free: it evaluates at any coordinates; False for learned tables, which are
  resampled to a new grid. labels: the display name of the name, then of each alias, as
  papers and lfpe's reports write them
  (`registry.display_name`; the one name map of every table and figure; default: the names).
  knob: `(option, default)`, the encoding's one scale knob that a sweep tunes (Fourier's γ,
  MLP's input scale, a sinusoid's temperature, a table's init std, RoPE's θ), the same budget
  for every encoding (experiments/sweeps.py); `()` where the encoding has none.
  """

  name: str
  factory: Callable
  aliases: tuple[str, ...] = ()
  reads_boxes: bool = False
  resolution_free: bool = True
  labels: tuple[str, ...] = ()
  knob: tuple[str, float] | tuple[()] = ()

  @property
  def module_class(self) -> type:
    return getattr(self.factory, "func", self.factory)

  @property
  def kind(self) -> str:
    return self.module_class.kind


class AbsoluteEncoding(Checked):
  """Mixin for absolute encodings (flax.linen modules that map coordinates).

  Subclasses set `coords_mode` (a field or class attribute: `index`, `unit`,
  `centered`) and, for 1-D encodings of a raster-flattened grid, `flatten=True`.
  """

  kind: ClassVar[str] = "absolute"
  flatten: ClassVar[bool] = False

  def check(self) -> None:
    """A `coords_mode` field names a coordinate mode (a user's own encoding gets the check
    too: README's "How to extend"); a mode the class fixes (DETR's 'detr') is its own."""
    if "coords_mode" in {f.name for f in dataclasses.fields(self) if f.init}:
      check_mode(self.coords_mode, type(self).__name__)
    super().check()

  def grid_coords(self, shape: Sequence[int]) -> jnp.ndarray:
    """The coordinates this encoding reads for a grid of `shape`."""
    if self.flatten:  # the raster index of every cell, in `coords_mode`
      return coords_lib.grid((math.prod(shape),), self.coords_mode)
    return coords_lib.grid(shape, self.coords_mode)

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """The encoding of every cell of a row-major grid, `[prod(shape), D]`."""
    return self(self.grid_coords(shape))

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """Per-example grids (NaFlex-style packed batches): `index [B, L, M]` each token's cell,
    `shape [B, M]` its example's grid, both traced (one compile serves every mix of sizes)
    -> `[B, L, D]`, what `grid(shape[b])` gives at those cells."""
    cls, base = type(self), AbsoluteEncoding
    if (cls.grid is not base.grid and cls.packed is base.packed) or (
      cls.grid_coords is not base.grid_coords and cls.packed_coords is base.packed_coords
    ):
      raise ValueError(
        f"{cls.__name__}: its grid has its own rule, with no per-example version, so it "
        "cannot encode packed batches; use a coordinate-based encoding (fourier, sine_2d, "
        "...) or a learned table (embed_1d, embed_2d)."
      )
    return self(self.packed_coords(index, shape))

  def packed_coords(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """The coordinates `grid_coords(shape[b])` gives at the cells `index` (see `packed`)."""
    shape = jnp.asarray(shape)[:, None, :]  # [B, 1, M]
    if self.flatten:  # the raster index in the example's own grid
      flat = index[..., 0]
      for axis in range(1, index.shape[-1]):
        flat = flat * shape[..., axis] + index[..., axis]
      cells = jnp.prod(shape, axis=-1, keepdims=True)  # [B, 1, 1]
      return coords_lib.values(flat[..., None], cells, self.coords_mode)
    return coords_lib.values(index, shape, self.coords_mode)


def uniform_init(low: float, high: float):
  """A Flax initializer drawing uniformly from [low, high] (flax's `uniform` starts at 0)."""

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, low, high)

  return init


def check_positive(name: str, value, owner: str) -> None:
  if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
    raise ValueError(f"{owner}: `{name}` must be a positive number, got {value!r}.")


def check_mode(mode: str, owner: str) -> None:
  if mode not in coords_lib.MODES:
    raise ValueError(
      f"{owner}: `coords_mode`={mode!r} is not a coordinate mode; use one of {coords_lib.MODES}."
    )


def check_divisible(name: str, value: int, divisor: int, why: str, owner: str) -> None:
  """ValueError unless `value` is a positive int multiple of `divisor` (not a bool, a float
  or a string); the message suggests the multiple nearest to the number it names."""
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or value % divisor:
    raise ValueError(
      f"{owner}: `{name}`={value!r} must be a positive int, a multiple of {divisor} ({why}); "
      f"use e.g. {name}={_nearest_multiple(value, divisor)}."
    )


def _nearest_multiple(value, divisor: int) -> int:
  """The positive multiple of `divisor` nearest to the number `value` names ('64', 64.0)."""
  try:
    number = float(value) if not isinstance(value, bool) else 0.0
  except (TypeError, ValueError):
    number = 0.0
  return max(divisor, round(number / divisor) * divisor) if number > 0 else divisor


def check_last_dim(name: str, x: jnp.ndarray, expected: int, owner: str) -> None:
  if x.shape[-1] != expected:
    raise ValueError(
      f"{owner}: `{name}` must have last dimension {expected} (the number of coordinate "
      f"axes M), got shape {tuple(x.shape)}; pass coordinates as [..., {expected}] "
      f"or change the encoding's ndim."
    )
