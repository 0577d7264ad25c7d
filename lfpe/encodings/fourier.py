"""Learnable Fourier features + MLP (002 Sec. 3, Algorithm 1) and its ablations.

Algorithm 1 on positions `X [..., G, M]` (G groups of M coordinates; `[..., M]` when G=1):
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

import math
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.encodings.base import (
  AbsoluteEncoding,
  check_divisible,
  check_last_dim,
  check_mode,
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


def mlp(features: jnp.ndarray, hidden_dim: int, out_dim: int) -> jnp.ndarray:
  """Eq. 6 inside a compact module: GELU(F W1 + B1) W2 + B2, params `hidden` and `out`.

  GELU is the exact x·Φ(x) of the paper's "GeLU" (flax defaults to the tanh form).
  """
  h = nn.gelu(nn.Dense(hidden_dim, name="hidden")(features), approximate=False)  # [..., H]
  return nn.Dense(out_dim, name="out")(h)  # [..., D/G]


class _Grouped(AbsoluteEncoding):
  """Config checks and the `[..., G, M]` <-> `[..., D]` plumbing shared by this file."""

  channel_multiple: ClassVar[int] = 1  # D/G must be a multiple of this

  def __post_init__(self):
    owner = type(self).__name__
    check_divisible("groups", self.groups, 1, "the number of coordinate groups G", owner)
    check_divisible("ndim", self.ndim, 1, "coordinates per group M", owner)
    check_divisible(
      "dim",
      self.dim,
      self.groups * self.channel_multiple,
      f"D/G output channels for each of groups={self.groups}",
      owner,
    )
    check_mode(self.coords_mode, owner)
    super().__post_init__()

  def check_coords(self, x: jnp.ndarray) -> jnp.ndarray:
    """`x [..., G, M]` (or `[..., M]` when G = 1) as float32, checked."""
    owner = type(self).__name__
    x = jnp.asarray(x, jnp.float32)
    check_last_dim("x", x, self.ndim, owner)
    if self.groups > 1 and (x.ndim < 2 or x.shape[-2] != self.groups):
      raise ValueError(
        f"{owner}: with `groups`={self.groups}, positions must be [..., {self.groups}, "
        f"{self.ndim}], got shape {tuple(x.shape)}; split boxes with coords.boxes(b, groups)."
      )
    return x

  def merge_groups(self, y: jnp.ndarray) -> jnp.ndarray:
    """Algorithm 1 line 3: `[..., G, D/G]` -> `[..., D]` (`[..., D]` unchanged when G = 1)."""
    return y.reshape(*y.shape[:-2], self.dim) if self.groups > 1 else y


class LearnableFourierMLP(_Grouped, nn.Module):
  """`fourier` (002 Alg. 1): learnable Fourier features, then a GELU MLP, `[..., D]`.

  Params: `wr [fourier_dim/2, ndim]` (init N(0, γ⁻²), std 1/γ), `hidden` (W1 `[F, H]`,
  B1), `out` (W2 `[H, D/G]`, B2). `trainable_wr=False` is `fixed_fourier_mlp`: `wr` then
  lives in the "constants" collection, drawn from the "params" rng at init.
  `ndim` is M, the coordinates per group (G=1 boxes: 4; G=2: 2; G=4: 1).
  With G = 1 the group axis is optional: `[..., 1, M]` is read as a batch axis of size 1.
  """

  dim: int
  fourier_dim: int = 384
  hidden_dim: int = 32
  gamma: float = 1.0
  groups: int = 1
  ndim: int = 2
  trainable_wr: bool = True
  coords_mode: str = "unit"

  def __post_init__(self):
    owner = type(self).__name__
    check_divisible("fourier_dim", self.fourier_dim, 2, "a cos and a sin per row of W_r", owner)
    check_divisible("hidden_dim", self.hidden_dim, 1, "the MLP width |H|", owner)
    check_positive("gamma", self.gamma, owner)
    super().__post_init__()

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = self.check_coords(x)  # [..., G, M] or [..., M]
    shape = (self.fourier_dim // 2, self.ndim)
    init = nn.initializers.normal(stddev=1.0 / self.gamma)
    if self.trainable_wr:
      wr = self.param("wr", init, shape)
    else:
      wr = self.variable("constants", "wr", lambda: init(self.make_rng("params"), shape)).value
    y = mlp(fourier_features(x, wr), self.hidden_dim, self.dim // self.groups)
    return self.merge_groups(y)  # [..., D]


class FourierFeatures(_Grouped, nn.Module):
  """`fourier_no_mlp` (002 Fig. 3b "Learnable-Fourier", Table 3): Eq. 2 alone, |F| = D/G.

  Param `wr [D/(2G), ndim]`, init N(0, γ⁻²). Output `[..., D]`, the groups' features
  concatenated in group order.
  """

  dim: int
  gamma: float = 1.0
  groups: int = 1
  ndim: int = 2
  coords_mode: str = "unit"
  channel_multiple: ClassVar[int] = 2  # D/G is the Fourier depth: a cos and a sin per row

  def __post_init__(self):
    check_positive("gamma", self.gamma, type(self).__name__)
    super().__post_init__()

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = self.check_coords(x)
    shape = (self.dim // self.groups // 2, self.ndim)
    wr = self.param("wr", nn.initializers.normal(stddev=1.0 / self.gamma), shape)
    return self.merge_groups(fourier_features(x, wr))


class PositionMLP(_Grouped, nn.Module):
  """`mlp` (002 Sec. 4.1, Tables 1 and 3): Eq. 6's MLP on the raw coordinates.

  GELU(x W1 + B1) W2 + B2 with W1 `[M, H]`, W2 `[H, D/G]`, shared by the groups.
  """

  dim: int
  hidden_dim: int = 32
  groups: int = 1
  ndim: int = 2
  coords_mode: str = "unit"

  def __post_init__(self):
    check_divisible("hidden_dim", self.hidden_dim, 1, "the MLP width |H|", type(self).__name__)
    super().__post_init__()

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    y = mlp(self.check_coords(x), self.hidden_dim, self.dim // self.groups)
    return self.merge_groups(y)
