"""Similarity of one position to all others (002 Fig. 2, 003 Fig. 5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lfpe.extras import require


def similarity_map(
  table: np.ndarray, shape: Sequence[int], index: Sequence[int] | None = None, metric: str = "dot"
) -> np.ndarray:
  """Similarity of the position at grid `index` to every position, `shape`-shaped.

  Args:
    table: `[prod(shape), D]` encodings of a row-major grid (e.g. `module.grid(shape)`).
    shape: the grid shape.
    index: the reference cell; the centre `(n // 2 for n in shape)` by default.
    metric: `dot` (002 Fig. 2: the dot product attention sees) or `cosine` (003 Fig. 5).
  """
  table = np.asarray(table, dtype=np.float64)
  shape = tuple(shape)
  if table.ndim != 2 or table.shape[0] != int(np.prod(shape)):
    raise ValueError(f"table must be [prod(shape)={int(np.prod(shape))}, D], got {table.shape}.")
  if metric not in ("dot", "cosine"):
    raise ValueError(f"metric={metric!r}: use 'dot' or 'cosine'.")
  index = tuple(n // 2 for n in shape) if index is None else tuple(index)
  if metric == "cosine":
    table = table / np.maximum(np.linalg.norm(table, axis=-1, keepdims=True), 1e-12)
  ref = table[np.ravel_multi_index(index, shape)]
  return (table @ ref).reshape(shape)


def plot_similarity_maps(maps: Mapping[str, np.ndarray], path: str, title: str = "") -> None:
  """Plots 2-D similarity maps side by side and writes a PNG to `path`."""
  matplotlib = require("matplotlib", "experiments", "Plotting")
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, len(maps), figsize=(4 * len(maps), 3.6), squeeze=False)
  for ax, (name, sim) in zip(axes[0], maps.items(), strict=True):
    im = ax.imshow(sim, cmap="viridis")
    ax.set_title(name)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
