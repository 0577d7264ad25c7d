"""Changing resolution from your own training loop: what lfpe's ViT and trainer do, as functions.

lfpe's trainer trains at several sizes (`config.data.train_sizes`) and its ViT perturbs the
coordinates of coordinate-based encodings while training (`model.coord_augment`). A user with
their own model and loop gets the same from here, on the core install (jax and flax only):

  size = resolution.draw_size((24, 32, 48), seed=0, step=step)    # one size per batch
  images = resolution.resize_batch(images, size)                   # nearest, as the trainer
  coords = resolution.train_coords(pos, grid, key, **coords.DINOV3)  # training only
  table = pos(coords)                                 # evaluation: pos.grid(grid) as always

`draw_size` is a function of (seed, step) only, so every host draws the same size and a
resumed run draws what the interrupted one would have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lfpe.encodings import coords as coords_lib


def draw_size(sizes: Sequence[int], seed: int, step: int) -> int:
  """The image size of training batch `step`: uniform over `sizes`, from (seed, step) alone."""
  if not sizes:
    raise ValueError("draw_size: give at least one size.")
  return int(sizes[np.random.default_rng([seed, step]).integers(len(sizes))])


def resize_batch(images: Any, size: int | Sequence[int], method: str = "nearest") -> jax.Array:
  """`images` `[B, H, W, C]` resized to `size` (int: square) with `jax.image.resize`
  (`nearest` repeats pixels exactly at integer factors, as lfpe's trainer resizes)."""
  h, w = (size, size) if isinstance(size, int) else tuple(size)
  images = jnp.asarray(images)
  if images.shape[1:3] == (h, w):
    return images
  return jax.image.resize(images, (images.shape[0], h, w, images.shape[3]), method)


def train_coords(encoding: Any, shape: Sequence[int], key: jax.Array, **augment: Any) -> jax.Array:
  """The coordinates `encoding` reads on a grid of `shape`, perturbed for training by
  `coords.augment` with `augment` ({shift, jitter, rescale, convention}, e.g.
  `coords.DINOV3`); evaluation reads `encoding.grid_coords(shape)` unperturbed."""
  options = coords_lib.check_augment(augment, "train_coords")
  grid = encoding.grid_coords(tuple(shape))
  return coords_lib.augment(grid, key, **options, num_positions=tuple(shape))
