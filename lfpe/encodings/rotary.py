"""2-D rotary position embeddings, axial and mixed (Heo et al. 2024, "Rotary Position
Embedding for Vision Transformer", RoPE-ViT).

Channels of q and k are taken in adjacent pairs (2i, 2i+1) as complex numbers and rotated by
an angle linear in the 2-D position p = (y, x):

  angle[n, h, i] = p_n · f[:, h, i],     x'[2i] + j x'[2i+1] = (x[2i] + j x[2i+1]) e^{j angle}.

Then `q'_n · k'_m` depends on p_n - p_m only, which is what lets RoPE extrapolate to grids
larger than the training one (index coordinates, `grid_coords`).

* `axial` (theta 100): f = 1 / theta^(4k/d), k < d/4; the first d/4 pairs rotate with the
  column x, the last d/4 with the row y (Heo's channel layout: `cat([cis_x, cis_y])`).
  Shared by all heads and fixed.
* `mixed` (theta 10): learnable `freqs [2, heads, d/2]` (row 0 multiplies y, row 1 x; Heo's
  `freqs_y`, `freqs_x`), so a pair can rotate along any direction. Heo's init: per head a
  random angle a, magnitudes m_k = 1 / theta^(4k/d), and pair directions
  (cos a, sin a)·m_k for the first d/4 pairs, (cos(a + π/2), sin(a + π/2))·m_k for the rest
  (x, y components).

Prefix tokens (a class token) are not rotated (as in Heo et al.): pass grid tokens only.

At a grid other than the training one (`grid_shape`, which the model fills in), `scaling`
chooses how RoPE meets it. Its training length L is `grid_shape`'s, or `trained_grid`'s where
set: a model trained at several sizes (`data.train_sizes`) saw positions up to its largest
grid, and L taken from its nominal grid would compress even a size it trained at. With
`scaling='none'` it changes nothing (a training spec may carry it for its evaluations).

* `none`: extrapolate, index coordinates beyond the training range (Heo et al.'s default).
* `pi`: position interpolation (Chen et al. 2023), per axis: coordinate m becomes m / s with
  s = max(L' / L, 1) for a training length L and a test length L' (rotary-embedding-torch's
  `interpolate_factor`, which must be >= 1), so every offset stays inside the trained range;
  the largest coordinate is L − L/L'. Like `ntk` and `yarn` it only extends: at or below
  the training length it is the identity (stretching a smaller grid's steps beyond 1 would
  move its offsets off the trained ones).
* `ntk`: NTK-aware scaling (bloc97 2023; rotary-embedding-torch's `theta_rescale_factor`),
  per axis: the base becomes theta · s^(d_a / (d_a - 2)) with s = max(L' / L, 1) and d_a =
  head_dim / 2 the channels that rotate with that axis, so the highest frequency is kept and
  the lowest is divided by s (as PI would). Only for `axial` (fixed frequencies): `mixed`
  learns its frequencies, which have no base to rescale; use `pi` there. L' is the grid's
  (`shape`, which models pass; a call without it is an error, since coordinates under
  augmentation do not tell the length). `ntk_factor` sets s by hand (both axes) instead,
  the same for every grid, so packed batches of several grids take it.
* `yarn`: NTK-by-parts with YaRN's temperature (Peng et al. 2023), per axis of training
  length L: each frequency f of wavelength 2π/f with r = L·f/2π periods in L becomes
  (1 − γ)·f/s + γ·f, γ = clip((r − alpha)/(beta − alpha), 0, 1) (interpolated where it
  repeats less than alpha times in L, kept where more than beta times), and the rotated q
  and k are multiplied by 0.1·ln(s) + 1 (s: the larger axis factor). `axial` only. Tokens
  the rotation skips (a class token: `lfpe.nn.positions`) are not scaled either, so their
  logits with the grid get the temperature once and with themselves not at all (YaRN has no
  unrotated tokens to say otherwise).
  `yarn_ramp='paper'` (the default) is this ramp, linear in r, as the paper writes it (its
  Eq. 18-19); `yarn_ramp='code'` is the released code's (jquesnelle/yarn,
  `_yarn_find_correction_range`): linear in the frequency index k between
  floor(k at r = beta) and ceil(k at r = alpha), clamped to [0, d_a − 1] (d_a = head_dim / 2:
  the axis' channels), i.e. linear in log r. The two differ most at ViT lengths: for
  head_dim 64, θ 100, L 14, γ of the first pairs is [0.04, 0.02, 0.01, 0, ...] by the paper
  and [1, 2/3, 1/3, 0, ...] by the code, and with the paper's beta = 32 no pair is kept
  whole at such lengths.

`coords_mode='dinov3'` reads DINOv3's coordinates instead of indices (Siméoni et al. 2025,
`RopePositionEmbedding`, `normalize_coords='separate'`): pixel centres normalised per axis,
c = (i + 0.5)/n · 2 − 1 in [−1, 1], times 2π, so that with θ = 100 the angle of pair k is
DINOv3's 2π·c / 100^(4k/d) (its `base` 100). Every grid then spans the same range, finer
at a larger size (interpolation by construction), so `scaling` stays `none`. DINOv3 rotates
halves (`rope_rotate_half`) where Heo and lfpe rotate adjacent pairs: a fixed permutation of
the head's channels, the same function of the positions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.checked import Checked
from lfpe.encodings import coords as coords_lib
from lfpe.encodings.base import Registration, check_divisible, check_last_dim, check_positive

MODES = ("axial", "mixed")
COORDS_MODES = ("index", "dinov3")
SCALINGS = ("none", "pi", "ntk", "yarn")
YARN_RAMPS = ("paper", "code")
THETA = {"axial": 100.0, "mixed": 10.0}  # Heo et al.'s defaults


def magnitudes(head_dim: int, theta: float) -> jnp.ndarray:
  """Heo's frequency magnitudes 1 / theta^(4k / head_dim), k < head_dim/4: `[head_dim/4]`."""
  return 1.0 / theta ** (jnp.arange(0, head_dim, 4, dtype=jnp.float32) / head_dim)


def axial_freqs(head_dim: int, theta: float, theta_x: float | None = None) -> jnp.ndarray:
  """Axial frequencies `[2, 1, head_dim/2]` (rows y, x): x on the first d/4 pairs, y last;
  `theta` for y and `theta_x` (default: `theta`) for x."""
  mag_y = magnitudes(head_dim, theta)
  return axes_freqs(mag_y, mag_y if theta_x is None else magnitudes(head_dim, theta_x))


def axes_freqs(mag_y: jnp.ndarray, mag_x: jnp.ndarray) -> jnp.ndarray:
  """`[2, 1, d/2]` from each axis' `[d/4]` magnitudes in Heo's layout (x first, then y)."""
  zero = jnp.zeros_like(mag_y)
  return jnp.stack([jnp.concatenate([zero, mag_y]), jnp.concatenate([mag_x, zero])])[:, None]


def ntk_theta(theta: float, scale, head_dim: int):
  """NTK-aware base for one axis stretched by `scale` (>= 1): theta · s^(d_a / (d_a - 2))."""
  d_axis = head_dim // 2
  return theta * jnp.maximum(scale, 1.0) ** (d_axis / (d_axis - 2))


def yarn_kept(
  head_dim: int, theta: float, length: float, alpha: float, beta: float, ramp: str = "paper"
) -> jnp.ndarray:
  """YaRN's γ per frequency of one axis of training `length` (1: kept, 0: interpolated),
  `[head_dim/4]`, by the paper's ramp (linear in r) or the released code's (linear in the
  frequency index; module docstring)."""
  mag = magnitudes(head_dim, theta)
  if ramp == "paper":
    periods = length * mag / (2 * math.pi)  # r: how often each frequency repeats in L
    return jnp.clip((periods - alpha) / (beta - alpha), 0.0, 1.0)
  d_axis = head_dim // 2  # the code's `dim`: frequency k is theta^(-2k / d_axis)
  index_at = lambda r: d_axis * math.log(length / (r * 2 * math.pi)) / (2 * math.log(theta))
  low, high = max(math.floor(index_at(beta)), 0), min(math.ceil(index_at(alpha)), d_axis - 1)
  high = high + 0.001 if low == high else high  # the code's guard against a zero-width ramp
  k = jnp.arange(mag.shape[0], dtype=jnp.float32)
  return 1.0 - jnp.clip((k - low) / (high - low), 0.0, 1.0)


def yarn_magnitudes(
  head_dim: int,
  theta: float,
  scale,
  length: float,
  alpha: float,
  beta: float,
  ramp: str = "paper",
) -> jnp.ndarray:
  """NTK-by-parts magnitudes of one axis stretched by `scale` (>= 1), training `length`."""
  mag = magnitudes(head_dim, theta)
  gamma = yarn_kept(head_dim, theta, length, alpha, beta, ramp)
  return (1.0 - gamma) * mag / jnp.maximum(scale, 1.0) + gamma * mag


def mixed_freqs_init(theta: float):
  """Heo's RoPE-Mixed init for `freqs [2, heads, head_dim/2]` (random direction per head)."""

  def init(key, shape, dtype=jnp.float32):
    _, heads, half = shape
    a = jax.random.uniform(key, (heads, 1), jnp.float32, 0.0, 2 * math.pi)  # [heads, 1]
    angle = jnp.repeat(jnp.concatenate([a, a + math.pi / 2], -1), half // 2, -1)  # [h, d/2]
    mag = jnp.tile(magnitudes(2 * half, theta), 2)  # [d/2]
    return jnp.stack([mag * jnp.sin(angle), mag * jnp.cos(angle)]).astype(dtype)

  return init


def dinov3_coords(index: jnp.ndarray, n: jnp.ndarray) -> jnp.ndarray:
  """DINOv3's coordinates of cells `index` on axes of `n` cells: 2π·((i + 0.5)/n · 2 − 1)."""
  return 2 * math.pi * ((index + 0.5) / n * 2.0 - 1.0)


def rope(x: jnp.ndarray, coords: jnp.ndarray, freqs: jnp.ndarray) -> jnp.ndarray:
  """Rotate `x [B, N, heads, d]` by positions `coords [N, M]` (or per example, `[B, N, M]`:
  packed batches) and `freqs [M, heads|1, d/2]`."""
  c = jnp.asarray(coords, jnp.float32)[..., None, None]  # [(B,) N, M, 1, 1]
  angle = jnp.sum(c * freqs, axis=-3)  # [(B,) N, heads|1, d/2]; f32 elementwise, no bf16 matmul
  cos, sin = jnp.cos(angle), jnp.sin(angle)
  pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], -1, 2)  # [B, N, heads, d/2, 2]
  re, im = pairs[..., 0], pairs[..., 1]
  out = jnp.stack([re * cos - im * sin, re * sin + im * cos], axis=-1)
  return out.reshape(x.shape).astype(x.dtype)


class Rotary2D(Checked, nn.Module):
  """2-D RoPE on q or k: `__call__(x [B, N, heads, head_dim], coords [N, 2]) -> same shape`.

  `coords` are (y, x) positions, normally `grid_coords(shape)` (integer indices). `mode` is
  `axial` or `mixed` (needs `num_heads`); `theta` defaults to Heo's 100 / 10. `scaling`
  (`none`, `pi`, `ntk`, `yarn`) is the policy at a grid other than `grid_shape` (or
  `trained_grid`, the largest grid of mixed-resolution training); `coords_mode` (`index`,
  `dinov3`) the coordinates it reads (module docstring).
  """

  head_dim: int | None = None
  num_heads: int | None = None
  mode: str = "axial"
  theta: float | None = None
  grid_shape: tuple[int, ...] | None = None
  scaling: str = "none"
  trained_grid: tuple[int, int] | None = None
  ntk_factor: float | None = None
  yarn_alpha: float = 1.0
  yarn_beta: float = 32.0
  yarn_ramp: str = "paper"
  coords_mode: str = "index"

  kind: ClassVar[str] = "rotary"

  def check(self):
    super().check()
    owner = type(self).__name__
    if self.mode not in MODES:
      raise ValueError(f"{owner}: unknown mode={self.mode!r}; use one of {MODES}.")
    check_divisible("head_dim", self.head_dim, 4, "2-D RoPE rotates d/4 pairs per axis", owner)
    if self.mode == "mixed" and (
      not isinstance(self.num_heads, int) or isinstance(self.num_heads, bool) or self.num_heads < 1
    ):
      raise ValueError(
        f"{owner}: mode='mixed' learns frequencies per head, so it needs `num_heads` (an "
        f"integer >= 1), got {self.num_heads!r}; e.g. create('rope_mixed', num_heads=4, "
        "head_dim=8)."
      )
    if self.theta is not None:
      check_positive("theta", self.theta, owner)
    if self.scaling not in SCALINGS:
      raise ValueError(f"{owner}: unknown scaling={self.scaling!r}; use one of {SCALINGS}.")
    if self.coords_mode not in COORDS_MODES:
      raise ValueError(
        f"{owner}: unknown coords_mode={self.coords_mode!r}; use one of {COORDS_MODES}."
      )
    if self.coords_mode == "dinov3" and self.scaling != "none":
      raise ValueError(
        f"{owner}: coords_mode='dinov3' keeps every grid in [-1, 1] (interpolation by "
        f"construction); scaling={self.scaling!r} rescales index coordinates. Drop one."
      )
    if self.scaling in ("ntk", "yarn") and self.mode != "axial":
      raise ValueError(
        f"{owner}: scaling={self.scaling!r} rescales fixed frequencies and mode={self.mode!r} "
        "learns its own; use scaling='pi' (or mode='axial')."
      )
    if self.ntk_factor is not None and (
      self.scaling not in ("ntk", "yarn")
      or not isinstance(self.ntk_factor, (int, float))
      or self.ntk_factor < 1
    ):
      raise ValueError(
        f"{owner}: ntk_factor={self.ntk_factor!r} is a number >= 1 for scaling='ntk' or 'yarn'."
      )
    if not 0 <= self.yarn_alpha < self.yarn_beta:
      raise ValueError(
        f"{owner}: need 0 <= yarn_alpha < yarn_beta, got {self.yarn_alpha}, {self.yarn_beta}."
      )
    if self.yarn_ramp not in YARN_RAMPS:
      raise ValueError(f"{owner}: unknown yarn_ramp={self.yarn_ramp!r}; use one of {YARN_RAMPS}.")
    trained = self.trained_grid
    if trained is not None and not (
      isinstance(trained, (tuple, list))
      and len(trained) == 2
      and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in trained)
    ):
      raise ValueError(
        f"{owner}: trained_grid={trained!r} is the (rows, columns) grid, positive ints, that "
        "scaling='pi', 'ntk' or 'yarn' takes as the training length; e.g. (12, 12) for a "
        "model trained up to 96 px with 8 px patches."
      )
    grid = self.trained_grid or self.grid_shape
    if self.scaling != "none" and (grid is None or len(grid) != 2):
      raise ValueError(
        f"{owner}: scaling={self.scaling!r} needs the 2-D training grid_shape (the model "
        f"gives it) or trained_grid, got grid_shape={self.grid_shape!r}."
      )
    if self.scaling == "ntk" and self.head_dim < 8:
      raise ValueError(
        f"{owner}: scaling='ntk' needs head_dim >= 8 (d_a = head_dim / 2 channels per axis, "
        f"base exponent d_a / (d_a - 2)), got head_dim={self.head_dim}."
      )

  @property
  def training_length(self) -> tuple[int, ...]:
    """L per axis of the scaling policies: `trained_grid`, else the model's `grid_shape`."""
    return tuple(self.trained_grid or self.grid_shape)

  def grid_coords(self, shape: Sequence[int]) -> jnp.ndarray:
    """Index (y, x) coordinates of a row-major grid, `[prod(shape), 2]`; with `scaling='pi'`
    each axis of length L' is scaled by min(L / L', 1) (L: the training grid's length); with
    `coords_mode='dinov3'`, DINOv3's normalised ones (`dinov3_coords`)."""
    grid = coords_lib.grid(shape, "index")
    if self.coords_mode == "dinov3":
      return dinov3_coords(grid, jnp.asarray(shape, jnp.float32))
    if self.scaling != "pi":
      return grid
    return grid * jnp.asarray(
      [min(t / n, 1.0) for t, n in zip(self.training_length, shape, strict=True)]
    )

  def packed_coords(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """`grid_coords(shape[b])` at the cells `index [B, L, 2]` of per-example grids
    (`shape [B, 2]`: packed batches): `none` and `pi`, or `ntk` / `yarn` with a fixed
    `ntk_factor` (from the grid's length they would rescale θ per grid)."""
    index = jnp.asarray(index, jnp.float32)
    if self.coords_mode == "dinov3":
      return dinov3_coords(index, jnp.asarray(shape, jnp.float32)[:, None, :])
    if self.scaling == "none" or self.ntk_factor:
      return index  # a fixed `ntk_factor` rescales θ alike for every grid (`__call__`)
    if self.scaling == "pi":
      factor = jnp.asarray(self.training_length, jnp.float32) / jnp.asarray(shape, jnp.float32)
      return index * jnp.minimum(factor, 1.0)[:, None, :]
    problem = self.packed_refusal({"scaling": self.scaling, "ntk_factor": self.ntk_factor})
    raise ValueError(f"{type(self).__name__}: {problem}.")

  @staticmethod
  def packed_refusal(settings: Mapping[str, Any]) -> str | None:
    """Why RoPE with these `settings` (its fields) cannot take packed batches, or None: `ntk`
    and `yarn` rescale θ from one grid's length, unless `ntk_factor` fixes the factor (the
    check `encodings.packed_refusal` runs on a config)."""
    if settings.get("scaling") not in ("ntk", "yarn") or settings.get("ntk_factor"):
      return None
    return (
      f"scaling={settings['scaling']!r} rescales θ for one grid, so packed batches of several "
      "grids cannot use it; use scaling='none' or 'pi', or set `ntk_factor` (the same s for "
      "every grid)"
    )

  @nn.compact
  def __call__(
    self, x: jnp.ndarray, coords: jnp.ndarray, shape: Sequence[int] | None = None
  ) -> jnp.ndarray:
    """`x` `[B, N, heads, head_dim]` rotated by `coords` `[N, 2]` of a grid of `shape` (the
    test length L' of `ntk` scaling; module docstring)."""
    owner = type(self).__name__
    check_last_dim("coords", coords, 2, owner)
    heads = self.num_heads if self.mode == "mixed" else "heads"
    ok = x.ndim == 4 and coords.ndim in (2, 3) and x.shape[1] == coords.shape[-2]
    ok = ok and (coords.ndim == 2 or coords.shape[0] == x.shape[0])
    ok = ok and x.shape[3] == self.head_dim and heads in ("heads", x.shape[2])
    if not ok:
      raise ValueError(
        f"{owner}: `x` must be [B, N, heads, head_dim] = [B, {coords.shape[-2]}, {heads}, "
        f"{self.head_dim}] for coords [(B,) N, 2] = {tuple(coords.shape)}, got "
        f"{tuple(x.shape)}; pass grid tokens only and one coordinate row per token."
      )
    theta = THETA[self.mode] if self.theta is None else self.theta
    if self.mode == "axial" and self.scaling in ("ntk", "yarn"):
      return self._rescaled(x, coords, shape, theta)
    if self.mode == "axial":
      freqs = axial_freqs(self.head_dim, theta)  # [2, 1, d/2]
    else:
      freqs = self.param("freqs", mixed_freqs_init(theta), (2, self.num_heads, self.head_dim // 2))
    return rope(x, coords, freqs)

  def _rescaled(self, x, coords, shape, theta: float) -> jnp.ndarray:
    """`ntk` or `yarn` (module docstring) at the grid of `shape` (L'), or by `ntk_factor`."""
    if self.ntk_factor:
      scale = jnp.full((2,), float(self.ntk_factor))
    elif shape is None:
      raise ValueError(
        f"{type(self).__name__}: scaling={self.scaling!r} needs the grid's `shape` (its "
        "length L') in the call, as lfpe's models pass it; coordinates do not tell it "
        "(augmented ones least), or set `ntk_factor`."
      )
    else:
      scale = jnp.asarray(shape, jnp.float32) / jnp.asarray(self.training_length, jnp.float32)
    if self.scaling == "ntk":
      ntk = ntk_theta(theta, scale, self.head_dim)
      return rope(x, coords, axial_freqs(self.head_dim, ntk[0], ntk[1]))
    mags = [
      yarn_magnitudes(
        self.head_dim,
        theta,
        scale[a],
        self.training_length[a],
        self.yarn_alpha,
        self.yarn_beta,
        self.yarn_ramp,
      )
      for a in range(2)
    ]
    temperature = 0.1 * jnp.log(jnp.maximum(scale.max(), 1.0)) + 1.0
    return (rope(x, coords, axes_freqs(*mags)) * temperature).astype(x.dtype)


ENCODINGS = (
  Registration(
    "rope_axial",
    functools.partial(Rotary2D, mode="axial"),
    labels=("RoPE-Axial",),
    knob=("theta", THETA["axial"]),
  ),
  Registration(
    "rope_mixed",
    functools.partial(Rotary2D, mode="mixed"),
    labels=("RoPE-Mixed",),
    knob=("theta", THETA["mixed"]),
  ),
)
