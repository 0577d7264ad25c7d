"""results.json, claims.json and the figure of the similarity record (002 Fig. 2)."""

from __future__ import annotations

import json
import os

from experiments import claims as claims_table
from experiments import stats
from lfpe.analysis import plot_similarity_maps

NOTHING_TRAINS = "none: nothing trains (encodings at init, γ = 4 as in the figure)"


def claims(results: dict) -> list[dict]:
  """002 Fig. 2's two statements, over the init seeds of Learnable-Fourier: (b)'s map
  approaches the Gaussian kernel as D grows (random features), and (a) Sine-2D is more
  anisotropic than (b) at the figure's D (|anisotropy|, paired: Sine-2D has no draw)."""
  small, big = sorted(results["fourier"], key=int)[0], max(results["fourier"], key=int)
  sine = abs(results["sine_2d"][big]["anisotropy"])
  fourier = [abs(m["anisotropy"]) for m in results["fourier"][big]]
  return [
    stats.claim(
      paper="002",
      item="Fig. 2b",
      text="Learnable-Fourier at init approximates ½·exp(−‖x−y‖²/(2γ²)): its RMS distance "
      f"from the kernel shrinks from D = {small} to D = {big}",
      metric="RMS distance from the kernel",
      a=f"fourier D={small}",
      b=f"fourier D={big}",
      a_values=[m["kernel_rms"] for m in results["fourier"][small]],
      b_values=[m["kernel_rms"] for m in results["fourier"][big]],
      tuned=NOTHING_TRAINS,
    ),
    stats.claim(
      paper="002",
      item="Fig. 2a-b",
      text="Sine-2D's similarity depends on the direction of an offset; Learnable-Fourier's "
      "is isotropic (the size of axis − diagonal similarity at distance 5, share of the "
      f"centre's, D = {big})",
      metric="absolute anisotropy",
      a="sine_2d",
      b="fourier",
      a_values=[sine] * len(fourier),
      b_values=fourier,
      paired=True,
      tuned=NOTHING_TRAINS,
    ),
  ]


def write(results: dict, maps: dict, out: str) -> None:
  """`out/results.json`, `out/claims.json` (and the README's verdict table), the figure."""
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
  claims_table.write(claims(results), out)
  dim = max(results["fourier"], key=int)
  plot_similarity_maps(
    maps,
    os.path.join(out, "fig2_similarity.png"),
    title=f"002 Fig. 2: similarity of the centre position (32x32 grid, D={dim}, "
    f"γ={results['gamma']})",
  )
