"""The position part of a trained ViT: its table and its parameters.

The studies probe and plot the position embeddings a ViT learned (003 Table 2, Fig. 5) and
count the position parameters (000 Table 1); moving them between models is the trainer's
`init_from` (with `sweep.POSITIONS` / `sweep.NOT_POSITIONS` as `init_skip`). Everything here
reads the parameter tree of `lfpe.models.vit.ViT`: the encoder's encodings live under
`params['Transformer']['pos']` (stem, shared) or `['pos_0']`, `['pos_1']`, ... (one per
block).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from lfpe import encodings
from lfpe.models.vit import ViT, grid_shape
from lfpe.nn.positions import encoding_context

_ENC = "Transformer"


def grid(model: ViT) -> tuple[int, int]:
  """The patch grid `(H, W)` of `model` at its training image size."""
  size = model.image_size
  size = (size, size) if isinstance(size, int) else tuple(size)
  patch = model.patch_size
  return grid_shape(size, (patch, patch) if isinstance(patch, int) else patch, "image_size")


def is_position(path: tuple[str, ...]) -> bool:
  """Whether a parameter path belongs to a position encoding (`pos`, `pos_0`, ...)."""
  return len(path) > 1 and path[0] == _ENC and (path[1] == "pos" or path[1].startswith("pos_"))


def position_params(params: Any) -> dict[str, Any]:
  """The position subtrees of a ViT's params, keyed `pos`, `pos_0`, ..."""
  return {k: v for k, v in params[_ENC].items() if is_position((_ENC, k))}


def count(params: Any, seed_axis: bool = True) -> int:
  """Number of position parameters (per seed when the leaves carry a seed axis)."""
  leaves = jax.tree.leaves(position_params(params))
  return int(sum(np.prod(a.shape[1:] if seed_axis else a.shape) for a in leaves))


def table(model: ViT, params: Any, key: str = "pos") -> np.ndarray:
  """The `[H * W, D]` table that an absolute encoding adds to the patch tokens.

  `params` are one seed's parameters (no seed axis); the class-token row is left out.
  """
  if encodings.kind(model.posemb) != "absolute":
    raise ValueError(
      f"table: posemb={model.posemb!r} is not an absolute encoding; only "
      "absolute encodings have a table to probe or plot."
    )
  shape = grid(model)
  module = encodings.build(model.posemb, **encoding_context(model.width, shape, model.num_heads))
  variables = {"params": params[_ENC].get(key, {}).get("encoding", {})}  # fixed: no params
  return np.asarray(module.apply(variables, shape, method="grid"))


def tables(model: ViT, params: Any, key: str = "pos") -> np.ndarray:
  """`table` of every seed: `[S, H * W, D]`."""
  num_seeds = jax.tree.leaves(params)[0].shape[0]
  return np.stack(
    [table(model, jax.tree.map(lambda a, i=i: a[i], params), key) for i in range(num_seeds)]
  )
