"""The Quickstart job: ViTs with embed_1d, sine_2d and fourier on digits, over seeds.

  python -m experiments.digits_demo.run [--seeds 3] [--steps 600] [--quick] [--out DIR]
  python -m experiments.digits_demo.run --status                    # done / left, ETA
  python -m experiments.digits_demo.run --seeds 5 --encodings embed_1d,sine_2d,fourier,none \
    --tune --out experiments/digits_demo     # the committed record (README)
  ... --length                                   # + the recipe's length check

Trains the recipe of `configs/vit_digits.py` (its model, AdamW with clipping, warmup-cosine,
label smoothing, dropout, batch 64) for `--steps` steps (default 600; `--steps 1000` is the
config's length) through the one trainer (`experiments/runs.py`: one workdir per seed under
`--out/runs/`; a re-run reads finished runs and resumes interrupted ones), prints test
accuracy as mean ± 95 % t-interval over seeds, and `report.py` writes `results.md`,
`claims.json` and `digits_demo.png` beside `results.json` in `--out`: by default
`workdirs/digits_demo` (ignored by git; `workdirs/digits_demo_quick` with `--quick`), so the
demo never rewrites the committed record in experiments/digits_demo/, which only the
record's own command (above) writes.

`--tune` (the record) gives every encoding the same tuning budget: its scale knob
(`lfpe.encodings.knob`: Fourier's γ, the sinusoids' temperature, the table's init std) over
`experiments.sweeps.grid`'s values (widened at a leading edge by the shared rule),
`--sweep-seeds` seeds each, trained on the training digits but the first `VALIDATION` and
scored on those (never on the test digits); the best mean validation accuracy chooses. Each
encoding then also trains `--seeds` seeds at its chosen value, beside its defaults arm (one
and the same run when the choice is the default), so every claim reads both ways.

`--length` checks the recipe's length (issue 38) by the rule its README declares: every
encoding at defaults (not the control), `recipe.LENGTH_SEEDS` (apart from the record's and the
sweep's), trained as the record trains but evaluated on the test digits every `LENGTH_EVERY`
steps (`length/<group>/<encoding>/<seed>`, each entry keeping its accuracy curve); the report
applies the rule (`report.LENGTH_RULE`) to the curves.

Why seeds and intervals: a run's accuracy moves by 1-3 points with the seed and also with the
CPU (XLA:CPU's code differs per instruction set and thread count; rounding differences of
1e-6 at the first step grow over the run), so one number does not reproduce on another
machine. Runs are kept per setting and step count: rerun under e.g.
`XLA_FLAGS=--xla_cpu_max_isa=AVX2` to add that setting. Seed s here is seed s of
`python -m lfpe.main --config=configs/vit_digits.py:posemb=NAME --config.seed=s` with the
demo's `total_steps` and warmup.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from configs import vit_digits
from experiments import cli, progress, recipe, runs, sweeps
from experiments.digits_demo import report
from lfpe import encodings

ENCODINGS = ("embed_1d", "sine_2d", "fourier")
SEEDS, STEPS = 3, 600  # the default run (its time on 2 cores: docs/testing.md)
SWEEP_SEEDS = 2
VALIDATION = 287  # the first training digits (a fifth): the sweep's validation split
LENGTH_EVERY = 150  # the length check's evaluations: 4 points of the record's 600 steps


def demo_config(posemb: str, steps: int, quick: bool):
  """`configs/vit_digits.py` for `posemb`; `steps` updates with a 10 % warmup (the recipe's)."""
  config = vit_digits.get_config(f"posemb={posemb},small={int(quick)}")
  if not quick:
    with config.unlocked():
      config.total_steps, config.schedule.warmup_steps = steps, steps // 10
  return config


def machine() -> dict:
  """The XLA:CPU setting of this run: max ISA (XLA_FLAGS), AVX-512 on the host, cores."""
  match = re.search(r"--xla_cpu_max_isa=(\w+)", os.environ.get("XLA_FLAGS", ""))
  with open("/proc/cpuinfo") as f:
    cpuinfo = f.read()
  model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
  return {
    "isa": match.group(1) if match else "default",
    "avx512": " avx512f" in cpuinfo,
    "cores": len(os.sched_getaffinity(0)),
    "cpu": model.group(1).strip() if model else "unknown",
  }


def setting_name(m: dict) -> str:
  isa = f"max ISA {m['isa']}" if m["isa"] != "default" else "default ISA"
  return f"{isa} ({'AVX-512' if m['avx512'] else 'no AVX-512'} host, {m['cores']} cores)"


def group(args: argparse.Namespace, setting: str) -> str:
  """`<setting>/<steps>_steps`: the key prefix of this machine's setting and step count, so
  settings never mix."""
  steps = demo_config(ENCODINGS[0], args.steps, args.quick).total_steps
  slug = re.sub(r"\W+", "_", setting).strip("_").lower()
  return f"{slug}/{steps}_steps"


def run_config(args: argparse.Namespace, arm: str, value: float | None, seed: int):
  """The demo config of `arm` (`<group>/<encoding>`) at `seed`, its knob at `value` (None:
  the config's own)."""
  config = runs.for_run(demo_config(arm.rsplit("/", 1)[1], args.steps, args.quick), seed=seed)
  with config.unlocked():
    config.model.posemb = sweeps.at(config.model.posemb, value)
  return config


def planned(args: argparse.Namespace, setting: str, chosen: dict | None = None) -> list[runs.Run]:
  """Every record run of this invocation (`runs.record_runs`, seed-major): each encoding at
  defaults, and with `chosen` (`{arm: value}` of the sweep) at its chosen value."""
  arms = [f"{group(args, setting)}/{posemb}" for posemb in args.encodings]
  make = lambda arm, value, seed: run_config(args, arm, value, seed)
  return runs.record_runs(arms, args.seeds, chosen or {}, make, args.out)


def planned_length(args: argparse.Namespace, setting: str, chosen: dict) -> list[runs.Run]:
  """The length check's runs (`--length`, module docstring): each encoding but the control at
  defaults and at its sweep's choice (`chosen`), evaluated every `LENGTH_EVERY` steps
  (`--quick`: every 2)."""
  if not args.length:
    return []
  arms = [f"{group(args, setting)}/{p}" for p in args.encodings if encodings.knob(p)]
  make = lambda arm, value, seed: run_config(args, arm, value, seed)
  return runs.length_runs(arms, make, 2 if args.quick else LENGTH_EVERY, args.out, chosen)


def sweep_runs(args: argparse.Namespace, grids: dict) -> list[runs.Run]:
  """The sweep: each tuned arm (`<group>/<encoding>`) at each value of its grid, trained on
  the training digits but the first `VALIDATION` and scored on those."""
  held = 64 if args.quick else VALIDATION

  make = lambda arm, value, seed: runs.on_validation(run_config(args, arm, value, seed), held)
  return runs.sweep_runs(grids, args.sweep_seeds, make, args.out)


def planned_sweep(args: argparse.Namespace, setting: str, results: dict) -> list[runs.Run]:
  """The sweep as far as `results` decide it (`sweeps.plan`: each arm's base grid around its
  own knob, widened past a leading edge)."""
  base = group(args, setting)
  grids = {
    f"{base}/{p}": sweeps.grid(demo_config(p, args.steps, args.quick).model.posemb)
    for p in args.encodings
  }
  grids = {arm: grid for arm, grid in grids.items() if grid}  # `none` has no knob
  return sweeps.plan(
    lambda g: sweep_runs(args, g),
    grids,
    results,
    report.validation_accuracy,
    seeds=args.sweep_seeds,
    higher_is_better=True,
    widenings=1 if args.quick else sweeps.WIDENINGS,
  )


def score(setting: str, this: dict):
  """`score(run, summary)` for `runs.execute`: a run's test accuracy, training loss curve and
  seconds, with its setting."""

  def entry(run: runs.Run, summary: dict) -> dict:
    with open(os.path.join(run.workdir, "metrics.jsonl")) as f:
      train = [r for r in map(json.loads, f) if r["split"] == "train"]
    accuracy = summary["eval"]["accuracy"]
    split = "validation" if run.key.startswith("sweep/") else "test"
    print(f"{run.key}: {split} accuracy {100 * accuracy:.2f} %", flush=True)
    phase = next((p for p in ("sweep/", recipe.LENGTH) if run.key.startswith(p)), "")
    entry = {
      "setting": setting,
      "machine": this,
      "encoding": run.key.removeprefix(phase).split("/")[2],  # `posemb`: the full spec
      "seed": run.config.seed,
      "batch": run.config.batch_size,
      "accuracy": accuracy,
      "curve": {"step": [r["step"] for r in train], "loss": [r["loss"] for r in train]},
      "seconds": summary.get("wall_s"),  # training time (its last segment, if resumed)
    }
    if phase == recipe.LENGTH:  # the test accuracy along the way: [[step, accuracy], ...]
      entry["test_curve"] = runs.curve(run.workdir, "accuracy")
    return entry

  return entry


def parse(argv: list[str]) -> argparse.Namespace:
  parser = cli.parser(__doc__)
  cli.add_seeds_flag(parser, default=SEEDS)
  parser.add_argument(
    "--steps", type=cli.at_least(1), default=STEPS, help="steps of 64 (recipe: 1000)"
  )
  parser.add_argument("--encodings", default=",".join(ENCODINGS))
  parser.add_argument("--quick", action="store_true", help="CI: tiny model, 6 steps, 2 seeds")
  parser.add_argument(
    "--out", default="", help="default workdirs/digits_demo (_quick); the record's: its folder"
  )
  parser.add_argument("--tune", action="store_true", help="sweep every encoding's knob too")
  parser.add_argument("--sweep-seeds", type=cli.at_least(1), default=SWEEP_SEEDS)
  parser.add_argument("--length", action="store_true", help="check the recipe's length too")
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  args.out = args.out or os.path.join("workdirs", "digits_demo" + "_quick" * args.quick)
  cli.settle_mode(args)
  if args.quick:
    args.seeds, args.sweep_seeds = min(args.seeds, 2), 1
  args.encodings = args.encodings.split(",")
  for spec in args.encodings:
    try:
      encodings.kind(spec)
    except ValueError as e:
      parser.error(f"--encodings={spec!r}: {e}")
  return args


def main(argv: list[str] | None = None) -> dict:
  """Trains (or reads) this setting's runs into `--out/results.json`; the report."""
  argv = sys.argv[1:] if argv is None else argv
  args = parse(argv)
  this = machine()
  setting = setting_name(this)
  path = os.path.join(args.out, "results.json")
  results = runs.load(path)
  sweep = planned_sweep(args, setting, results) if args.tune else []
  chosen = lambda: report.chosen(runs.chosen(sweep, results)) if args.tune else {}
  if args.status:
    plan = sweep + planned(args, setting, chosen()) + planned_length(args, setting, chosen())
    progress.status(plan, results, jobs=args.jobs)
    return results
  print(f"{setting}: {args.seeds} seeds per encoding", flush=True)
  scored, save = score(setting, this), runs.saver(path)
  train = lambda plan: runs.execute(plan, results, scored, save, jobs=args.jobs)
  if args.tune:
    sweep = sweeps.run(lambda: planned_sweep(args, setting, results), train, results)
  plan = planned(args, setting, chosen())
  results = train(plan + planned_length(args, setting, chosen()))
  current = (int(plan[0].config.total_steps), setting)
  print(f"\n{current[0]} steps\n\n" + report.write(results, args.out, current))
  for claim in report.claims(report.groups(results)[current]):
    print(report.claim_line(claim))
  print(f"\nwrote results.json, claims.json, results.md and digits_demo.png to {args.out}")
  return results


if __name__ == "__main__":
  cli.run(main)
