"""lfpe.encodings: every positional encoding, one coordinate convention.

`create(name, **kwargs)` returns the flax.linen module registered under `name`;
`build(name, dim=..., grid_shape=..., num_heads=..., head_dim=...)` does the same
but passes each module only the arguments it takes (what models use).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from lfpe.encodings import coords
from lfpe.encodings.base import KINDS, AbsoluteEncoding
from lfpe.encodings.fourier import (
  FourierFeatures,
  LearnableFourierMLP,
  PositionMLP,
  fourier_features,
)
from lfpe.encodings.gabor import GaborEdge
from lfpe.encodings.intuitive import Intuitive
from lfpe.encodings.learned import Embed1D, EmbedND
from lfpe.encodings.none import NoPosition
from lfpe.encodings.relative import RelativeAttention2D, RelativeBias2D
from lfpe.encodings.resample import resample
from lfpe.encodings.rotary import Rotary2D
from lfpe.encodings.sinusoidal import (
  DetrSine,
  LearnableSinusoidal,
  Sine1D,
  SineND,
  sincos_1d,
  sincos_nd,
)

_p = functools.partial

REGISTRY: dict[str, Callable] = {
  "fourier": LearnableFourierMLP,
  "fourier_no_mlp": FourierFeatures,
  "fixed_fourier_mlp": _p(LearnableFourierMLP, trainable_wr=False),
  "mlp": PositionMLP,
  "sine_1d": Sine1D,
  "sine_nd": SineND,
  "detr_sine": DetrSine,
  "embed_1d": Embed1D,
  "embed_nd": EmbedND,
  "learnable_sine": LearnableSinusoidal,
  "gabor": _p(GaborEdge, use_gabor=True, use_edge=False),
  "edge": _p(GaborEdge, use_gabor=False, use_edge=True),
  "gabor_edge": _p(GaborEdge, use_gabor=True, use_edge=True),
  "index": _p(Intuitive, code="index"),
  "unit": _p(Intuitive, code="unit"),
  "binary": _p(Intuitive, code="binary"),
  "rel_bias_2d": RelativeBias2D,
  "rel_attn_2d": RelativeAttention2D,
  "rope_axial": _p(Rotary2D, mode="axial"),
  "rope_mixed": _p(Rotary2D, mode="mixed"),
  "none": NoPosition,
}
ALIASES = {
  "sine_2d": "sine_nd",
  "sine_4d": "sine_nd",
  "embed_2d": "embed_nd",
  "embed_4d": "embed_nd",
  "learnable_fourier_mlp": "fourier",
}
NAMES = tuple(sorted([*REGISTRY, *ALIASES]))


def resolve(name: str) -> Callable:
  """The module factory registered under `name` (or an alias of it)."""
  if name not in REGISTRY and name not in ALIASES:
    raise ValueError(f"Unknown positional encoding {name!r}; valid names: {', '.join(NAMES)}.")
  return REGISTRY[ALIASES.get(name, name)]


def kind(name: str) -> str:
  """Where the encoding registered under `name` enters a model (see base.KINDS)."""
  factory = resolve(name)
  return getattr(factory, "func", factory).kind


def create(name: str, **kwargs):
  """The flax.linen module for encoding `name`, built with `kwargs`."""
  return resolve(name)(**kwargs)


def build(name: str, **context):
  """Like `create`, passing each module only the fields it declares.

  Models call this with everything they know (`dim`, `grid_shape`, `num_heads`,
  `head_dim`, `ndim`, ...); explicit per-encoding options go in the same dict.
  """
  factory = resolve(name)
  cls = getattr(factory, "func", factory)
  fields = {f.name for f in dataclasses.fields(cls)} - {"parent", "name"}
  return factory(**{k: v for k, v in context.items() if k in fields})


__all__ = [
  "KINDS",
  "NAMES",
  "REGISTRY",
  "AbsoluteEncoding",
  "DetrSine",
  "Embed1D",
  "EmbedND",
  "FourierFeatures",
  "GaborEdge",
  "Intuitive",
  "LearnableFourierMLP",
  "LearnableSinusoidal",
  "NoPosition",
  "PositionMLP",
  "RelativeAttention2D",
  "RelativeBias2D",
  "Rotary2D",
  "Sine1D",
  "SineND",
  "build",
  "coords",
  "create",
  "fourier_features",
  "kind",
  "resample",
  "resolve",
  "sincos_1d",
  "sincos_nd",
]
