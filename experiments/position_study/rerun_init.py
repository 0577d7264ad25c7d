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

from experiments.position_study import plan
from experiments.stats import fmt
from lfpe.studies import sweep

ROWS = [(t, e) for t in ("direction", "color_shift") for e in ("embed_1d", "fourier", "gabor_edge")]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default="experiments/position_study")
  parser.add_argument("--data_dir", default=os.path.expanduser("~/tensorflow_datasets"))
  args = parser.parse_args()
  recorded = json.load(open(os.path.join(args.out, "results.json")))["tables"]
  mode, rows, lines = plan.FULL, {}, []
  for task, enc in ROWS:
    workdir = os.path.join(args.out, "runs", "rerun_init", task, enc)
    result = sweep.run(
      sweep.Config(task, enc), range(mode.seeds), mode.spec, args.data_dir, workdir
    )
    rows[f"{task}/{enc}"] = result.summary()
    old = recorded[f"{task}/{enc}"]["test"]
    now = fmt(result.test, scale=100)
    lines.append(f"| {task} | `{enc}` | {fmt(old, scale=100)} % | {now} % |")
    print(lines[-1], flush=True)
  with open(os.path.join(args.out, "rerun_init.json"), "w") as f:
    json.dump(rows, f, indent=1)
  print("| task | encoding | recorded (REDRAW) | rerun (visible options) |")
  print("|---|---|---|---|")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
