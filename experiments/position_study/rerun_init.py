"""Re-runs the table rows whose numbers depend on the study's initial scales.

The scales moved from a parameter-path table (`REDRAW`) to visible options
(`sweep.POSITION_INIT`, `BASE_MODEL["head_init_std"]`): same distributions, new random
draws. This trains the rows where the scales decided the outcome (003 Tables 1 and 3 on
`direction` and `color_shift` for `embed_1d`, `fourier` and `gabor_edge`) at full scale
and prints them beside the recorded ones (mean ± 95 % CI over seeds).

  python -m experiments.position_study.rerun_init --out=experiments/position_study
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import scipy.stats

from experiments.position_study import plan
from lfpe.studies import sweep

ROWS = [(t, e) for t in ("direction", "color_shift") for e in ("embed_1d", "fourier", "gabor_edge")]


def interval(values) -> str:
  """`mean ± half-width` of the 95 % t-interval, in percent."""
  x = 100 * np.asarray(values, np.float64)
  half = scipy.stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
  return f"{x.mean():.1f} ± {half:.1f} %"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default="experiments/position_study")
  parser.add_argument("--data_dir", default=os.path.expanduser("~/tensorflow_datasets"))
  args = parser.parse_args()
  recorded = json.load(open(os.path.join(args.out, "results.json")))["tables"]
  mode, rows, lines = plan.FULL, {}, []
  for task, enc in ROWS:
    result = sweep.run(sweep.Config(task, enc), range(mode.seeds), mode.spec, args.data_dir)
    rows[f"{task}/{enc}"] = result.summary()
    old = recorded[f"{task}/{enc}"]["test"]
    lines.append(f"| {task} | `{enc}` | {interval(old)} | {interval(result.test)} |")
    print(lines[-1], flush=True)
  with open(os.path.join(args.out, "rerun_init.json"), "w") as f:
    json.dump(rows, f, indent=1)
  print("| task | encoding | recorded (REDRAW) | rerun (visible options) |")
  print("|---|---|---|---|")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
