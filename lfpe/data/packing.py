"""NaFlex packing of batches (`data.naflex`): images of several sizes and aspect ratios in one
fixed-length batch of patch tokens (`lfpe.resolution.pack`), for training and evaluation."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from lfpe import resolution
from lfpe.data import config, image_ops


def pack_batch(batch: dict, naflex: config.NaFlex, sizes: Sequence | None = None) -> dict:
  """`batch` with its images packed (`resolution.pack`), each first resized (bilinear) to
  its entry of `sizes` (None: packed at their own size)."""
  images = list(batch["image"])
  if sizes is not None:
    images = [image_ops.resize_image(x, s, "bilinear") for x, s in zip(images, sizes, strict=True)]
  patch = (naflex.patch, naflex.patch)
  return {**batch, "image": resolution.pack(images, patch, naflex.max_tokens)}


def eval_naflex(resolved: config.Resolved, example: dict[str, Any]) -> config.NaFlex | None:
  """How the evaluation batches of `resolved` are packed: `data.naflex`, its budget grown to
  the grid of the evaluated images (`example`'s, one transformed example: in whole patches,
  rounded up), so that an evaluation past the training budget is scored at its own size, not
  shrunk. A dataset whose images vary in size (no `image_size`, no native shape) keeps the
  training budget. `resolution.pack` keeps an image of whole patches as it is and resizes
  any other to fill the budget (NaFlex's rule). None without `data.naflex`."""
  naflex = resolved.naflex
  if naflex is None or (resolved.image_size is None and resolved.spec.image_shape is None):
    return naflex
  return grown(naflex, example["image"].shape[:2])


def grown(naflex: config.NaFlex, image_hw: Sequence[int]) -> config.NaFlex:
  """`naflex` with its budget grown to the grid of an image of `image_hw` (in whole patches,
  rounded up) where that is larger."""
  tokens = math.prod(math.ceil(s / naflex.patch) for s in image_hw)
  return dataclasses.replace(naflex, max_tokens=max(naflex.max_tokens, tokens))
