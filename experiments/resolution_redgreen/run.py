"""Resolution benchmark, first edition (archived): red-green squares, 32 px to 16-96 px (issue 23).

  python -m experiments.resolution_redgreen.run --quick --out=/tmp/resolution_quick  # CI, < 5 min
  python -m experiments.resolution_redgreen.run --out=experiments/resolution_redgreen  # the record
  python -m experiments.resolution_redgreen.run --status --out=experiments/resolution_redgreen

Trains each arm of `plan.py` (an encoding with its training-time choices) on each red-green
task of `--tasks` (`configs/vit_redgreen.py`: the position study's 1-block ViT), `--seeds`
seeds, through the one trainer (one workdir per run under `--out/runs`; a re-run reads
finished runs and resumes interrupted ones), and tests every run at each size of
`plan.TEST_SIZES` under each policy of its arm: named evaluations of the run's config
(`plan.evals`), run by the trainer at the last step. `report.py` writes
`results.json` (with provenance), `leaderboard.md`, `accuracy_vs_size.png` and `claims.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from configs import vit_redgreen
from experiments import cli, progress, runs
from experiments.provenance import provenance
from experiments.resolution.plan import policy_and_size
from experiments.resolution_redgreen import plan, report
from lfpe import encodings
from lfpe.studies import sweep
from lfpe.train import trainer


def slug(text: str) -> str:
  return text.replace(" ", "_").replace("+", "plus_")


def load_config(arm: plan.Arm, task: str, seed: int, quick: bool):
  """configs/vit_redgreen.py for one arm, task and seed, with its evaluations at every test
  size under each of the arm's policies."""
  config = vit_redgreen.get_config(f"task={task},small={int(quick)}")
  runs.for_run(config, seed=seed)
  posemb = sweep.Config(task, encodings.with_options(arm.posemb, **arm.options)).model_config()
  with config.unlocked():
    config.model.posemb = posemb["posemb"]  # with the study's initial scales (POSITION_INIT)
    config.model.update(arm.model)
    if arm.train_sizes:
      config.data.train_sizes = arm.train_sizes
    config.evals = plan.evals(arm, config.model.posemb, test_sizes(quick))
  return config


def test_sizes(quick: bool) -> tuple[int, ...]:
  return (16, 32, 64) if quick else plan.TEST_SIZES


def plan_runs(args: argparse.Namespace) -> list[tuple[runs.Run, plan.Arm, str]]:
  """Every (run, arm, task), seed-major: a stopped record holds whole seeds."""
  out = []
  for seed in range(args.seeds):
    for task in args.tasks:
      for arm in plan.arms(args.quick):
        if args.arms and arm.name not in args.arms:
          continue
        key = f"{task}/{arm.name}/{seed}"
        workdir = os.path.join(args.out, "runs", task, slug(arm.name), str(seed))
        out.append((runs.Run(key, load_config(arm, task, seed, args.quick), workdir), arm, task))
  return out


def _scored(entry: dict, name: str) -> bool:
  policy, size = policy_and_size(name)
  return size in entry["scores"].get(policy, {})


def parse(argv: list[str]) -> argparse.Namespace:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="3 arms, a few steps: CI")
  parser.add_argument("--out", default="experiments/resolution_redgreen")
  cli.add_seeds_flag(parser, default=plan.SEEDS)
  parser.add_argument("--tasks", default=",".join(plan.TASKS))
  parser.add_argument("--arms", default="", help="comma-separated arm names (default: all)")
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  cli.settle_mode(args)
  args.tasks = args.tasks.split(",")
  args.arms = [a for a in args.arms.split(",") if a]
  unknown = set(args.arms) - {a.name for a in plan.arms(args.quick)}
  if unknown:
    parser.error(f"--arms: unknown {sorted(unknown)}; see experiments/resolution_redgreen/plan.py")
  if args.quick:
    args.seeds, args.tasks = 2, args.tasks[:1]
  return args


def main(argv: list[str] | None = None) -> dict:
  argv = sys.argv[1:] if argv is None else argv
  args = parse(argv)
  planned = plan_runs(args)
  path = os.path.join(args.out, "results.json")
  results = runs.load(path) or {"runs": {}}
  if args.status:
    progress.status([run for run, _, _ in planned], results["runs"], jobs=args.jobs)
    return {}
  os.makedirs(args.out, exist_ok=True)
  results["provenance"] = provenance(["python", "-m", __spec__.name, *argv])
  sizes = test_sizes(args.quick)
  arms = {run.key: (arm, task) for run, arm, task in planned}

  def score(run: runs.Run, summary: dict, entry: dict | None = None) -> dict:
    """The run's accuracy at every size under each policy of its arm, from its summary; an
    evaluation it lacks (a policy or size added later) runs on the trained run, nothing
    retrains."""
    arm, task = arms[run.key]
    entry = entry or {"task": task, "arm": arm.name, "seed": run.config.seed, "scores": {}}
    metrics = {split: m for split, m in summary.items() if split.startswith("eval/")}
    missing = [
      name
      for name in run.config.evals
      if f"eval/{name}" not in metrics and not _scored(entry, name)
    ]
    if missing:
      metrics.update(trainer.evaluate_all(runs.only_evals(run.config, missing), run.workdir))
      print(f"{run.key}: scored {', '.join(missing)}", flush=True)
    for policy in arm.policies:
      for size in sizes:
        found = metrics.get(f"eval/{plan.eval_name(policy, size)}")
        if found is not None:
          entry["scores"].setdefault(policy, {})[str(size)] = found["accuracy"]
    return entry

  def save(done: dict) -> None:
    with open(path, "w") as f:
      json.dump({**results, "runs": done}, f, indent=1)

  done = runs.execute([run for run, _, _ in planned], results["runs"], score, save, jobs=args.jobs)
  for run, _, _ in planned:  # policies or sizes added since a run was scored
    done[run.key] = score(run, {}, done[run.key])
  results["runs"] = done
  save(done)
  report.write(results, args.out)
  return results


if __name__ == "__main__":
  cli.run(main)
