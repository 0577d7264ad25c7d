"""Learnable Fourier features + MLP (002 Sec. 3, Algorithm 1) and its ablations.

Algorithm 1 on positions `X [..., G, M]` (G groups of M coordinates; M is read from the
input; `[..., M]` is also accepted when G = 1) returns `PE [..., D]` for every G:
  1. F = [cos(X W_rᵀ) ‖ sin(X W_rᵀ)] / sqrt(|F|)      (Eq. 2), W_r `[|F|/2, M]`
  2. Y = GELU(F W1 + B1) W2 + B2                      (Eq. 6), W2 `[|H|, D/G]`
  3. PE = Y reshaped to `[..., D]` (group g fills channels g·D/G .. (g+1)·D/G - 1).
All groups share W_r and the MLP.

Kernel at init. W_r ~ N(0, γ⁻²) (Eq. 4) is a variance, so its std is 1/γ. By Eq. 3,
r_x · r_y = (1/|F|) Σ_k cos(w_k · (x - y)) over the |F|/2 rows w_k of W_r, and for
w ~ N(0, γ⁻² I) the Gaussian characteristic function gives E[cos(w · δ)] = exp(-‖δ‖²/(2γ²)).
Hence, exactly,  E[r_x · r_y] = ½ · exp(-‖x - y‖² / (2γ²)).  The paper's Eq. 5 writes
exp(-‖x - y‖²/γ²), dropping the ½ (|F|/2 terms over a 1/|F| normalisation; r_x · r_x = ½)
and the 2; its shape (a Gaussian in x - y of width set by γ) is what matters.

Ablations (002 Fig. 3b, Tables 1 and 3): `fourier_no_mlp` (the features alone, |F| = D/G),
`fixed_fourier_mlp` (W_r a constant drawn at init, in the "constants" collection, so no
optimizer sees it) and `mlp` (the same MLP on the raw coordinates).

Defaults. |F| = 384, |H| = 32 are 002 Sec. 4.1's (D = 768). The paper states no γ; lfpe
uses γ = 1 with `coords_mode='unit'`: positions in [0, 1] as in 002 Sec. 4.2 ("all image
positions are normalized to a range of (0, 1)"; its Table 2 turns this off, i.e.
`coords_mode='index'`), so the kernel's width at init is the image side (cosine similarity
of the features exp(-d²/2): 0.37 between opposite corners). 003 Sec. 5.1 reports that the
relative-location bias depends heavily on γ: set it per task.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.encodings.base import (
  AbsoluteEncoding,
  Registration,
  check_divisible,
  check_last_dim,
  check_positive,
)


def fourier_features(x: jnp.ndarray, wr: jnp.ndarray) -> jnp.ndarray:
  """Eq. 2: `[cos(x W_rᵀ) ‖ sin(x W_rᵀ)] / sqrt(F)` of `x [..., M]`, W_r `[F/2, M]` -> `[..., F]`.

  The projection runs at full float32 precision: phases of large coordinates must not be
  rounded to bfloat16 by an accelerator's default matmul precision.
  """
  proj = jnp.einsum(
    "...m,fm->...f", jnp.asarray(x, jnp.float32), wr, precision=jax.lax.Precision.HIGHEST
  )  # [..., F/2]
  return jnp.concatenate([jnp.cos(proj), jnp.sin(proj)], axis=-1) / math.sqrt(2 * wr.shape[0])


def mlp(
  features: jnp.ndarray, hidden_dim: int, out_dim: int, out_init_std: float | None = None
) -> jnp.ndarray:
  """Eq. 6 inside a compact module: GELU(F W1 + B1) W2 + B2, params `hidden` and `out`.

  GELU is the exact x·Φ(x) of the paper's "GeLU" (flax defaults to the tanh form). W2 is
  LeCun-normal (flax's default), or N(0, out_init_std²) when given.
  """
  h = nn.gelu(nn.Dense(hidden_dim, name="hidden")(features), approximate=False)  # [..., H]
  init = nn.initializers.lecun_normal() if out_init_std is None else _normal(out_init_std)
  return nn.Dense(out_dim, kernel_init=init, name="out")(h)  # [..., D/G]


def _normal(std: float):
  return nn.initializers.normal(stddev=std)


class _Grouped(AbsoluteEncoding):
  """Config checks and Algorithm 1's `[..., G, M]` -> `[..., D]` plumbing (this file).

  Input contract. Positions are `[..., G, M]`: G groups (`groups`) of M coordinates, M
  read from the input (`ndim`, when given, is checked against it). When G = 1 the group
  axis may be left out: `[..., M]`. A size-1 axis just before M is read as that group axis,
  so `[N, 1, M]` -> `[N, D]` and a single position `[1, M]` -> `[D]`; `grid()` passes
  `[N, 1, M]` and always returns `[N, D]`. The output is always `[..., D]`.
  """

  channel_multiple: ClassVar[int] = 1  # D/G must be a multiple of this

  def check(self):
    owner = type(self).__name__
    check_divisible("groups", self.groups, 1, "the number of coordinate groups G", owner)
    if self.ndim is not None:
      check_divisible("ndim", self.ndim, 1, "coordinates per group M", owner)
    check_divisible(
      "dim",
      self.dim,
      self.groups * self.channel_multiple,
      f"D/G output channels for each of groups={self.groups}",
      owner,
    )
    check_positive("gamma", getattr(self, "gamma", 1.0), owner)
    super().check()

  def grid_coords(self, shape) -> jnp.ndarray:
    """`[prod(shape), 1, len(shape)]`: one group of every cell's coordinates (G = 1)."""
    return super().grid_coords(shape)[:, None, :]

  def packed_coords(self, index, shape) -> jnp.ndarray:
    """`[B, L, 1, M]`: per-example cells' coordinates as one group (G = 1)."""
    return super().packed_coords(index, shape)[..., None, :]

  def group_coords(self, x: jnp.ndarray) -> jnp.ndarray:
    """`x [..., G, M]` (or `[..., M]` when G = 1) as float32 `[..., G, M]`, checked."""
    owner, g = type(self).__name__, self.groups
    x = jnp.asarray(x, jnp.float32)
    if x.ndim >= 2 and x.shape[-2] == g:
      pass
    elif g == 1 and x.ndim >= 1:
      x = x[..., None, :]
    else:
      raise ValueError(
        f"{owner}: with `groups`={g}, positions must be [..., {g}, M], got shape "
        f"{tuple(x.shape)}; split boxes with coords.boxes(b, groups)."
      )
    if self.ndim is not None:
      check_last_dim("x", x, self.ndim, owner)
    return x

  def merge_groups(self, y: jnp.ndarray) -> jnp.ndarray:
    """Algorithm 1 line 3: `[..., G, D/G]` -> `[..., D]` (group g fills block g)."""
    return y.reshape(*y.shape[:-2], self.dim)


class LearnableFourierMLP(_Grouped, nn.Module):
  """`fourier` (002 Alg. 1): learnable Fourier features, then a GELU MLP, to `[..., D]`.

  Params: `wr [fourier_dim/2, M]` (init N(0, γ⁻²), std 1/γ), `hidden` (W1 `[F, H]`, B1),
  `out` (W2 `[H, D/G]`, B2; `out_init_std` draws W2 from N(0, std²) instead of LeCun's
  normal, e.g. to make the position signal larger at init). `trainable_wr=False` is
  `fixed_fourier_mlp`: `wr` then lives in the "constants" collection, drawn from the
  "params" rng at init. M comes from the input (`ndim` optional, checked when given); see
  `_Grouped` for how `[..., M]` and a trailing `[..., 1, M]` are read.
  """

  dim: int
  fourier_dim: int = 384
  hidden_dim: int = 32
  gamma: float = 1.0
  groups: int = 1
  ndim: int | None = None
  trainable_wr: bool = True
  coords_mode: str = "unit"
  out_init_std: float | None = None

  def check(self):
    owner = type(self).__name__
    check_divisible("fourier_dim", self.fourier_dim, 2, "a cos and a sin per row of W_r", owner)
    check_divisible("hidden_dim", self.hidden_dim, 1, "the MLP width |H|", owner)
    if self.out_init_std is not None:
      check_positive("out_init_std", self.out_init_std, owner)
    super().check()

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = self.group_coords(x)  # [..., G, M]
    shape = (self.fourier_dim // 2, x.shape[-1])
    init = _normal(1.0 / self.gamma)
    if self.trainable_wr:
      wr = self.param("wr", init, shape)
    else:
      wr = self.variable("constants", "wr", lambda: init(self.make_rng("params"), shape)).value
    features = fourier_features(x, wr)  # [..., G, F]
    y = mlp(features, self.hidden_dim, self.dim // self.groups, self.out_init_std)
    return self.merge_groups(y)  # [..., D]


class FourierFeatures(_Grouped, nn.Module):
  """`fourier_no_mlp` (002 Fig. 3b "Learnable-Fourier", Table 3): Eq. 2 alone, |F| = D/G.

  Param `wr [D/(2G), M]`, init N(0, γ⁻²). `[..., G, M]` -> `[..., D]`, the groups'
  features concatenated in group order.
  """

  dim: int
  gamma: float = 1.0
  groups: int = 1
  ndim: int | None = None
  coords_mode: str = "unit"
  channel_multiple: ClassVar[int] = 2  # D/G is the Fourier depth: a cos and a sin per row

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = self.group_coords(x)
    shape = (self.dim // self.groups // 2, x.shape[-1])
    wr = self.param("wr", _normal(1.0 / self.gamma), shape)
    return self.merge_groups(fourier_features(x, wr))


class PositionMLP(_Grouped, nn.Module):
  """`mlp` (002 Sec. 4.1, Tables 1 and 3): Eq. 6's MLP on the raw coordinates.

  GELU(s·x W1 + B1) W2 + B2 with W1 `[M, H]`, W2 `[H, D/G]`, shared by the groups;
  `[..., G, M]` -> `[..., D]`. `out_init_std` as in `LearnableFourierMLP`.

  `input_scale` s (default 1: 002's MLP) is not in 002: it is the MLP's scale knob, the
  counterpart of the Fourier encodings' 1/γ (which scales the coordinates before W_r), so
  that a sweep can give MLP the same tuning budget as Learnable-Fourier (experiments/sweeps.py).
  """

  dim: int
  hidden_dim: int = 32
  groups: int = 1
  ndim: int | None = None
  coords_mode: str = "unit"
  out_init_std: float | None = None
  input_scale: float = 1.0

  def check(self):
    owner = type(self).__name__
    check_positive("input_scale", self.input_scale, owner)
    check_divisible("hidden_dim", self.hidden_dim, 1, "the MLP width |H|", owner)
    if self.out_init_std is not None:
      check_positive("out_init_std", self.out_init_std, owner)
    super().check()

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = self.input_scale * self.group_coords(x)
    y = mlp(x, self.hidden_dim, self.dim // self.groups, self.out_init_std)
    return self.merge_groups(y)


ENCODINGS = (
  Registration(
    "fourier",
    LearnableFourierMLP,
    aliases=("learnable_fourier_mlp",),
    reads_boxes=True,
    labels=("Learnable-Fourier+MLP",) * 2,
    knob=("gamma", 1.0),
  ),
  Registration(
    "fourier_no_mlp",
    FourierFeatures,
    reads_boxes=True,
    labels=("Learnable-Fourier",),
    knob=("gamma", 1.0),
  ),
  Registration(
    "fixed_fourier_mlp",
    functools.partial(LearnableFourierMLP, trainable_wr=False),
    reads_boxes=True,
    labels=("Fixed-Fourier+MLP",),
    knob=("gamma", 1.0),
  ),
  Registration("mlp", PositionMLP, reads_boxes=True, labels=("MLP",), knob=("input_scale", 1.0)),
)
