"""The resolution benchmark, second edition: every encoding trained at 64 px on
`shape_layout`, tested at 32-192 px, every arm tuned by one rule (issue 39).

  python -m experiments.resolution.run --quick --out=/tmp/resolution_quick  # CI, < 5 min
  python -m experiments.resolution.run --out=experiments/resolution         # the record
  python -m experiments.resolution.run --status --out=experiments/resolution

First the sweep: every arm's scale knob (`lfpe.encodings.knob`: a table's init std, a
sinusoid's temperature, Fourier's γ, RoPE's θ) over `experiments.sweeps.grid`'s values
(widened past a leading edge by the shared rule), `--sweep-seeds` seeds each, trained on the
training scenes but the first `plan.VALIDATION` and scored on those at 64 px (never on the
test split); the best mean chooses. Then the record: every arm of `plan.py`, `--seeds`
seeds, at its defaults and at its chosen value (one run when the default wins), through the
one trainer (one workdir per run under `--out/runs`; a re-run reads finished runs and
resumes interrupted ones), each tested at every size of `plan.TEST_SIZES` under each policy
of its arm (named evaluations, `plan.evals`) once trained, one size at a time: each size's
accuracies are kept in the run's workdir (`TESTED`) as it finishes, so a killed record tests
again only the sizes it had not finished. `report.py` writes `results.json` (with
provenance), `leaderboard.md`, `accuracy_vs_size.png` and `claims.json`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

from configs import vit_shape_layout
from experiments import cli, progress, runs, sweeps
from experiments.resolution import plan, report
from lfpe import encodings
from lfpe.train import trainer

QUICK_SIZES = (32, 64, 128)
TESTED = "tested.json"  # in a record run's workdir: {evaluation name: accuracy}, size by size


def load_config(arm: plan.Arm, seed: int, args: argparse.Namespace, value=None, *, sweep=False):
  """configs/vit_shape_layout.py for one arm and seed, with its encoding's knob at `value`
  (None: the arm's own); a sweep run trains and scores on the validation split, a record run
  trains on every training scene (its tests, `plan.evals`, run once it is trained: `score`)."""
  config = vit_shape_layout.get_config(f"small={int(args.quick)}")
  runs.for_run(config, seed=seed, steps=args.steps)  # warmup: at most a tenth of the run
  spec = sweeps.at(encodings.with_options(arm.posemb, **arm.options), value)
  with config.unlocked():
    config.model.posemb = spec
    config.model.update(arm.model)
    if arm.train_sizes:
      config.data.train_sizes = arm.train_sizes
  if sweep:
    runs.on_validation(config, 64 if args.quick else plan.VALIDATION)
  return config


def test_sizes(quick: bool) -> tuple[int, ...]:
  return QUICK_SIZES if quick else plan.TEST_SIZES


def arm_config(args: argparse.Namespace, *, sweep: bool = False):
  """`make(arm slug, value, seed)` of `runs.record_runs` / `runs.sweep_runs`."""
  arms = plan.by_slug(args.quick)
  return lambda slug, value, seed: load_config(arms[slug], seed, args, value, sweep=sweep)


def planned_sweep(args: argparse.Namespace, results: dict) -> list[runs.Run]:
  """The sweep as far as `results` decide it: every arm with a knob over its grid around its
  own value, on validation scenes, widened past a leading edge."""
  make = arm_config(args, sweep=True)
  grids = {slug: sweeps.grid(make(slug, None, 0).model.posemb) for slug in plan.by_slug(args.quick)}
  return sweeps.plan(
    lambda g: runs.sweep_runs(g, args.sweep_seeds, make, args.out),
    {slug: grid for slug, grid in grids.items() if grid},
    results,
    report.validation_accuracy,
    seeds=args.sweep_seeds,
    higher_is_better=True,
    widenings=1 if args.quick else sweeps.WIDENINGS,
  )


def planned(args: argparse.Namespace, chosen: dict[str, float]) -> list[runs.Run]:
  """Every record run, seed-major: each arm at defaults and at its sweep's choice."""
  slugs = list(plan.by_slug(args.quick))
  return runs.record_runs(slugs, args.seeds, chosen, arm_config(args), args.out)


def score(
  run: runs.Run, summary: dict, entry: dict | None = None, *, sizes=plan.TEST_SIZES
) -> dict:
  """A sweep run's validation accuracy; a record run's test accuracy at every one of `sizes`
  under each policy of its arm (the trainer's own evaluation at 64 px, where every policy is
  the identity). The tests a run lacks (all of them once trained; a policy or size added
  later) run on the trained run (`_test`); nothing retrains."""
  slug = run.key.removeprefix("sweep/").split("/")[0]
  arm = plan.by_slug()[slug]
  if run.key.startswith("sweep/"):
    accuracy = summary["eval"]["accuracy"]
    print(f"{run.key}: validation {100 * accuracy:.1f} %", flush=True)
    seconds = summary.get("wall_s")
    return {"arm": arm.name, "seed": run.config.seed, "validation": accuracy, "seconds": seconds}
  entry = entry or {"arm": arm.name, "seed": run.config.seed, "scores": {}}
  entry.setdefault("seconds", summary.get("wall_s"))
  tests = plan.evals(arm, run.config.model.posemb, sizes, run.config.data.name)
  # Runs recorded before testing left the trainer hold their tests in its summary.
  found = {k.removeprefix("eval/"): m["accuracy"] for k, m in summary.items() if "eval/" in k}
  missing = [name for name in tests if name not in found and not _scored(entry, name)]
  found |= _test(run, tests, missing)
  train = str(plan.TRAIN_SIZE)
  at_train = summary.get("eval", {}).get("accuracy")
  if at_train is None:  # re-scored from its entry: the training size is already there
    at_train = next(iter(entry["scores"].values()))[train]
  for policy in arm.policies:
    entry["scores"].setdefault(policy, {})[train] = at_train
  for name in tests:
    policy, size = plan.policy_and_size(name)
    if name in found:
      entry["scores"][policy][size] = found[name]
  return entry


def _test(run: runs.Run, tests: dict, names: list[str]) -> dict[str, float]:
  """{name: test accuracy} of the evaluations `names` (of `tests`, `plan.evals`) on the
  trained run, one size at a time (a size's policies share one pass of its scenes), each
  size's accuracies written to the workdir's `TESTED` as it finishes; sizes found there are
  not tested again."""
  path = os.path.join(run.workdir, TESTED)
  done = runs.load(path) if names else {}
  by_size: dict[int, list[str]] = {}
  for name in names:
    if name not in done:
      by_size.setdefault(int(plan.policy_and_size(name)[1]), []).append(name)
  for size, group in sorted(by_size.items()):
    config = run.config.copy_and_resolve_references()
    with config.unlocked():
      config.evals = {name: tests[name] for name in group}
      config.eval_batch_size = plan.TEST_BATCH
    metrics = trainer.evaluate_all(config, run.workdir, main=False)
    done |= {name: metrics[f"eval/{name}"]["accuracy"] for name in group}
    with open(f"{path}.tmp", "w") as f:  # then renamed: a kill never leaves half a file
      json.dump(done, f, indent=1)
    os.replace(f"{path}.tmp", path)
    print(f"{run.key}: tested at {size} px ({len(group)} policies)", flush=True)
  return {name: done[name] for name in names}


def _scored(entry: dict, name: str) -> bool:
  policy, size = plan.policy_and_size(name)
  return size in entry["scores"].get(policy, {})


def parse(argv: list[str]) -> argparse.Namespace:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="3 arms, a few steps: CI")
  parser.add_argument("--out", default="experiments/resolution")
  cli.add_seeds_flag(parser, default=plan.SEEDS)
  parser.add_argument("--sweep-seeds", type=cli.at_least(1), default=plan.SWEEP_SEEDS)
  parser.add_argument(
    "--steps", type=cli.at_least(0), default=0, help="override the steps (0: the plan's)"
  )
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  cli.settle_mode(args)
  if args.quick:
    args.seeds, args.sweep_seeds = 2, 1
  args.steps = args.steps or (0 if args.quick else plan.STEPS)
  return args


def main(argv: list[str] | None = None) -> dict:
  argv = sys.argv[1:] if argv is None else argv
  args = parse(argv)
  path = os.path.join(args.out, "results.json")
  results = runs.load(path)
  sweep = planned_sweep(args, results)
  chosen = lambda: report.chosen(results)
  if args.status:
    progress.status(sweep + planned(args, chosen()), results, jobs=args.jobs, score_in_jobs=True)
    print(f"\nThe record plans {args.seeds} seeds per arm (--seeds); its finished seeds give:")
    print(report.power_table(results) or "no comparison with two paired seeds yet.")
    return {}
  os.makedirs(args.out, exist_ok=True)
  save = runs.saver(path)
  scored = functools.partial(score, sizes=test_sizes(args.quick))
  train = lambda plan_now: runs.execute(
    plan_now, results, scored, save, jobs=args.jobs, score_in_jobs=True
  )
  sweeps.run(lambda: planned_sweep(args, results), train, results)
  record = planned(args, chosen())
  train(record)
  before = json.dumps(results, sort_keys=True)
  for run in record:  # policies or sizes added since a run was scored
    results[run.key] = scored(run, {}, results[run.key])
  if json.dumps(results, sort_keys=True) != before:  # a finished record keeps its provenance
    save(results)
  report.write(results, args.out)
  return results


if __name__ == "__main__":
  cli.run(main)
