"""DETR-lite with four position encodings and a no-position control under 002's two protocols.

  python -m experiments.detection.run --quick --out=/tmp/detection_quick   # CI, < 5 min
  python -m experiments.detection.run --jobs 2            # the record (its second edition)
  python -m experiments.detection.run --status --jobs 2   # done / left, ETA
  python -m experiments.detection.run --steps 6000 --out=experiments/detection_v3 \
    --choices-from=experiments/detection_v2 --jobs 2     # a longer record, the same choices

Trains `configs/detr_shapes.py` (Tables 1 and 2 of 002) in two phases, through the regular
trainer (one workdir per run under `--out/runs`, `experiments/runs.py`: a stopped record
resumes where it stopped, a finished run is read back, `--status` reports without training):
0. **The learning rate**, one for every encoding (issue 38; `experiments/recipe.py`): each
   encoding but the control, at defaults, under both protocols, trains at the config's rate,
   half and twice it (one more past a winning edge; `RECIPE_SEEDS`, `SWEEP_STEPS` steps, on
   the sweep's validation split); the declared rule (`report.learning_rate`) takes the rate
   with the highest validation AP averaged over those arms (ties to the smaller), and the
   sweep and the record, the control's runs too, train at it.
1. **The sweep**, the same budget for every encoding (issue 38): each one's own knob
   (`lfpe.encodings.knob`: the DETR sine's frequency scale, the table's init std, MLP's input
   scale, Fourier's γ) over `experiments.sweeps.grid`'s values around the config's, per protocol,
   widened at a leading edge by the shared rule, `SWEEP_SEEDS` seeds of `SWEEP_STEPS` steps,
   trained on the training split minus its first `VALIDATION` images and scored on those
   (`sweep_config`; under `heldout`, at a size beyond the sweep's training sizes, not at the
   held-out sizes): never on the test images. The declared rule (`report.chosen`): the value
   with the highest mean validation AP, ties to the smaller.
2. **The record**: `detr_sine` (Sine-2D), `embed_2d`, `mlp`, `fourier` and the control
   `none`, each at defaults and at its chosen value (the same run when the default wins),
   `--seeds` paired seeds each (seed s of every encoding draws the same
   data order), under protocol `all` (every size in training and testing, normalised
   positions: Table 1) and `heldout` (shorter sides of 32-48 px in training, with longer
   sides up to 64 px; 56 and 64 px squares for testing only; raw positions: Table 2),
   `--steps` steps, evaluated every 1,000 (the learning curve that `report.length_check` checks
   against the declared length rule).
Then every run is scored at each test size alone (one named evaluation per size,
`trainer.evaluate_all`; `--quick` tests one size and skips this), and `report.py` writes
`results.json`, `tables.md`, `claims.json` and the AP-vs-size plot; `predictions.png` shows
Learnable-Fourier+MLP's boxes on test images (`picture.py`), from the predictions each of its
record runs keeps in results.json as it is scored, so that no checkpoint is needed to draw it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from configs import detr_shapes
from experiments import cli, editions, progress, recipe, runs, sweeps
from experiments.detection import picture, report
from experiments.runs import for_run
from lfpe.errors import ConfigError
from lfpe.train import trainer
from lfpe.train.workdir import has_checkpoints

CONTROL = "none"
ENCODINGS = ("detr_sine", "embed_2d", "mlp", "fourier", CONTROL)
QUICK_ENCODINGS = ("fourier", CONTROL)  # the swept one and the control: every phase, in CI time
PROTOCOLS = ("all", "heldout")
PICTURED = "fourier"  # whose predictions predictions.png shows (`pictured`)
SWEEP_SEEDS, SWEEP_STEPS = 2, 2000
RECIPE_SEEDS = (200,)  # the rate choice's: apart from the sweep's (100, ...) and the record's
VALIDATION = 1000  # the first training images: the sweep's validation split (500 scored)


def load_config(posemb: str, protocol: str, seed: int, args, value: float | None = None):
  """configs/detr_shapes.py for one run, with the experiment's steps, seed and learning rate
  (`args.lr`, once the rate choice has made it; the config's before), and the encoding's knob
  at `value` (None: the config's own)."""
  arg = f"posemb={posemb},protocol={protocol}" + (",small=1" if args.quick else "")
  config = detr_shapes.get_config(arg)
  # At any --steps, the record evaluates at the config's period: the curve the length rule reads.
  for_run(config, seed=seed, steps=args.steps, eval_every=config.eval_every)
  with config.unlocked():
    config.model.posemb = sweeps.at(config.model.posemb, value)
    config.optim.lr = args.lr or config.optim.lr
  return config


def spec(posemb: str, protocol: str, args) -> str:
  """The encoding spec the config gives `posemb` under `protocol` (its defaults arm)."""
  return load_config(posemb, protocol, 0, args).model.posemb


def sweep_config(protocol: str, posemb: str, value: float, seed: int, args):
  """A sweep run: trained without the validation images, scored on them. Where the protocol
  tests sizes it never trains on (`heldout`), the sweep never sees those sizes either: it
  trains on the training sizes but the largest and validates at the largest (one size beyond
  its training, as 56 and 64 px are beyond the record's), so γ is not chosen at the sizes
  Table 2 measures."""
  config = load_config(posemb, protocol, seed, args, value)
  held = 16 if args.quick else VALIDATION
  for_run(config, seed=seed, steps=args.sweep_steps)
  detection = config.data.detection
  with config.unlocked():
    config.data.train_split = f"train[{held}:]"
    config.data.eval_split = f"train[:{held // 2}]"
    if not set(detection.test_sizes) <= set(detection.train_sizes):
      *inner, outer = detection.train_sizes
      detection.train_sizes, detection.test_sizes = tuple(inner), (outer,)
  return config


def rate_runs(args: argparse.Namespace, results: dict) -> list[runs.Run]:
  """The rate choice's runs as far as `results` decide them (`recipe.plan`): every encoding
  but the control, at defaults, under each protocol, at each of `recipe.rates` around the
  config's rate (one past a winning edge), on validation data."""
  arms = [
    f"{p}/{posemb}" for p in args.rate_protocols for posemb in args.encodings if posemb != CONTROL
  ]

  def make(arm: str, rate: float, seed: int):
    config = sweep_config(*arm.split("/"), None, seed, args)
    with config.unlocked():
      config.optim.lr = rate
    return config

  return recipe.plan(
    lambda rates: runs.recipe_runs(rates, arms, args.recipe_seeds, make, args.out),
    recipe.rates(report.DEFAULT_LR, args.rate_factors),
    results,
    report.validation_ap,
    higher_is_better=True,
    widenings=args.rate_widenings,
  )


def chosen_rate(rated: list[runs.Run], results: dict) -> float | None:
  """The rate the rule chose once every rate run of `rated` is in `results`, else None."""
  if any(run.key not in results for run in rated):
    return None
  return report.learning_rate(runs.chosen(rated, results))


def refuse_a_first_edition(args: argparse.Namespace, results: dict) -> None:
  """Stops before training into an `--out` whose runs recorded no learning rate: the first
  edition, trained at the config's rate before the rate choice existed; its runs would be
  read back as if trained at whichever rate the choice makes."""
  old = [k for k, e in results.items() if k != "provenance" and "lr" not in e]
  if old:
    raise ConfigError(
      f"--out={args.out} holds {len(old)} runs that recorded no learning rate (the first "
      "edition, e.g. " + old[0] + "); give the second edition its own --out, e.g. "
      "--out=experiments/detection_v2."
    )


def swept_arms(args: argparse.Namespace) -> dict[str, tuple[float, ...]]:
  """The sweep's arms, `protocol/posemb`, with their base grids around the config's value:
  every encoding of this invocation that has a knob (`args.swept`)."""
  grids = {
    f"{protocol}/{posemb}": sweeps.grid(spec(posemb, protocol, args), args.values)
    for protocol in PROTOCOLS
    for posemb in args.encodings
    if posemb in args.swept
  }
  return {arm: grid for arm, grid in grids.items() if grid}


def sweep_runs(args: argparse.Namespace, grids: dict[str, tuple[float, ...]]) -> list[runs.Run]:
  """The sweep's runs for each arm's grid (`grids`), seed-major (`runs.sweep_runs`)."""
  make = lambda arm, value, seed: sweep_config(*arm.split("/"), value, seed, args)
  return runs.sweep_runs(grids, args.sweep_seeds, make, args.out, runs.SWEEP_FIRST_SEED)


def planned_sweep(args: argparse.Namespace, results: dict) -> list[runs.Run]:
  """The sweep as far as `results` decide it: each arm's grid, widened past an edge that
  leads (`sweeps.widen`)."""
  return sweeps.plan(
    lambda grids: sweep_runs(args, grids),
    swept_arms(args),
    results,
    report.validation_ap,
    seeds=args.sweep_seeds,
    higher_is_better=True,
    widenings=args.widenings,
  )


def record_runs(args: argparse.Namespace, chosen: dict[str, float]) -> list[runs.Run]:
  """The record's runs, seed-major (a stopped record has whole seeds): each encoding at
  defaults and at the value the sweep chose (`chosen`, by `protocol/posemb`; the same run
  when that is the default; none where the sweep has not chosen, e.g. for --status)."""
  arms = [f"{protocol}/{posemb}" for protocol in PROTOCOLS for posemb in args.encodings]

  def make(arm: str, value: float | None, seed: int):
    protocol, posemb = arm.split("/")
    return load_config(posemb, protocol, seed, args, value)

  return runs.record_runs(arms, args.seeds, chosen, make, args.out)


def score(run: runs.Run, summary: dict, quick: bool) -> dict:
  """A trained run's results entry: its eval, and AP at every test size alone (not for the
  sweep's runs, scored on validation images)."""
  if run.key.startswith(("sweep/", recipe.PREFIX)):
    print(f"{run.key}: validation AP {summary['eval']['AP']:.4f}", flush=True)
    return {"eval": summary["eval"], "seconds": summary.get("wall_s")}
  tested = run.config.data.detection.test_sizes
  by_size = {str(tested[0]): summary["eval"]} if len(tested) == 1 else {}
  sizes = [] if quick else report.SIZES
  if sizes:
    scores = trainer.evaluate_all(one_size_each(run.config, sizes), run.workdir, main=False)
    by_size.update({str(size): scores[f"eval/size_{size}"] for size in sizes})
  print(f"{run.key}: AP {summary['eval']['AP']:.4f}", flush=True)
  curve = runs.curve(run.workdir, "AP")
  kept = run.key.split("/")[1] == PICTURED  # predictions.png's, drawn from results alone
  return {
    "eval": summary["eval"],
    "by_size": by_size,
    "curve": curve,
    "seconds": summary.get("wall_s"),
    **({"predictions": picture.predict(run.config, run.workdir)} if kept else {}),
  }


def pictured(record, results: dict, arm: str, spec_: str, value, seeds: int):
  """(run, its predictions) of `arm`'s record run at knob `value` of the lowest seed whose
  predictions its results entry keeps (`score`) or, for runs scored before it kept them,
  whose workdir still holds checkpoints to predict from; None where no seed has either."""
  for seed in range(seeds):
    run = record[sweeps.record_key(arm, spec_, value, seed)]
    predicted = results.get(run.key, {}).get("predictions")
    if predicted is None and has_checkpoints(run.workdir):
      predicted = picture.predict(run.config, run.workdir)
    if predicted is not None:
      return run, predicted
  return None


def one_size_each(config, sizes) -> Any:
  """`config` with one named evaluation per test image size, `size_S`, testing S alone."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.evals = {
      f"size_{size}": {"data": {"detection": {"test_sizes": (size,)}}} for size in sizes
    }
  return config


def main(argv: list[str] | None = None) -> dict:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="tiny sizes: a test of the pipeline")
  parser.add_argument("--out", default="experiments/detection_v2", help="the second edition's")
  cli.add_seeds_flag(parser, default=5)
  parser.add_argument(
    "--steps", type=cli.at_least(0), default=0, help="override total_steps (0: config's)"
  )
  parser.add_argument("--sweep-seeds", type=cli.at_least(1), default=SWEEP_SEEDS)
  parser.add_argument("--sweep-steps", type=cli.at_least(1), default=SWEEP_STEPS)
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  parser.add_argument(
    "--choices-from",
    default="",
    help="an earlier edition's --out whose rate-choice and sweep runs this one adopts instead "
    "of training them (they train --sweep-steps whatever --steps is): e.g. a third edition "
    "at --steps 6000 from experiments/detection_v2",
  )
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  cli.settle_mode(args)
  args.values, args.encodings, args.widenings = sweeps.VALUES, ENCODINGS, sweeps.WIDENINGS
  args.swept, args.recipe_seeds, args.lr = ENCODINGS, RECIPE_SEEDS, 0.0
  args.rate_factors, args.rate_widenings, args.rate_protocols = (
    recipe.FACTORS,
    recipe.WIDENINGS,
    PROTOCOLS,
  )
  if args.quick:  # two rates (neither the config's) under `all`; Fourier swept at two values
    # (and one widening); the control: every phase
    args.seeds, args.steps, args.sweep_seeds, args.sweep_steps = 1, args.steps or 4, 1, 4
    args.values, args.encodings, args.widenings, args.swept = 2, QUICK_ENCODINGS, 1, ("fourier",)
    args.rate_factors, args.rate_widenings, args.rate_protocols = (0.5, 2.0), 0, ("all",)
  results = runs.load(os.path.join(args.out, "results.json"))
  choices = ("sweep/", recipe.PREFIX)
  adopted = editions.adopt(results, args.choices_from, choices) if args.choices_from else []
  if adopted:
    print(f"{len(adopted)} rate-choice and sweep runs adopted from {args.choices_from}")
  if args.status:
    rated = rate_runs(args, results)
    args.lr = chosen_rate(rated, results) or 0.0
    sweep = planned_sweep(args, results)
    chosen = report.chosen(runs.chosen(sweep, results))
    progress.status(rated + sweep + record_runs(args, chosen), results, jobs=args.jobs)
    if any(k.startswith(recipe.PREFIX) for k in results):  # the rule as its runs stand
      print("The rate choice so far (a rate still missing an arm ranks last):")
      print(*report.rate_table(results), sep="\n")
    record = [
      e for k, e in results.items() if not k.startswith(("provenance", "sweep/", recipe.PREFIX))
    ]
    if any(e.get("curve") for e in record):
      # seed-major: the first seeds' curves are in long before the record ends
      print("The length rule on the record runs so far:", *report.settled_table(results), sep="\n")
    return {}
  refuse_a_first_edition(args, results)
  save = runs.saver(os.path.join(args.out, "results.json"))
  if adopted:
    save(results)
  scored = lambda run, summary: score(run, summary, args.quick)
  train = lambda planned: runs.execute(planned, results, scored, save, jobs=args.jobs)
  args.lr = chosen_rate(sweeps.run(lambda: rate_runs(args, results), train, results), results)
  sweep = sweeps.run(lambda: planned_sweep(args, results), train, results)
  chosen = report.chosen(runs.chosen(sweep, results))
  sweeps.require(chosen, swept_arms(args))
  record = {run.key: run for run in record_runs(args, chosen)}
  runs.execute(list(record.values()), results, scored, save, jobs=args.jobs)
  report.write(results, args.out)
  scenes = {}
  for protocol in PROTOCOLS:  # Learnable-Fourier+MLP as tuned, its lowest pictured seed
    arm = f"{protocol}/{PICTURED}"
    found = pictured(record, results, arm, spec(PICTURED, protocol, args), chosen[arm], args.seeds)
    if found is None:
      print(f"predictions.png: no {arm} run kept predictions or checkpoints", flush=True)
    else:
      run, predicted = found
      scenes[f"{protocol} (seed {run.key.rsplit('/', 1)[1]})"] = picture.scenes(
        run.config, predicted
      )
  if not scenes:
    return results
  picture.draw(scenes, os.path.join(args.out, "predictions.png"))
  return results


if __name__ == "__main__":
  cli.run(main)
