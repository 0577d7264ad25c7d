"""Runs the controlled position-embedding studies (003 Tables 1-4, Figs. 3, 5; 000; 004).

  python -m experiments.position_study.run --quick --out=/tmp/position_quick   # CI, < 5 min
  python -m experiments.position_study.run --out=experiments/position_study    # the record

Writes `results.json` (every score, per seed), `tables.md` (ours beside the papers') and
the PNG figures into `--out`. `--parts` picks parts (default: all, in order); see plan.py.
`--resume` keeps an earlier `results.json` in `--out` and runs only the configurations it
lacks (a stopped run loses only the configuration it was training).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tensorflow_datasets as tfds

from experiments.position_study import parts, plan, report
from experiments.provenance import provenance

RUNNERS = {
  "speed": parts.speed,
  "pretrain": parts.pretrain,
  "tables": parts.tables,
  "curves": parts.curves,
  "ablation": parts.ablation,
  "gabor": parts.gabor,
}


def parse(argv: list[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="tiny sizes: a test of the pipeline")
  parser.add_argument("--out", default="experiments/position_study")
  parser.add_argument("--data_dir", default=os.path.expanduser("~/tensorflow_datasets"))
  parser.add_argument("--parts", default=",".join(RUNNERS), help="comma-separated parts")
  parser.add_argument(
    "--strategy",
    default="vmap",
    choices=("vmap", "map", "loop"),
    help="how seeds run: one vmapped program, lax.map, or one by one",
  )
  parser.add_argument(
    "--resume", action="store_true", help="keep --out/results.json and run only what it lacks"
  )
  parser.add_argument(
    "--report_only",
    action="store_true",
    help="rewrite tables and figures from an existing --out/results.json",
  )
  args = parser.parse_args(argv)
  unknown = set(args.parts.split(",")) - set(RUNNERS)
  if unknown:
    parser.error(f"--parts: unknown {sorted(unknown)}; choose from {list(RUNNERS)}")
  return args


def main(argv: list[str] | None = None) -> dict:
  args = parse(sys.argv[1:] if argv is None else argv)
  os.makedirs(args.out, exist_ok=True)
  if args.report_only:
    with open(os.path.join(args.out, "results.json")) as f:
      results = json.load(f)
    report.write(results, args.out)
    return results
  mode = plan.QUICK if args.quick else plan.FULL
  tfds.disable_progress_bar()
  log = lambda msg: print(msg, flush=True)
  study = parts.Study(mode, args.out, args.data_dir, args.strategy, log)
  if args.resume and os.path.exists(os.path.join(args.out, "results.json")):
    with open(os.path.join(args.out, "results.json")) as f:
      study.results = json.load(f)
    study.results.setdefault("timing", {})
  argv = sys.argv[1:] if argv is None else argv
  study.results["provenance"] = provenance(["python", "-m", __spec__.name, *argv])
  study.results.setdefault("commands", []).append(study.results["provenance"]["command"])
  for name in args.parts.split(","):
    log(f"[{name}]")
    study.begin(name)
    RUNNERS[name](study)
    study.tick()
  study.results["timing"]["total"] = sum(
    v for k, v in study.results["timing"].items() if k != "total"
  )
  with open(os.path.join(args.out, "results.json"), "w") as f:
    json.dump(study.results, f, indent=1)
  report.write(study.results, args.out)
  log(f"done in {study.results['timing']['total']:.0f}s; tables in {args.out}/tables.md")
  return study.results


if __name__ == "__main__":
  main()
