"""Reformer-style generation of whole digit images with eight position encodings (002 Fig. 3).

  python -m experiments.generation.run --quick --out=/tmp/generation_quick  # CI, < 5 min
  python -m experiments.generation.run --status   # done / left, ETA
  python -m experiments.generation.run --jobs 2   # the record's second edition (generation_v2)

Trains `configs/reformer_digits.py` (a tiny causal Reformer on 16x16 digits in 8 grey levels,
whose pixels depend strongly on where they are) for Fig. 3a's `embed_2d`, `embed_1d`,
`sine_2d`, `sine_1d`, `fourier`, Fig. 3b's `fourier_no_mlp`, `mlp` (and `fourier`), and the
no-position control `none`, `--seeds` paired seeds each (seed s of every encoding sees the
same batches), with LSH attention (002's; `--attentions=lsh,full` adds dense causal
attention), through the regular trainer (one workdir per run under `--out/runs`, so a stopped
record resumes where it stopped). Each run's held-out bits per dim are read from its metrics
(an evaluation every `--eval-every` steps: the learning curve).

Every encoding gets the same tuning budget (issue 38): its own scale knob
(`lfpe.encodings.knob`: Fourier's γ, MLP's input scale, the sinusoids' temperature, the
tables' init std) over `experiments.sweeps.grid`'s values around the config's own, widened
at a leading edge by the shared rule, `--sweep-seeds` seeds of `--sweep-steps` steps each,
trained on the training digits but the first `VALIDATION` and scored on those (never on the
test digits); the lowest mean validation bits/dim chooses. Each encoding then trains
`--seeds` seeds at its defaults and at its choice (one and the same run when the choice is
the default), so every claim reads both ways. Then every `fourier` run is
scored again with its attention output zeroed (does the model use its attention?), one
`fourier` model per attention draws sample images, and `report.py` writes `results.json`,
`tables.md`, `claims.json`, the two figures and `samples.png`.
"""

from __future__ import annotations

import argparse
import os

import jax
import numpy as np

from configs import reformer_digits
from experiments import cli, editions, progress, runs, sweeps
from experiments.generation import report
from experiments.runs import for_run
from lfpe.data import digit_images
from lfpe.models import reformer
from lfpe.train import trainer, workdir

FIG_3A = ("embed_2d", "embed_1d", "sine_2d", "sine_1d", "fourier")
FIG_3B = ("fourier", "fourier_no_mlp", "mlp")
CONTROL = "none"
ENCODINGS = tuple(dict.fromkeys(FIG_3A + FIG_3B + (CONTROL,)))
ATTENTIONS = ("lsh", "full")
SWEEP_SEEDS, SWEEP_STEPS = 2, 1500
VALIDATION = 300  # the first training digits: the sweep's validation split


def load_config(
  posemb: str, attention: str, seed: int, args: argparse.Namespace, value: float | None = None
):
  """configs/reformer_digits.py for one run, with the experiment's steps and seed, and the
  encoding's knob at `value` (None: the config's own)."""
  size = 8 if args.quick else 16
  config = reformer_digits.get_config(
    f"posemb={posemb},attention={attention},size={size},small={int(args.quick)}"
  )
  for_run(config, seed=seed, steps=args.steps, eval_every=args.eval_every)
  with config.unlocked():
    config.model.posemb = sweeps.at(config.model.posemb, value)
  if args.quick:
    with config.unlocked():
      config.data.eval_split = "test[:128]"
  return config


def spec(posemb: str, args: argparse.Namespace) -> str:
  """The encoding spec the config gives `posemb` (its defaults arm)."""
  return load_config(posemb, args.attentions[0], 0, args).model.posemb


def swept_arms(args: argparse.Namespace) -> dict[str, tuple[float, ...]]:
  """The sweep's arms, `attention/posemb`, with their base grids: each encoding this
  invocation trains that has a knob (`args.swept`: all of them but in `--quick`)."""
  grids = {p: sweeps.grid(spec(p, args), args.values) for p in args.encodings if p in args.swept}
  return {f"{a}/{p}": grid for a in args.attentions for p, grid in grids.items() if grid}


def arm_config(args: argparse.Namespace, arm: str, value: float | None, seed: int):
  """`load_config` of `arm` (`attention/posemb`)."""
  attention, posemb = arm.split("/")
  return load_config(posemb, attention, seed, args, value)


def sweep_runs(args: argparse.Namespace, grids: dict[str, tuple[float, ...]]) -> list[runs.Run]:
  """The sweep: each swept encoding at each value of its grid (`grids`, by arm), trained on
  the training digits but the first `VALIDATION` and scored on those (never on the test
  digits)."""
  held = 64 if args.quick else VALIDATION

  def make(arm: str, value: float, seed: int):
    config = arm_config(args, arm, value, seed)
    config = for_run(config, seed=seed, steps=args.sweep_steps, eval_every=args.sweep_steps)
    return runs.on_validation(config, held)

  return runs.sweep_runs(grids, args.sweep_seeds, make, args.out, runs.SWEEP_FIRST_SEED)


def planned_sweep(args: argparse.Namespace, results: dict) -> list[runs.Run]:
  """The sweep as far as `results` decide it: each arm's grid around its own knob, widened
  past an edge that leads (`sweeps.widen`)."""
  return sweeps.plan(
    lambda grids: sweep_runs(args, grids),
    swept_arms(args),
    results,
    report.validation_bpd,
    seeds=args.sweep_seeds,
    higher_is_better=False,
    widenings=args.widenings,
  )


def zero_attention(variables):
  """The variables with every attention sub-layer's output projection set to zero."""
  params = jax.tree_util.tree_map_with_path(
    lambda path, x: x * 0 if "attention" in str(path) and "'out'" in str(path) else x,
    variables["params"],
  )
  return {**variables, "params": params}


def planned(args: argparse.Namespace, chosen: dict[str, float]) -> list[runs.Run]:
  """Every run of the record, in the order they train (`runs.record_runs`, seed-major): each
  encoding at defaults, and at the value the sweep chose (`chosen`, keyed `attention/posemb`;
  the same run when that is the default, none where the sweep has not chosen yet, e.g. for
  --status)."""
  arms = [f"{attention}/{posemb}" for attention in args.attentions for posemb in args.encodings]
  make = lambda arm, value, seed: arm_config(args, arm, value, seed)
  return runs.record_runs(arms, args.seeds, chosen, make, args.out)


def score(run: runs.Run, summary: dict) -> dict:
  """A trained run's curve, final held-out bits per dim, time (and for `fourier`, bits per
  dim with attention zeroed)."""
  result = {
    "final": summary["eval"]["bits_per_dim"],
    "curve": runs.curve(run.workdir, "bits_per_dim"),
    "seconds": summary.get("wall_s"),
  }
  if run.key.startswith("sweep/"):
    print(f"{run.key}: validation {result['final']:.3f} bits/dim", flush=True)
    return result
  if run.key.split("/")[1] == "fourier" and not sweeps.is_tuned_key(run.key):
    ablated = trainer.evaluate(run.config, run.workdir, edit=zero_attention)
    result["zero_attention"] = ablated["bits_per_dim"]
  print(f"{run.key}: {result['final']:.3f} bits/dim", flush=True)
  return result


def strictly_causal(run: runs.Run) -> float:
  """Held-out bits/dim of a trained LSH run re-scored with `strictly_causal=True`, the same
  parameters. It also narrows each query's window (from its chunk and the one before, up to
  chunk_len + k sorted positions, to chunk_len) under weights trained on the wider one, so
  strict − recorded bounds from above what the likelihood gains from later positions'
  buckets (lfpe/nn/lsh.py, "Causality"): leak, lost context and that mismatch together."""
  config = run.config.copy_and_resolve_references()
  with config.unlocked():
    config.model.strictly_causal = True
  return trainer.evaluate(config, run.workdir)["bits_per_dim"]


def rescore(record: list[runs.Run], results: dict, save, *, quick: bool) -> None:
  """Adds `strict` (`strictly_causal`) to each LSH run of the record (--quick: `fourier`
  only). A run whose checkpoints are gone (pruned to save disk) keeps its recorded score and
  is named; the report pairs strict with recorded over the seeds that have both."""
  for run in record:
    lsh = run.config.model.attention == "lsh" and not run.config.model.strictly_causal
    if not lsh or "strict" in results[run.key] or (quick and "/fourier/" not in run.key):
      continue
    if not workdir.has_checkpoints(run.workdir):
      print(f"{run.key}: no checkpoint left to re-score strictly causal; skipped", flush=True)
      continue
    results[run.key]["strict"] = strictly_causal(run)
    save(results)


def draw_samples(run: runs.Run, num: int = 16) -> np.ndarray:
  """`num` images from the trained model of `run`."""
  prog, variables = trainer.restore(run.config, run.workdir)
  draw = jax.jit(lambda v, key: reformer.sample(prog.model, v, key, num))
  return np.asarray(draw(variables, jax.random.key(0)))


def main(argv: list[str] | None = None) -> dict:
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="tiny: a test of the pipeline")
  parser.add_argument("--out", default="experiments/generation_v2", help="the second edition's")
  cli.add_seeds_flag(parser, default=3)
  parser.add_argument("--steps", type=cli.at_least(1), default=3000, help="from the learning curve")
  parser.add_argument("--eval-every", type=cli.at_least(1), default=250)
  parser.add_argument("--attentions", default="lsh", help=f"comma-separated, of {ATTENTIONS}")
  parser.add_argument("--sweep-seeds", type=cli.at_least(1), default=SWEEP_SEEDS)
  parser.add_argument("--sweep-steps", type=cli.at_least(1), default=SWEEP_STEPS)
  parser.add_argument(
    "--encodings",
    default=",".join(ENCODINGS),
    help="comma-separated: train only these now (the report needs them all)",
  )
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  cli.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  cli.settle_mode(args)
  args.attentions = args.attentions.split(",")
  if set(args.attentions) - set(ATTENTIONS):
    parser.error(f"--attentions={','.join(args.attentions)}: choose from {ATTENTIONS}")
  args.encodings = args.encodings.split(",")
  if set(args.encodings) - set(ENCODINGS):
    parser.error(f"--encodings={','.join(args.encodings)}: choose from {ENCODINGS}")
  args.values, args.swept, args.widenings = sweeps.VALUES, ENCODINGS, sweeps.WIDENINGS
  if args.quick:  # the sweep of two encodings at two values (and one widening): every phase
    args.seeds, args.steps, args.eval_every = 2, 6, 3
    args.sweep_seeds, args.sweep_steps, args.values, args.swept = 1, 4, 2, ("fourier", "sine_2d")
    args.widenings = 1
  path = os.path.join(args.out, "results.json")
  results = runs.load(path)
  editions.refuse_unstamped(args.out, results, newer="experiments/generation_v2")
  if args.status:
    sweep = planned_sweep(args, results)
    record = planned(args, report.chosen(runs.chosen(sweep, results)))
    progress.status(sweep + record, results, jobs=args.jobs)
    return {}
  save = runs.saver(path)
  train = lambda planned: runs.execute(planned, results, score, save, jobs=args.jobs)
  sweep = sweeps.run(lambda: planned_sweep(args, results), train, results)
  chosen = report.chosen(runs.chosen(sweep, results))
  sweeps.require(chosen, swept_arms(args))
  record = planned(args, chosen)
  results = runs.execute(record, results, score, save, jobs=args.jobs)
  if set(args.encodings) != set(ENCODINGS):
    print("trained the --encodings asked for; the report is written once all are trained")
    return results
  rescore(record, results, save, quick=args.quick)
  report.write(results, args.out)
  by_key = {run.key: run for run in record}
  pictured = {  # `fourier` at its chosen γ, the lowest seed with checkpoints left
    a: runs.kept(
      by_key, f"{a}/fourier", spec("fourier", args), chosen.get(f"{a}/fourier"), args.seeds
    )
    for a in args.attentions
  }
  if None in pictured.values():
    print("samples.png not drawn: no fourier run has checkpoints left", flush=True)
    return results
  samples = {a: draw_samples(run, num=4 if args.quick else 16) for a, run in pictured.items()}
  report.sample_grid(samples, os.path.join(args.out, "samples.png"), digit_images.LEVELS)
  return results


if __name__ == "__main__":
  cli.run(main)
