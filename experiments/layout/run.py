"""Widget captioning on synthetic screens with 002's ten box encodings and a control (Tables 3-4).

  python -m experiments.layout.run --quick --out=/tmp/layout_quick  # CI, < 5 min
  python -m experiments.layout.run --status --out=experiments/layout   # done / left, ETA
  python -m experiments.layout.run --out=experiments/layout         # the record

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
"""

from __future__ import annotations

import argparse
import json
import os

import jax
import numpy as np

from configs import layout_synthetic
from experiments import cli, runs
from experiments.layout import report
from experiments.runs import for_run
from lfpe import encodings
from lfpe.data import builders, screens
from lfpe.models import layout, layout_decode
from lfpe.train import trainer

CONTROL = "No-position"  # the control row: the captioner without boxes
ROWS = (*layout.TABLE3, CONTROL)
POSEMBS = {**layout.TABLE3, CONTROL: "none"}
EXAMPLE_ROW = "Learnable-Fourier+MLP-4/1"


def slug(row: str) -> str:
  """A row's name as a path part: `Learnable-Fourier+MLP-4/1` -> `learnable-fourier-mlp-4-1`."""
  return row.lower().replace("+", "-").replace("/", "-")


def load_config(row: str, seed: int, args: argparse.Namespace):
  """configs/layout_synthetic.py for one Table 3 row, with the experiment's steps and seed.

  The row's groups are passed as given in `TABLE3` (an encoding's default is 1 group: the
  config's default of 4 would turn Table 3's `mlp` into a 4/1 MLP)."""
  name, options = encodings.parse(POSEMBS[row])
  arg = f"posemb={name},groups={options.get('groups', 1)}" + (",small=1" if args.quick else "")
  config = for_run(layout_synthetic.get_config(arg), seed=seed, steps=args.steps)
  with config.unlocked():
    config.task.meteor = not args.quick  # the record scores METEOR (java); CI's quick run not
  return config


def workdir(row: str, seed: int, args: argparse.Namespace) -> str:
  return os.path.join(args.out, "runs", slug(row), str(seed))


def planned(args: argparse.Namespace) -> list[runs.Run]:
  """Every run of the record, row by row."""
  return [
    runs.Run(f"{slug(row)}/{seed}", load_config(row, seed, args), workdir(row, seed, args))
    for row in ROWS
    for seed in range(args.seeds)
  ]


def score(run: runs.Run, summary: dict) -> dict:
  """A trained run's final eval metrics and seconds."""
  row = next(r for r in ROWS if run.key == f"{slug(r)}/{run.config.seed}")
  print(f"{row} seed {run.config.seed}: CIDEr {summary['eval']['CIDEr']:.1f}", flush=True)
  seconds = summary.get("wall_s")
  return {"row": row, "seed": run.config.seed, "eval": summary["eval"], "seconds": seconds}


def box_encoding_params(row: str, args: argparse.Namespace) -> tuple[dict, dict]:
  """`row` seed 0's box-encoding parameters at initialisation and after training."""
  config = load_config(row, 0, args)
  prog, trained = trainer.restore(config, workdir(row, 0, args))
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
  prog, variables = trainer.restore(config, workdir(EXAMPLE_ROW, 0, args))
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
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small data, a few steps: CI")
  parser.add_argument("--out", default="experiments/layout")
  parser.add_argument("--seeds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=0, help="override total_steps (0: config's)")
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  runs.add_jobs_flag(parser)
  args = parser.parse_args(argv)
  runs.settle_mode(args)
  if args.quick:
    args.seeds, args.steps = 1, args.steps or 4
  if args.status:
    runs.status(planned(args), runs.load(os.path.join(args.out, "results.json")), jobs=args.jobs)
    return {}
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "results.json")
  results = runs.execute(planned(args), runs.load(path), score, runs.saver(path), jobs=args.jobs)
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
