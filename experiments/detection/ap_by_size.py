"""ap_by_size.png of the detection report: AP against test image size, one line per encoding,
one panel per protocol (`report.write` draws it)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from experiments import stats  # noqa: E402
from experiments.detection import report  # noqa: E402


def draw(results: dict, path: str) -> None:
  """AP against test image size, one line per encoding, one panel per protocol; a second row
  of panels as tuned where the sweep chose values other than the defaults."""
  picks = report.chosen(results)
  tuned = lambda p, x: report.readings(results, p, x, picks)[1:]  # noqa: E731
  rows = ["defaults"] + ["tuned"] * any(tuned(p, x) for p in report.PROTOCOLS for x in report.NAMES)
  fig, axes = plt.subplots(len(rows), 2, figsize=(9, 3.5 * len(rows)), sharey=True, squeeze=False)
  for row, reading in zip(axes, rows, strict=True):
    for ax, protocol in zip(row, report.PROTOCOLS, strict=True):
      for posemb, name in report.NAMES.items():
        readings = report.readings(results, protocol, posemb, picks)
        label, runs = (
          (readings[-1] if reading == "tuned" else readings[0]) if readings else ("", [])
        )
        sizes = [s for s in report.SIZES if runs and str(s) in runs[0]["by_size"]]
        if not sizes:
          continue
        found = [
          stats.interval([r["by_size"][str(s)]["AP"] for r in runs], scale=100) for s in sizes
        ]
        mean, half = np.array(found).T
        half = np.nan_to_num(half)
        low, high = mean - np.clip(mean - half, 0, 100), np.clip(mean + half, 0, 100) - mean
        ax.errorbar(sizes, mean, yerr=[low, high], marker="o", capsize=3, label=name + label)
      title = f"protocol {protocol}" + ", each tuned" * (reading == "tuned")
      ax.set(title=title, xlabel="test image side (px, square)", xticks=report.SIZES)
      if protocol == "heldout":
        ax.axvspan(52, 68, color="0.9", zorder=0)  # never a shorter side in training
    row[0].set_ylabel("AP (%), 95 % CI over seeds")  # bars clipped to [0, 100]
    for ax in row if reading == "tuned" else row[:1]:  # tuned: each protocol's own choices
      ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.13))  # above the control
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
