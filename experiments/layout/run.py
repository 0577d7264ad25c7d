"""Widget captioning on synthetic screens with 002's ten box encodings and a control (Tables 3-4).

  python -m experiments.layout.run --quick --out=/tmp/layout_quick  # CI, < 5 min
  python -m experiments.layout.run --status --out=experiments/layout   # done / left, ETA
  python -m experiments.layout.run --out=experiments/layout         # the record
  python -m experiments.layout.run --tune --out=experiments/layout_v2  # equal budget (issue 38)
  python -m experiments.layout.run --tune --length --out=experiments/layout  # + the length check

Trains `configs/layout_synthetic.py` (the `tiny` layout captioner on `layout_screens/grid`,
captions that name the target's cell of a 10 x 10 grid) for every row of 002 Table 3
(`lfpe.models.layout.TABLE3`) and the no-position control, `--seeds` seeds each, through
the regular trainer (one workdir per run under `--out/runs/<row>/<seed>`, so a stopped
experiment resumes where it stopped); each run's final eval metrics (BLEU-1/2, ROUGE-L,
CIDEr, CIDEr on seen / unseen targets) go to `results.json` after the run. Then two checks
on the seed-0 runs go to `checks.json`: Embed-4D's table rows of the held-out bins still
equal their initial values (no gradient reaches them), and Learnable-Fourier+MLP-4/1's
greedy caption of one unseen test screen beside its references (drawn as `screen.png`).
`report.py` writes `tables.md`.

`--tune` gives every row the same tuning budget: its encoding's scale knob
(`lfpe.encodings.knob`: Fourier's γ, MLP's input scale, Sine-4D's temperature, Embed-4D's
init std) over `experiments.sweeps.grid`'s values (widened past a leading edge by the shared
rule), `--sweep-seeds` seeds each, trained on the training screens but the first
`VALIDATION` and scored by CIDEr on those (never on the test split); the best mean chooses.
Each row then also trains `--seeds` seeds at its chosen value beside its defaults run
(`<row>/<knob>=<value>/<seed>`; the same run when the default wins), and every finding is
checked both ways.

`--length` adds the check of the recipe's length (issue 38): every encoding row at defaults,
`recipe.LENGTH_SEEDS` (apart from the record's and the sweep's), trained as the record trains but
evaluated on the test screens every `LENGTH_EVERY` steps (`length/<row>/<seed>`, each entry
keeping its CIDEr curve), and `report.settled_table` applies the declared rule to the curves.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import jax
import numpy as np

from configs import layout_synthetic
from experiments import cli, progress, runs, sweeps
from experiments.layout import report
from experiments.layout.report import slug
from experiments.recipe import LENGTH
from experiments.runs import for_run
from lfpe import encodings, errors
from lfpe.data import builders, screens
from lfpe.models import layout, layout_decode
from lfpe.train import trainer

CONTROL = "No-position"  # the control row: the captioner without boxes
ROWS = (*layout.TABLE3, CONTROL)
POSEMBS = {**layout.TABLE3, CONTROL: "none"}
EXAMPLE_ROW = "Learnable-Fourier+MLP-4/1"
BY_SLUG = {slug(row): row for row in ROWS}
SWEEP_SEEDS = 2
VALIDATION = 2000  # the first training screens (a tenth): the sweep's validation split
LENGTH_EVERY = 200  # the length check's evaluations: 4 points of the record's 800 steps


def load_config(row: str, seed: int, args: argparse.Namespace, value: float | None = None):
  """configs/layout_synthetic.py for one Table 3 row, with the experiment's steps and seed,
  its encoding's knob at `value` (None: the config's own).

  The row's groups are passed as given in `TABLE3` (an encoding's default is 1 group: the
  config's default of 4 would turn Table 3's `mlp` into a 4/1 MLP)."""
  name, options = encodings.parse(POSEMBS[row])
  arg = f"posemb={name},groups={options.get('groups', 1)}" + (",small=1" if args.quick else "")
  config = for_run(layout_synthetic.get_config(arg), seed=seed, steps=args.steps)
  with config.unlocked():
    config.task.meteor = not args.quick  # the record scores METEOR (java); CI's quick run not
    config.model.posemb = sweeps.at(config.model.posemb, value)
  return config


def arm_config(args: argparse.Namespace):
  """`make(arm, value, seed)` of `runs.record_runs` / `runs.sweep_runs`: arms are row slugs."""
  return lambda arm, value, seed: load_config(BY_SLUG[arm], seed, args, value)


def workdir(row: str, seed: int, args: argparse.Namespace) -> str:
  return os.path.join(args.out, "runs", slug(row), str(seed))


def planned(args: argparse.Namespace, chosen: dict[str, float]) -> list[runs.Run]:
  """Every record run (`runs.record_runs`, seed-major: keys `<row slug>/<seed>`, workdirs
  `--out/runs/<key>`): each row at defaults and at the value its sweep chose (`chosen`)."""
  return runs.record_runs(list(BY_SLUG), args.seeds, chosen, arm_config(args), args.out)


def planned_sweep(args: argparse.Namespace, results: dict) -> list[runs.Run]:
  """The sweep as far as `results` decide it: every row with a knob (the control has none)
  over its grid around its own value, on validation screens, widened past a leading edge."""
  make = arm_config(args)
  grids = {s: sweeps.grid(make(s, None, 0).model.posemb) for s in BY_SLUG}
  held = 64 if args.quick else VALIDATION

  def sweep_runs(grids: dict) -> list[runs.Run]:
    on_validation = lambda arm, value, seed: runs.on_validation(make(arm, value, seed), held)
    return runs.sweep_runs(grids, args.sweep_seeds, on_validation, args.out)

  return sweeps.plan(
    sweep_runs,
    {arm: grid for arm, grid in grids.items() if grid and arm in args.swept},
    results,
    report.validation_cider,
    seeds=args.sweep_seeds,
    higher_is_better=True,
    widenings=1 if args.quick else sweeps.WIDENINGS,
  )


def planned_length(args: argparse.Namespace, chosen: dict[str, float]) -> list[runs.Run]:
  """The length check's runs (`--length`, module docstring): each encoding row at defaults
  and at its sweep's choice (`chosen`), the record's config evaluated every `LENGTH_EVERY`
  steps (`--quick`: every 2 of its 4)."""
  every = 2 if args.quick else LENGTH_EVERY
  rows = [slug(row) for row in args.length_rows]
  return runs.length_runs(rows, arm_config(args), every, args.out, chosen)


def score(run: runs.Run, summary: dict) -> dict:
  """A trained run's final eval metrics and seconds (`runs.execute` adds its encoding); a
  length-check run's CIDEr curve too."""
  phase = next((p for p in ("sweep/", LENGTH) if run.key.startswith(p)), "")
  row = BY_SLUG[run.key.removeprefix(phase).split("/")[0]]
  split = "validation" if phase == "sweep/" else "test"
  print(f"{run.key}: {split} CIDEr {summary['eval']['CIDEr']:.1f}", flush=True)
  entry = {
    "row": row,
    "seed": run.config.seed,
    "eval": summary["eval"],
    "seconds": summary.get("wall_s"),
  }
  if phase == LENGTH:
    entry["curve"] = runs.curve(run.workdir, "CIDEr")
  return entry


def restored(row: str, args: argparse.Namespace) -> tuple[Any, Any]:
  """`row` seed 0's program and trained variables. A run whose entry is recorded but whose
  workdir is not here (the first edition's, trained on another machine) is trained again from
  its config and seed first, and said so."""
  config, path = load_config(row, 0, args), workdir(row, 0, args)
  try:
    return trainer.restore(config, path)
  except errors.WorkdirError:
    print(f"{path}: no checkpoint here; training {row} seed 0 again for the checks", flush=True)
    trainer.train_and_evaluate(config, path)
    return trainer.restore(config, path)


def box_encoding_params(row: str, args: argparse.Namespace) -> tuple[dict, dict]:
  """`row` seed 0's box-encoding parameters at initialisation and after training."""
  prog, trained = restored(row, args)
  initial = prog.init_state().variables()  # the trainer's init: same program, same seed
  return tuple(jax.device_get(v["params"]["box_encoding"]) for v in (initial, trained))


def embed_check(args: argparse.Namespace) -> dict:
  """Embed-4D seed 0: largest change of its table rows at the held-out bins (0: still the
  init) and at the other bins (> 0: training did reach the tables)."""
  before, after = box_encoding_params("Embed-4D", args)
  held = np.asarray(screens.HELD_OUT)
  seen = np.setdiff1d(np.arange(screens.BINS), held)
  change = {k: np.abs(np.asarray(after[k]) - np.asarray(before[k])) for k in sorted(before)}
  held_change = max(float(c[held].max()) for c in change.values())
  seen_change = max(float(c[seen].max()) for c in change.values())
  return {
    "tables": list(change),
    "held_out_max_change": held_change,
    "seen_max_change": seen_change,
    "passed": held_change == 0.0 and seen_change > 0.0,
  }


def fourier_check(args: argparse.Namespace) -> dict:
  """Learnable-Fourier+MLP-4/1 seed 0: how far training moved the Fourier projection W_r
  against its initial spread (1/γ), i.e. how far it is from Fixed-Fourier+MLP-4/1."""
  before, after = (np.asarray(p["wr"]) for p in box_encoding_params(report.BEST, args))
  change = np.abs(after - before)
  return {"row": report.BEST, "init_sd": float(before.std()), "max_change": float(change.max()),
          "mean_change": float(change.mean())}  # fmt: skip


def example_caption(args: argparse.Namespace) -> tuple[dict, np.ndarray]:
  """The first unseen test screen, `EXAMPLE_ROW` seed 0's greedy caption of its target and
  the references; and the screen drawn (`screens.render`)."""
  config = load_config(EXAMPLE_ROW, 0, args)
  prog, variables = restored(EXAMPLE_ROW, args)
  source = builders.data_source(config.data.name, "test", config.data.data_dir)
  index = next(i for i in range(len(source)) if source[i]["unseen"])
  example = source[index]
  batch = {k: np.asarray(example[k])[None] for k in layout.INPUTS}
  decode = jax.jit(
    lambda v, b: layout_decode.greedy_decode(prog.model, v, b, screens.CAPTION_LEN - 1)
  )
  tokens = np.asarray(decode(variables, batch))[0]
  result = {
    "row": EXAMPLE_ROW,
    "test_index": index,
    "unseen": True,
    "target_box": np.asarray(example["boxes"][example["target"]]).tolist(),
    "generated": screens.decode(tokens),
    "references": [screens.decode(c) for c in example["captions"]],
  }
  return result, np.asarray(screens.render(example))


def main(argv: list[str] | None = None) -> dict:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="small data, a few steps: CI")
  parser.add_argument("--out", default="experiments/layout")
  cli.add_seeds_flag(parser, default=5)
  parser.add_argument(
    "--steps", type=cli.at_least(0), default=0, help="override total_steps (0: config's)"
  )
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  parser.add_argument("--tune", action="store_true", help="sweep every row's knob too")
  parser.add_argument("--sweep-seeds", type=cli.at_least(1), default=SWEEP_SEEDS)
  parser.add_argument("--length", action="store_true", help="check the recipe's length too")
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  cli.settle_mode(args)
  args.swept = list(BY_SLUG)
  args.length_rows = list(layout.TABLE3) if args.length else []  # the control has no vote
  if args.quick:  # two rows swept at 3 values (and one widening): every phase of --tune
    args.seeds, args.steps, args.sweep_seeds = 1, args.steps or 4, 1
    args.swept = [slug(report.BEST), slug("Sine-4D")]
    args.length_rows = [report.BEST, "Sine-4D"] if args.length else []
  path = os.path.join(args.out, "results.json")
  results = runs.load(path)
  sweep = planned_sweep(args, results) if args.tune else []
  chosen = lambda: report.chosen(runs.chosen(sweep, results))
  if args.status:
    plan = sweep + planned(args, chosen()) + planned_length(args, chosen())
    progress.status(plan, results, jobs=args.jobs)
    return {}
  os.makedirs(args.out, exist_ok=True)
  save = runs.saver(path)
  train = lambda plan: runs.execute(plan, results, score, save, jobs=args.jobs)
  if args.tune:
    sweep = sweeps.run(lambda: planned_sweep(args, results), train, results)
  results = train(planned(args, chosen()) + planned_length(args, chosen()))
  example, image = example_caption(args)
  checks = {
    "embed_4d_held_out": embed_check(args),
    "fourier_wr": fourier_check(args),
    "example": example,
  }
  with open(os.path.join(args.out, "checks.json"), "w") as f:
    json.dump(checks, f, indent=1)
  report.write(results, checks, args.out)
  report.screen_figure(image, checks["example"], os.path.join(args.out, "screen.png"))
  return {"runs": results, "checks": checks}


if __name__ == "__main__":
  cli.run(main)
