"""Sinusoidal encodings: Vaswani 1-D, per-axis N-D, DETR's padded sine, learnable sine.

* `sine_1d` (002 Eq. 1; 001 Sec. 4.1.2's code): PE(p, 2i) = sin(p / T^(2i/D)),
  PE(p, 2i+1) = cos(p / T^(2i/D)), T = 10000, on the raster-flattened index. 001 Sec. 2.2
  writes w_i = 1/10000^(i/D), but its own code and 002 use 2i/D, as lfpe does;
  `temperature=100` gives Sec. 2.2's equation as written.
* `sine_nd` (003 Eq. 1; 002 Sec. 4 Sine-2D / Sine-4D): `sine_1d` with D/M channels on
  each of the M coordinate axes, blocks concatenated in coordinate order. With lfpe's
  row-major coordinates (row, col) the row block comes first; 003 Eq. 1 writes its
  horizontal x first, so pass `coords[..., ::-1]` to get its exact channel order.
* `detr_sine` (001 Sec. 4.2): `sine_nd` on `coords.detr(mask)`, y block then x block.
* `learnable_sine` (003 Sec. 5.2, Eq. 6): a trainable linear map W [D/2, M] initialised
  to the sinusoidal frequencies; equals `sine_nd` at init.

Layouts: the papers (and Vaswani, DETR) interleave sin/cos per frequency
(`layout='interleave'`, the default); MAE / big_vision put all sines of an axis block
before its cosines (`layout='concat'`), and also encode x before y.

Other codebases' 2-D tables, exactly (tests/encodings/test_layout_conventions.py), with
`xy = coords.grid((h, w))[:, ::-1]` (x first), K = D // 4 and T their temperature:
* MAE `get_2d_sincos_pos_embed(D, h)` (h = w): `sincos_nd(xy, D, layout="concat")`;
  `cls_token=True` prepends a zero row.
* big_vision `posemb_sincos_2d(h, w, D, T)[0]`, exponents i/(K - 1) instead of i/K:
  `sincos_nd(xy, D, temperature=T ** (K / (K - 1)), layout="concat")`.
* DETR `PositionEmbeddingSine(D // 2, T, normalize, scale)` of a padding mask, channels last:
  `sincos_nd(coords.detr(mask, normalize, scale), D, T)`, i.e.
  `DetrSine(dim=D, temperature=T, normalize=normalize)` for scale 2π (its default).
`SineND` with the same options applied to `xy` equals `sincos_nd`; its `grid(shape)` (what
models use) reads y-first coordinates, so it gives MAE's / big_vision's halves swapped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

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
  resample,
)

LAYOUTS = ("interleave", "concat")


def check_layout(layout: str, owner: str) -> None:
  """Raise a ValueError naming `layout` unless it is one of LAYOUTS."""
  if layout not in LAYOUTS:
    raise ValueError(
      f"{owner}: `layout`={layout!r} is not a sin/cos layout; use one of "
      f"{LAYOUTS} ('interleave' = Vaswani/DETR/the papers, 'concat' = MAE)."
    )


def frequencies(channels: int, temperature: float = 10000.0) -> np.ndarray:
  """The `channels // 2` angular frequencies T^(-2i/channels), float32 `[channels // 2]`."""
  i = np.arange(channels // 2, dtype=np.float64)
  return (temperature ** (-2.0 * i / channels)).astype(np.float32)


def sincos(angles: jnp.ndarray, layout: str = "interleave") -> jnp.ndarray:
  """Sines and cosines of `angles [..., M, K]` per axis block, `[..., M * 2K]`.

  interleave: block m is [sin a_m0, cos a_m0, sin a_m1, ...]; concat: [sin a_m ‖ cos a_m].
  """
  check_layout(layout, "sincos")
  join = jnp.stack if layout == "interleave" else jnp.concatenate
  out = join([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., M, K, 2] or [..., M, 2K]
  return out.reshape(*angles.shape[:-2], -1)


def sincos_nd(
  coords: jnp.ndarray, dim: int, temperature: float = 10000.0, layout: str = "interleave"
) -> jnp.ndarray:
  """Per-axis sinusoids of `coords [..., M]`: M blocks of D/M channels, `[..., D]`.

  Block m is `sincos_1d(coords[..., m], D // M)`, in coordinate order (003 Eq. 1).
  """
  coords = jnp.asarray(coords, jnp.float32)
  m = coords.shape[-1]
  check_divisible(
    "dim", dim, 2 * m, f"a sin and a cos per frequency on each of {m} axes", "sincos_nd"
  )
  check_positive("temperature", temperature, "sincos_nd")
  freqs = jnp.asarray(frequencies(dim // m, temperature))  # [K]
  return sincos(coords[..., None] * freqs, layout)  # [..., M, K] -> [..., D]


def sincos_1d(
  pos: jnp.ndarray, dim: int, temperature: float = 10000.0, layout: str = "interleave"
) -> jnp.ndarray:
  """Vaswani's encoding of scalar positions `pos [...]`, `[..., D]` (002 Eq. 1).

  PE(p, 2i) = sin(p / T^(2i/D)), PE(p, 2i+1) = cos(p / T^(2i/D)) with `layout='interleave'`;
  `layout='concat'` gives [sin(p ω) ‖ cos(p ω)] (MAE's `get_1d_sincos_pos_embed`).
  """
  check_divisible("dim", dim, 2, "a sin and a cos per frequency", "sincos_1d")
  return sincos_nd(jnp.asarray(pos, jnp.float32)[..., None], dim, temperature, layout)


def _check_sine(module, axes: int) -> None:
  owner = type(module).__name__
  check_divisible(
    "dim",
    module.dim,
    2 * axes,
    f"a sin and a cos per frequency on each of {axes} coordinate axes",
    owner,
  )
  check_positive("temperature", module.temperature, owner)
  check_layout(module.layout, owner)


class _Sine(AbsoluteEncoding):
  """Config checks shared by the sinusoidal modules that read `coords_mode` grids."""

  def check(self):
    axes = getattr(self, "ndim", 1)
    check_divisible("ndim", axes, 1, "the number of coordinate axes", type(self).__name__)
    _check_sine(self, axes)
    super().check()


class Sine1D(_Sine, nn.Module):
  """`sine_1d`: Vaswani's encoding of the raster-flattened index (002 Sec. 4.1 Sine-1D).

  `__call__(coords [..., 1]) -> [..., D]`; `coords_mode='index'`: integer token positions
  as in Vaswani (002 Eq. 1, 001 Sec. 2.2).

  At another grid the flattened index changes meaning (a new row starts at another index):
  by default `grid(shape)` encodes the new grid's own raster indices (extrapolation, the
  failure reported for MAE-style fixed 1-D tables); with `resample_method` ('bilinear',
  'bicubic', 'bicubic_pytorch') it resamples the training grid's table as a 2-D image
  instead, as MAE's `interpolate_pos_embed` does for its fixed tables (`grid_shape`: the
  training grid, which models pass).
  """

  dim: int
  temperature: float = 10000.0
  layout: str = "interleave"
  coords_mode: str = "index"
  grid_shape: tuple[int, ...] | None = None
  resample_method: str | None = None
  align_corners: bool = False
  antialias: bool | None = None
  flatten: ClassVar[bool] = True

  def check(self):
    super().check()
    if self.resample_method is not None:
      owner = type(self).__name__
      if self.grid_shape is None:
        raise ValueError(f"{owner}: resample_method needs grid_shape (the training grid).")
      check_grid_shape(self.grid_shape, owner)
      check_resample_options(self.resample_method, self.align_corners, self.antialias, owner)

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 1, type(self).__name__)
    return sincos_1d(coords[..., 0], self.dim, self.temperature, self.layout)

  def packed(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """Per-example grids (`AbsoluteEncoding.packed`): their own raster indices, or with
    `resample_method` the training grid's table resampled to each example's grid."""
    if self.resample_method is None:
      return super().packed(index, shape)
    return packed_table(self, self(self.grid_coords(self.grid_shape)), index, shape)

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """`[prod(shape), D]`: the new grid's raster indices, or with `resample_method` the
    training grid's table resampled to `shape`."""
    shape = tuple(shape)
    if self.resample_method is None or shape == tuple(self.grid_shape):
      return self(self.grid_coords(shape))
    table = self(self.grid_coords(self.grid_shape))
    return resample(
      table,
      self.grid_shape,
      shape,
      self.resample_method,
      align_corners=self.align_corners,
      antialias=self.antialias,
    )


class SineND(_Sine, nn.Module):
  """`sine_nd` / `sine_2d` / `sine_4d`: Eq. 1 on each of `ndim` axes, blocks concatenated.

  `__call__(coords [..., ndim]) -> [..., D]`. `coords_mode='index'`: 003 Eq. 1 and the
  Sine-2D baseline of 002 Sec. 4.1 use integer positions (DETR's normalised variant is
  `detr_sine`). Sine-4D (002 Sec. 4.4) is `ndim=4` on (top, left, bottom, right).
  """

  dim: int
  ndim: int = 2
  temperature: float = 10000.0
  layout: str = "interleave"
  coords_mode: str = "index"

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, self.ndim, type(self).__name__)
    return sincos_nd(coords, self.dim, self.temperature, self.layout)


class DetrSine(AbsoluteEncoding, nn.Module):
  """`detr_sine`: DETR's PositionEmbeddingSine (001 Sec. 4.2), per example.

  Positions come from `coords.detr(mask)`: the 1-based cumulative count of valid pixels,
  divided by the last valid value and scaled to (0, 2π] (`normalize=False`: the raw counts,
  002 Sec. 4.2's "disable position normalization"). Channels: y block then x block of D/2
  each, sin/cos interleaved, frequencies T^(-2i/(D/2)), as in DETR.
  `__call__(coords [B, H, W, 2]) -> [B, H, W, D]`; `from_mask(mask [B, H, W])` does both
  steps; `grid(shape)` is the unpadded image. The coordinates are always DETR's, so
  `coords_mode` is fixed to 'detr' (not one of coords.MODES).

  `frequency_scale` (lfpe's, not DETR's; default 1, DETR exactly) multiplies every frequency,
  in both modes: the sweep knob, the counterpart of Fourier's 1/γ. The temperature moves
  only the low frequencies (the highest stays 1 radian per unit), which barely vary over a
  feature map of a few cells, and DETR's `scale` (2π) acts only with `normalize`.
  """

  dim: int
  temperature: float = 10000.0
  normalize: bool = True
  layout: str = "interleave"
  frequency_scale: float = 1.0
  coords_mode: ClassVar[str] = "detr"

  def check(self):
    _check_sine(self, 2)
    check_positive("frequency_scale", self.frequency_scale, type(self).__name__)
    super().check()

  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 2, type(self).__name__)
    coords = jnp.asarray(coords, jnp.float32) * self.frequency_scale
    return sincos_nd(coords, self.dim, self.temperature, self.layout)

  def from_mask(self, mask: jnp.ndarray) -> jnp.ndarray:
    """The encoding of a padding mask `[B, H, W]` (True = padding), `[B, H, W, D]`."""
    return self(coords_lib.detr(mask, normalize=self.normalize))

  def grid_coords(self, shape: Sequence[int]) -> jnp.ndarray:
    """DETR positions of an unpadded `shape` image, `[prod(shape), 2]`."""
    mask = jnp.zeros((1, *shape), jnp.bool_)
    return coords_lib.detr(mask, normalize=self.normalize).reshape(math.prod(shape), 2)

  def packed_coords(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """`grid_coords(shape[b])` at the cells `index`: the 1-based count, normalised as
    `coords.detr` normalises an unpadded image's."""
    count = jnp.asarray(index, jnp.float32) + 1.0
    if not self.normalize:
      return count
    n = jnp.asarray(shape, jnp.float32)[:, None, :]
    return count / (n + coords_lib.DETR_EPS) * coords_lib.DETR_SCALE


class LearnableSinusoidal(_Sine, nn.Module):
  """`learnable_sine` (003 Sec. 5.2, Eq. 6): sinusoids of a trainable linear map.

  y = x Wᵀ with W `[D/2, M]` (param `w`, no bias, as in Eq. 6), then sin/cos of y
  interleaved (or `layout='concat'`). W is initialised block-diagonally so that
  y_(mK + i) = x_m / T^(2i/(D/M)) (K = D/(2M); for M = 2 this is Eq. 6's 4i/D): at
  init the output equals `SineND(layout=...)` exactly; training may then mix axes.
  `coords_mode='index'`: 003 feeds raw integer patch coordinates. Like `sine_nd`, its
  `grid` reads lfpe's (row, col) coordinates, so the row (y) block comes first where Eq. 6
  puts x first (the halves swapped; pass `coords[..., ::-1]` for Eq. 6's channel order).
  """

  dim: int
  ndim: int = 2
  temperature: float = 10000.0
  layout: str = "interleave"
  coords_mode: str = "index"

  def _init_w(self, key, shape, dtype=jnp.float32) -> jnp.ndarray:
    del key  # deterministic init
    freqs = frequencies(self.dim // self.ndim, self.temperature)  # [K]
    return jnp.asarray(np.kron(np.eye(self.ndim), freqs[:, None]), dtype).reshape(shape)

  @nn.compact
  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, self.ndim, type(self).__name__)
    w = self.param("w", self._init_w, (self.dim // 2, self.ndim))  # [D/2, M]
    y = jnp.einsum(
      "...m,fm->...f", jnp.asarray(coords, jnp.float32), w, precision=jax.lax.Precision.HIGHEST
    )  # [..., D/2]
    return sincos(y.reshape(*y.shape[:-1], self.ndim, -1), self.layout)  # [..., D]


TEMPERATURE = ("temperature", 10000.0)  # the longest wavelength: the sinusoids' scale knob
ENCODINGS = (
  Registration("sine_1d", Sine1D, labels=("Sine-1D",), knob=TEMPERATURE),
  Registration(
    "sine_nd",
    SineND,
    aliases=("sine_2d", "sine_4d"),
    reads_boxes=True,
    labels=("Sine-ND", "Sine-2D", "Sine-4D"),
    knob=TEMPERATURE,
  ),
  Registration("detr_sine", DetrSine, labels=("Sine-2D (DETR)",), knob=("frequency_scale", 1.0)),
  Registration(
    "learnable_sine",
    LearnableSinusoidal,
    reads_boxes=True,
    labels=("Learnable sinusoidal",),
    knob=TEMPERATURE,
  ),
)
