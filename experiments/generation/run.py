"""Reformer-style generation of whole digit images with eight position encodings (002 Fig. 3).

  python -m experiments.generation.run --quick --out=/tmp/generation_quick  # CI, < 5 min
  python -m experiments.generation.run --status --out=experiments/generation   # done / left, ETA
  python -m experiments.generation.run --out=experiments/generation         # the record

Trains `configs/reformer_digits.py` (a tiny causal Reformer on 16x16 digits in 8 grey levels,
whose pixels depend strongly on where they are) for Fig. 3a's `embed_2d`, `embed_1d`,
`sine_2d`, `sine_1d`, `fourier`, Fig. 3b's `fourier_no_mlp`, `mlp` (and `fourier`), and the
no-position control `none`, `--seeds` paired seeds each (seed s of every encoding sees the
same batches), with LSH attention (002's; `--attentions=lsh,full` adds dense causal
attention), through the regular trainer (one workdir per run under `--out/runs`, so a stopped
record resumes where it stopped). Each run's held-out bits per dim are read from its metrics
(an evaluation every `--eval-every` steps: the learning curve). Then every `fourier` run is
scored again with its attention output zeroed (does the model use its attention?), one
`fourier` model per attention draws sample images, and `report.py` writes `results.json`,
`tables.md`, `claims.json`, the two figures and `samples.png`.
"""

from __future__ import annotations

import argparse
import json
import os

import jax
import numpy as np

from configs import reformer_digits
from experiments import runs
from experiments.generation import report
from experiments.runs import for_run
from lfpe.data import digit_images
from lfpe.models import reformer
from lfpe.train import trainer

FIG_3A = ("embed_2d", "embed_1d", "sine_2d", "sine_1d", "fourier")
FIG_3B = ("fourier", "fourier_no_mlp", "mlp")
CONTROL = "none"
ENCODINGS = tuple(dict.fromkeys(FIG_3A + FIG_3B + (CONTROL,)))
ATTENTIONS = ("lsh", "full")


def load_config(posemb: str, attention: str, seed: int, args: argparse.Namespace):
  """configs/reformer_digits.py for one run, with the experiment's steps and seed."""
  size = 8 if args.quick else 16
  config = reformer_digits.get_config(
    f"posemb={posemb},attention={attention},size={size},small={int(args.quick)}"
  )
  for_run(config, seed=seed, steps=args.steps, eval_every=args.eval_every)
  if args.quick:
    with config.unlocked():
      config.data.eval_split = "test[:128]"
  return config


def curve(workdir: str) -> list[list[float]]:
  """`[[step, held-out bits per dim], ...]` from a run's metrics.jsonl."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  points = {r["step"]: r["bits_per_dim"] for r in rows if r.get("split") == "eval"}
  return [[step, points[step]] for step in sorted(points)]


def zero_attention(variables):
  """The variables with every attention sub-layer's output projection set to zero."""
  params = jax.tree_util.tree_map_with_path(
    lambda path, x: x * 0 if "attention" in str(path) and "'out'" in str(path) else x,
    variables["params"],
  )
  return {**variables, "params": params}


def planned(args: argparse.Namespace) -> list[runs.Run]:
  """Every run of the record, in the order they train."""
  return [
    runs.Run(
      f"{attention}/{posemb}/{seed}",
      load_config(posemb, attention, seed, args),
      os.path.join(args.out, "runs", attention, posemb, str(seed)),
    )
    for attention in args.attentions
    for seed in range(args.seeds)
    for posemb in args.encodings
  ]


def score(run: runs.Run, summary: dict) -> dict:
  """A trained run's curve, final held-out bits per dim, time (and for `fourier`, bits per
  dim with attention zeroed)."""
  result = {
    "final": summary["eval"]["bits_per_dim"],
    "curve": curve(run.workdir),
    "seconds": summary.get("wall_s"),
  }
  if run.key.split("/")[1] == "fourier":
    ablated = trainer.evaluate(run.config, run.workdir, edit=zero_attention)
    result["zero_attention"] = ablated["bits_per_dim"]
  print(f"{run.key}: {result['final']:.3f} bits/dim", flush=True)
  return result


def draw_samples(attention: str, args: argparse.Namespace, num: int = 16) -> np.ndarray:
  """`num` images from the seed-0 `fourier` model with `attention`."""
  config = load_config("fourier", attention, 0, args)
  workdir = os.path.join(args.out, "runs", attention, "fourier", "0")
  prog, variables = trainer.restore(config, workdir)
  draw = jax.jit(lambda v, key: reformer.sample(prog.model, v, key, num))
  return np.asarray(draw(variables, jax.random.key(0)))


def main(argv: list[str] | None = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="tiny: a test of the pipeline")
  parser.add_argument("--out", default="experiments/generation")
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=3000, help="from the learning curve")
  parser.add_argument("--eval-every", type=int, default=250)
  parser.add_argument("--attentions", default="lsh", help=f"comma-separated, of {ATTENTIONS}")
  parser.add_argument(
    "--encodings",
    default=",".join(ENCODINGS),
    help="comma-separated: train only these now (the report needs them all)",
  )
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  runs.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  args.attentions = args.attentions.split(",")
  if set(args.attentions) - set(ATTENTIONS):
    parser.error(f"--attentions={','.join(args.attentions)}: choose from {ATTENTIONS}")
  args.encodings = args.encodings.split(",")
  if set(args.encodings) - set(ENCODINGS):
    parser.error(f"--encodings={','.join(args.encodings)}: choose from {ENCODINGS}")
  if args.quick:
    args.seeds, args.steps, args.eval_every = 2, 6, 3
  if args.status:
    runs.status(planned(args), runs.load(os.path.join(args.out, "results.json")), jobs=args.jobs)
    return {}
  path = os.path.join(args.out, "results.json")
  results = runs.execute(planned(args), runs.load(path), score, runs.saver(path), jobs=args.jobs)
  if set(args.encodings) != set(ENCODINGS):
    print("trained the --encodings asked for; the report is written once all are trained")
    return results
  samples = {a: draw_samples(a, args, num=4 if args.quick else 16) for a in args.attentions}
  report.write(results, samples, args.out, levels=digit_images.LEVELS)
  return results


if __name__ == "__main__":
  main()
