"""Runs the controlled position-embedding studies (003 Tables 1-4, Figs. 3, 5; 000; 004).

  python -m experiments.position_study.run --quick --out=/tmp/position_quick   # CI, < 5 min
  python -m experiments.position_study.run --out=experiments/position_study    # the record

Writes `results.json` (every score, per seed, with provenance), `tables.md` (ours beside
the papers'), `claims.json` and the PNG figures into `--out`. `--parts` picks parts
(default: all, in order); see plan.py. A re-run keeps the `results.json` in `--out` and runs
only the configurations it lacks (a stopped run loses only the configuration it was
training); `--restart` discards it. `--status` prints what is done and left, with an ETA.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tensorflow_datasets as tfds

from experiments import cli, provenance
from experiments.position_study import parts, plan, report
from lfpe.errors import ConfigError

RUNNERS = {
  "speed": parts.speed,
  "pretrain": parts.pretrain,
  "tables": parts.tables,
  "curves": parts.curves,
  "ablation": parts.ablation,
  "gabor": parts.gabor,
  "defaults": parts.defaults,
}


def parse(argv: list[str]) -> argparse.Namespace:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="tiny sizes: a test of the pipeline")
  parser.add_argument("--out", default="experiments/position_study")
  parser.add_argument("--data_dir", default=os.path.expanduser("~/tensorflow_datasets"))
  parser.add_argument("--parts", default=",".join(RUNNERS), help="comma-separated parts")
  parser.add_argument(
    "--restart", action="store_true", help="discard --out/results.json and run everything"
  )
  parser.add_argument("--status", action="store_true", help="print what is done and left")
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


def status(results: dict, mode: plan.Mode, names: list[str]) -> dict[str, tuple[int, int]]:
  """Prints, per section, configurations done of those planned and an ETA (each part's own
  seconds per configuration so far, else the mean over all parts); returns `{section:
  (done, planned)}`."""
  part = lambda section: section.split("_")[0]
  counts = {
    section: (sum(k in results.get(section, {}) for k in keys), len(keys))
    for section, keys in plan.expected(mode).items()
    if part(section) in names
  }
  timing = results.get("timing", {})
  done_in = lambda p: sum(d for s, (d, _) in counts.items() if part(s) == p)
  rates = {
    p: timing[p] / done_in(p) for p in {part(s) for s in counts} if p in timing and done_in(p)
  }
  mean_rate = sum(timing.get(p, 0.0) for p in rates) / max(sum(map(done_in, rates)), 1)
  left_s = 0.0
  for section, (done, planned) in counts.items():
    left_s += (planned - done) * rates.get(part(section), mean_rate)
    print(f"{section:14s} {done:3d} of {planned:3d} done")
  total_done = sum(d for d, _ in counts.values())
  total = sum(n for _, n in counts.values())
  eta = f", about {left_s / 60:.0f} min left at the speed so far" if left_s else ""
  print(f"{total_done} of {total} configurations done{eta}.")
  return counts


def main(argv: list[str] | None = None) -> dict:
  args = parse(sys.argv[1:] if argv is None else argv)
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "results.json")
  previous = {}
  if os.path.exists(path) and not args.restart:
    with open(path) as f:
      previous = json.load(f)
  name = "quick" if args.quick else "full"
  if args.report_only or args.status:
    if args.status:
      made = previous.get("mode", name)
      if made != name:
        print(f"(--out={args.out} was made {'with' if made == 'quick' else 'without'} --quick)")
      status(previous, plan.QUICK if made == "quick" else plan.FULL, args.parts.split(","))
    else:
      report.write(previous, args.out)
    return previous
  mode = plan.QUICK if args.quick else plan.FULL
  if previous.get("mode", name) != name:
    raise ConfigError(
      f"{path} holds a --{previous['mode']} study; use another --out, or --restart to discard it."
    )
  tfds.disable_progress_bar()
  log = lambda msg: print(msg, flush=True)
  stamp = provenance.run_provenance()
  provenance.warn_if_unfit_for_a_record(stamp)
  study = parts.Study(mode, args.out, args.data_dir, log, stamp)
  study.results = previous or study.results
  study.results.setdefault("timing", {})
  study.results["mode"] = name
  argv = sys.argv[1:] if argv is None else argv
  study.results["provenance"] = provenance.provenance(["python", "-m", __spec__.name, *argv])
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
  cli.run(main)
