"""lfpe.encodings: every positional encoding, one coordinate convention.

`create(spec, **kwargs)` returns the flax.linen module of an encoding spec (a name,
`"name(option=value, ...)"` or a dict with a `name`); `build(spec, dim=..., grid_shape=...,
num_heads=..., head_dim=...)` does the same but passes each module only the model context
it takes (what models use); `options(name)` lists what an encoding takes; `info(name)` its
kind and capabilities. Each encoding module declares its names once (`ENCODINGS`); the
registry finds them, and this package exports every registered class. See registry.py.
"""

from __future__ import annotations

from lfpe.encodings import coords
from lfpe.encodings.base import KINDS, AbsoluteEncoding, Registration
from lfpe.encodings.fourier import fourier_features
from lfpe.encodings.registry import (
  ALIASES,
  NAMES,
  REGISTRATIONS,
  REGISTRY,
  augment_refusal,
  build,
  check_options,
  create,
  display_name,
  info,
  kind,
  knob,
  mixed_size_problem,
  module_classes,
  options,
  packed_refusal,
  parse,
  resolve,
  spec,
  with_options,
)
from lfpe.encodings.resample import resample
from lfpe.encodings.sinusoidal import sincos_1d, sincos_nd

# The linen class of every registered encoding (LearnableFourierMLP, SineND, Rotary2D, ...).
CLASSES = {cls.__name__: cls for cls in module_classes()}
globals().update(CLASSES)

__all__ = [
  "ALIASES",
  "KINDS",
  "NAMES",
  "REGISTRATIONS",
  "REGISTRY",
  "AbsoluteEncoding",
  "Registration",
  "augment_refusal",
  "build",
  "check_options",
  "coords",
  "create",
  "display_name",
  "knob",
  "fourier_features",
  "info",
  "kind",
  "mixed_size_problem",
  "packed_refusal",
  "module_classes",
  "options",
  "parse",
  "resample",
  "resolve",
  "sincos_1d",
  "sincos_nd",
  "spec",
  "with_options",
  *sorted(CLASSES),
]
