"""ap_by_size.png of the detection report: AP against test image size, one line per encoding,
one panel per protocol, a second row as tuned (`report.ap_curves` gives the lines)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def draw(curves: dict[str, dict[str, list]], sizes: tuple[int, ...], path: str) -> None:
  """`curves` (`{reading: {protocol: [(label, sizes, [(mean, half)])]}}`) as one row of panels
  per reading, `sizes` the x ticks; intervals clipped to [0, 100]."""
  readings = list(curves)
  fig, axes = plt.subplots(
    len(readings), 2, figsize=(9, 3.5 * len(readings)), sharey=True, squeeze=False
  )
  for row, reading in zip(axes, readings, strict=True):
    for ax, (protocol, lines) in zip(row, curves[reading].items(), strict=True):
      for label, at, found in lines:
        mean, half = np.array(found).T
        half = np.nan_to_num(half)
        low, high = mean - np.clip(mean - half, 0, 100), np.clip(mean + half, 0, 100) - mean
        ax.errorbar(at, mean, yerr=[low, high], marker="o", capsize=3, label=label)
      title = f"protocol {protocol}" + ", each tuned" * (reading == "tuned")
      ax.set(title=title, xlabel="test image side (px, square)", xticks=sizes)
      if protocol == "heldout":
        ax.axvspan(52, 68, color="0.9", zorder=0)  # never a shorter side in training
    row[0].set_ylabel("AP (%), 95 % CI over seeds")
    for ax in row if reading == "tuned" else row[:1]:  # tuned: each protocol's own choices
      ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.13))  # above the control
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
