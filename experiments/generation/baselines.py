"""How much position alone tells about a digit pixel: bits per dim with no context at all.

  python -m experiments.generation.baselines

Predicts each test pixel of `digit_images/16x16` from the training images' histogram of grey
levels (add-one smoothed) over all pixels, and from the histogram at the pixel's own position;
the gap is what position alone is worth, before any context (the README's "Status").
"""

from __future__ import annotations

import numpy as np

from lfpe.data import digit_images, digits


def histogram_bits(size: int = 16) -> dict[str, float]:
  """Held-out bits per dim of the all-pixel and the per-position level histograms."""
  images, labels = digit_images.images(size)
  split = digits.split_indices(labels)
  train, test = (images[split[s], ..., 0].reshape(len(split[s]), -1) for s in ("train", "test"))
  levels = digit_images.LEVELS
  pooled = np.bincount(train.ravel(), minlength=levels) + 1.0
  per_position = np.stack([np.bincount(col, minlength=levels) for col in train.T]) + 1.0
  pooled, per_position = pooled / pooled.sum(), per_position / per_position.sum(1, keepdims=True)
  where = np.arange(test.shape[1])[None]
  return {
    "all pixels": float(-np.mean(np.log2(pooled[test]))),
    "per position": float(-np.mean(np.log2(per_position[where, test]))),
  }


if __name__ == "__main__":
  for name, bits in histogram_bits().items():
    print(f"{name}: {bits:.3f} bits/dim")
