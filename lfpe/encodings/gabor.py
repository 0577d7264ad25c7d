"""Gabor filters and edge markers as a position embedding (000 Sec. 3.2, Eq. 6, 8, 9).

Jiang et al. fit the learned position embeddings of ViT/DeiT with, per output channel,

  PE(x, y) = g(x)·W_x + g(y)·W_y + E·W_E + B,                       (000 Eq. 9)
  g(x) = exp(-x² / (2σ²)) · cos(2π x / λ + ψ),                      (000 Eq. 6, x_a = 0)

with λ, σ, ψ trainable per axis and per channel, coordinates in [-1, 1] (000 Fig. 5:
`coords_mode='centered'`), and E the four edge-marker channels of Eq. 8: 1 on the left
column, right column, top row, bottom row (in that order, Eq. 8's), 0 elsewhere. The markers
are computed from coordinates (x = -1 is the left column), so the encoding is
resolution-free: any grid, evaluated at its centred coordinates.

Parameters per channel: 6 Gabor (λ, σ, ψ for y and x) + 2 (W_y, W_x) + 4 (W_E) + 1 (B) =
13, i.e. 13·D for `gabor_edge`, 9·D for `gabor`, 5·D for `edge`. With D = 768 and one more
D-vector for the class token these are 000 Table 1's 10.7K, 7.6K and 4.6K.

Axis order follows lfpe's coordinates `[..., 2]` = (y, x) = (row, column): row 0 of every
`[2, D]` parameter is the y (vertical) axis, row 1 the x axis. The paper gives no
initialisation (it fits pretrained models); ours is stated on `GaborEdge`.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import flax.linen as nn
import jax.numpy as jnp

from lfpe.encodings.base import (
  AbsoluteEncoding,
  Registration,
  check_divisible,
  check_last_dim,
  uniform_init,
)

EDGES = ("left", "right", "top", "bottom")  # 000 Eq. 8 order
EDGE_TOL = 1e-6


def gabor(x: jnp.ndarray, lam: jnp.ndarray, sigma: jnp.ndarray, psi: jnp.ndarray) -> jnp.ndarray:
  """Real Gabor function centred at 0 (000 Eq. 6 with x_a = 0, as in Eq. 9); broadcasts."""
  return jnp.exp(-(x**2) / (2.0 * sigma**2)) * jnp.cos(2.0 * math.pi * x / lam + psi)


def edge_markers(coords: jnp.ndarray, tol: float = EDGE_TOL) -> jnp.ndarray:
  """The four edge markers of 000 Eq. 8 from centred coordinates: `[..., 2]` -> `[..., 4]`.

  Channels (left, right, top, bottom) are 1 where x = -1, x = 1, y = -1, y = 1 (within
  `tol`). Eq. 8's order; the sentence after it lists them as top, bottom, left, right. An
  axis of length 1 sits at -1 in `coords.grid(..., 'centered')`, so its one row (column)
  is marked top (left) only.
  """
  y, x = coords[..., 0], coords[..., 1]
  marks = [x <= -1.0 + tol, x >= 1.0 - tol, y <= -1.0 + tol, y >= 1.0 - tol]
  return jnp.stack(marks, axis=-1).astype(coords.dtype)


def gabor_edge(coords: jnp.ndarray, params: dict) -> jnp.ndarray:
  """000 Eq. 9: `[..., 2]` centred (y, x) coordinates -> `[..., D]`.

  `params` holds `bias` `[D]` and, for the Gabor part, `lam`, `sigma`, `psi`, `w_gabor`
  (each `[2, D]`, rows y then x), and for the edge part `w_edge` `[4, D]` (rows in
  `EDGES` order). A missing part contributes nothing.
  """
  out = params["bias"]  # [D]
  if "w_gabor" in params:
    c = coords[..., :, None]  # [..., 2, 1]
    g = gabor(c, params["lam"], params["sigma"], params["psi"])  # [..., 2, D]
    out = out + jnp.sum(g * params["w_gabor"], axis=-2)
  if "w_edge" in params:
    e = edge_markers(coords)  # [..., 4]
    out = out + jnp.sum(e[..., :, None] * params["w_edge"], axis=-2)
  return out  # [..., D]


class GaborEdge(AbsoluteEncoding, nn.Module):
  """Generated position embedding of 000 Eq. 9 (`gabor`, `edge`, `gabor_edge`).

  `__call__(coords [..., 2])` takes centred (y, x) coordinates in [-1, 1] and returns
  `[..., dim]`. Init (ours; the paper does not give one): λ ~ U(wavelength_range) (the
  field is 2 wide, so 0.5..4 spans 4 periods to half a period), σ ~ U(sigma_range)
  (a central blob to a near-flat envelope), ψ ~ U(-π, π), W ~ N(0, w_std²) (ViT's learned
  table scale), B = 0. λ and σ are trained directly, as in the paper.
  """

  dim: int
  use_gabor: bool = True
  use_edge: bool = True
  wavelength_range: tuple[float, float] = (0.5, 4.0)
  sigma_range: tuple[float, float] = (0.5, 2.0)
  w_std: float = 0.02

  coords_mode: ClassVar[str] = "centered"

  def check(self):
    super().check()
    owner = type(self).__name__
    check_divisible("dim", self.dim, 1, "the embedding width", owner)
    if not (self.use_gabor or self.use_edge):
      raise ValueError(
        f"{owner}: use_gabor and use_edge are both False, which encodes "
        f"nothing; set one of them, or use the `none` encoding."
      )
    for name in ("wavelength_range", "sigma_range"):
      low, high = getattr(self, name)
      if not 0 < low <= high:
        raise ValueError(
          f"{owner}: `{name}`=({low}, {high}) must satisfy 0 < low <= high; "
          f"pass e.g. {name}=(0.5, 2.0)."
        )

  @nn.compact
  def __call__(self, coords: jnp.ndarray) -> jnp.ndarray:
    check_last_dim("coords", coords, 2, type(self).__name__)
    d = self.dim
    params = {"bias": self.param("bias", nn.initializers.zeros, (d,))}
    if self.use_gabor:
      params["lam"] = self.param("lam", uniform_init(*self.wavelength_range), (2, d))
      params["sigma"] = self.param("sigma", uniform_init(*self.sigma_range), (2, d))
      params["psi"] = self.param("psi", uniform_init(-math.pi, math.pi), (2, d))
      params["w_gabor"] = self.param("w_gabor", nn.initializers.normal(self.w_std), (2, d))
    if self.use_edge:
      params["w_edge"] = self.param("w_edge", nn.initializers.normal(self.w_std), (4, d))
    return gabor_edge(jnp.asarray(coords, jnp.float32), params)


W_STD = ("w_std", 0.02)  # the projection's init std: the scale knob, as a learned table's
ENCODINGS = (
  Registration(
    "gabor",
    functools.partial(GaborEdge, use_gabor=True, use_edge=False),
    labels=("Gabor",),
    knob=W_STD,
  ),
  Registration(
    "edge",
    functools.partial(GaborEdge, use_gabor=False, use_edge=True),
    labels=("Edge",),
    knob=W_STD,
  ),
  Registration(
    "gabor_edge",
    functools.partial(GaborEdge, use_gabor=True, use_edge=True),
    labels=("Gabor+edge",),
    knob=W_STD,
  ),
)
