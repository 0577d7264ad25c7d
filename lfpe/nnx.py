"""Every encoding as a Flax NNX module: built with `rngs=`, parameters held as `nnx.Param`.

  from flax import nnx
  from lfpe import nnx as pe

  pos = pe.create("fourier(gamma=0.5)", dim=64, rngs=nnx.Rngs(0))  # any spec, or
  pos = pe.build("fourier(gamma=0.5)", dim=64, grid_shape=(8, 8), num_heads=4, rngs=...)
  pos = pe.LearnableFourierMLP(dim=64, gamma=0.5, rngs=nnx.Rngs(0))
  pos.grid((8, 8))                  # [64, 64]: the encoding of every cell, once per grid
  pos(pos.grid_coords((8, 8)))      # the same, from coordinates (any [..., M] array)

Each NNX class has the name, options, kind, `__call__`, `grid(shape)` and `grid_coords(shape)`
of its linen module (lfpe.encodings); one class per linen class, made from the registry, and
`create(spec, ...)` for every registered name and alias. The parameters are initialised at
construction (NNX's way) from `rngs.params()`, exactly as the linen module's `init` with that
key draws them, and the formulas are the linen module's own code (there is one implementation
of each), so the same parameters give the same numbers (tests/encodings/test_nnx.py checks
every registered name). Non-trainable variables (fixed_fourier_mlp's frequencies) are
`Constant`s, so `nnx.Optimizer(model, tx, wrt=nnx.Param)` leaves them alone.

Initialising needs an example: absolute and rotary encodings are built on a grid of
`init_shape` (default the spec's `grid_shape`, else 2 cells along each of `ndim` axes: the
shapes of their parameters do not depend on it); bias and logits encodings on `grid_shape`,
which they need anyway.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

from lfpe.encodings import registry


class Constant(nnx.Variable):
  """A variable that is not trained (a linen collection other than 'params')."""


class Encoding(nnx.Module):
  """An lfpe encoding (a linen module of lfpe.encodings) with its variables held by NNX."""

  def __init__(self, module: nn.Module, *, rngs: nnx.Rngs, init_shape: Sequence[int] | None = None):
    self.module = module
    self.kind = module.kind
    variables = _initial_variables(module, rngs.params(), init_shape)
    self.vars = nnx.data(
      {
        col: jax.tree.map(nnx.Param if col == "params" else Constant, tree)
        for col, tree in variables.items()
      }
    )

  def variables(self) -> dict[str, Any]:
    """The variables as linen holds them ({'params': {...}, ...}), e.g. for `module.apply`."""
    return jax.tree.map(lambda v: v[...], self.vars, is_leaf=lambda x: isinstance(x, nnx.Variable))

  def load(self, variables: dict[str, Any]) -> None:
    """Sets the variables from linen-style `variables` of the same structure and shapes (e.g.
    weights of the linen module, trained elsewhere); ValueError naming the first that differs
    (a table of another grid: resample it first, `module.resize_params`)."""
    is_var = lambda x: isinstance(x, nnx.Variable)
    owner = f"{type(self.module).__name__}.load"
    if jax.tree.structure(jax.tree.map(lambda v: 0, self.vars, is_leaf=is_var)) != (
      jax.tree.structure(jax.tree.map(lambda v: 0, variables))
    ):
      raise ValueError(f"{owner}: the variables do not have this module's tree.")
    ours = jax.tree_util.tree_flatten_with_path(self.variables())[0]
    for (path, mine), given in zip(ours, jax.tree.leaves(variables), strict=True):
      if jnp.shape(given) != mine.shape:
        raise ValueError(
          f"{owner}: {jax.tree_util.keystr(path)} has shape {jnp.shape(given)}, this module's "
          f"{mine.shape}; build the module with the options the variables were trained with, "
          "or resample a table to this grid first (the linen module's `resize_params`)."
        )
    jax.tree.map(
      lambda var, value: var.set_value(jnp.asarray(value)), self.vars, variables, is_leaf=is_var
    )

  def __call__(self, *args, **kwargs):
    return self.module.apply(self.variables(), *args, **kwargs)

  def grid(self, shape: Sequence[int]) -> jnp.ndarray:
    """`[prod(shape), D]`: the encoding of every cell of a row-major grid (absolute kinds;
    rotary ones rotate q and k, `pos(x, pos.grid_coords(shape), shape)`; bias and logits
    ones are called on the grid, `pos(shape)`)."""
    if not hasattr(type(self.module), "grid"):
      call = "pos(x, pos.grid_coords(shape), shape)" if self.kind == "rotary" else "pos(shape)"
      raise ValueError(
        f"{type(self).__name__}.grid: a {self.kind} encoding adds no vector per cell; call it "
        f"as {call}."
      )
    return self.module.apply(self.variables(), tuple(shape), method="grid")

  def grid_coords(self, shape: Sequence[int]) -> jnp.ndarray:
    """The coordinates this encoding reads for a grid of `shape` (absolute, rotary kinds)."""
    return self.module.grid_coords(tuple(shape))

  def packed(self, *inputs: jnp.ndarray) -> jnp.ndarray:
    """The linen module's `packed`, for NaFlex-packed batches (`index [B, L, M]` cells,
    `shape [B, M]` grids): absolute kinds `packed(index, shape) -> [B, L, D]`, each token's
    encoding in its own example's grid (tables resampled per example); bias kinds
    `packed(index, shape)` and `rel_attn_2d` `packed(q, index, shape)`: `[B, heads, L, L]`."""
    return self.module.apply(self.variables(), *inputs, method="packed")

  def packed_coords(self, index: jnp.ndarray, shape: jnp.ndarray) -> jnp.ndarray:
    """The coordinates each token of a packed batch reads in its own grid (see `packed`)."""
    return self.module.packed_coords(index, shape)


def _initial_variables(module: nn.Module, key: jax.Array, init_shape) -> dict[str, Any]:
  """`module.init` on an example of its kind (see the module docstring)."""
  shape = tuple(init_shape or getattr(module, "grid_shape", None) or ())
  if module.kind == "none":
    return {}
  if module.kind in ("absolute", "rotary"):  # parameters whatever the grid
    shape = shape or (2,) * (getattr(module, "ndim", None) or 2)
  if module.kind == "absolute":
    return module.init(key, shape, method="grid")
  if not shape:
    raise ValueError(
      f"{type(module).__name__} ({module.kind}) needs `grid_shape` (or `init_shape`) to be "
      "built in NNX: the grid of tokens it will see."
    )
  if module.kind == "bias":
    return module.init(key, shape)
  heads = getattr(module, "num_heads", None) or 1  # axial: any number of heads
  tokens = jnp.zeros((1, math.prod(shape), heads, module.head_dim))
  if module.kind == "logits":
    return module.init(key, tokens, shape)
  return module.init(key, tokens, module.grid_coords(shape), shape)  # rotary


def create(spec, *, rngs: nnx.Rngs, init_shape: Sequence[int] | None = None, **kwargs) -> Encoding:
  """The NNX module of encoding `spec` (a name, "name(option=value, ...)" or a dict), built
  with the spec's options and `kwargs`, like `lfpe.encodings.create`."""
  return Encoding(registry.create(spec, **kwargs), rngs=rngs, init_shape=init_shape)


def build(spec, *, rngs: nnx.Rngs, init_shape: Sequence[int] | None = None, **context) -> Encoding:
  """The NNX module of `spec` for a model: each encoding takes the `context` fields it
  declares (`dim`, `grid_shape`, `num_heads`, `head_dim`, ...), like `lfpe.encodings.build`."""
  return Encoding(registry.build(spec, **context), rngs=rngs, init_shape=init_shape)


def _nnx_class(linen_class: type) -> type:
  """The NNX class of `linen_class`: same name and options, `rngs=` to build it."""

  def __init__(self, *, rngs: nnx.Rngs, init_shape: Sequence[int] | None = None, **options):
    Encoding.__init__(self, linen_class(**options), rngs=rngs, init_shape=init_shape)

  doc = f"NNX {linen_class.__name__} (lfpe.encodings): options as there, `rngs=` to build it."
  return type(
    linen_class.__name__,
    (Encoding,),
    {"__init__": __init__, "__doc__": doc, "__module__": __name__},
  )


CLASSES = {cls.__name__: _nnx_class(cls) for cls in registry.module_classes()}
globals().update(CLASSES)
__all__ = ["Constant", "Encoding", "build", "create", *sorted(CLASSES)]
