"""lfpe.encodings: every positional encoding, one coordinate convention.

`create(spec, **kwargs)` returns the flax.linen module of an encoding spec (a name,
`"name(option=value, ...)"` or a dict with a `name`); `build(spec, dim=..., grid_shape=...,
num_heads=..., head_dim=...)` does the same but passes each module only the model context
it takes (what models use); `options(name)` lists what an encoding takes. See registry.py.
"""

from __future__ import annotations

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
from lfpe.encodings.registry import (
  ALIASES,
  NAMES,
  REGISTRY,
  build,
  check_options,
  create,
  kind,
  options,
  parse,
  resolve,
  spec,
)
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

__all__ = [
  "ALIASES",
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
  "check_options",
  "coords",
  "create",
  "fourier_features",
  "kind",
  "options",
  "parse",
  "resample",
  "resolve",
  "sincos_1d",
  "sincos_nd",
  "spec",
]
