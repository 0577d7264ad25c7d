"""DETR-lite with four position encodings under 002's two protocols (Tables 1 and 2).

  python -m experiments.detection.run --quick --out=/tmp/detection_quick   # CI, < 5 min
  python -m experiments.detection.run --out=experiments/detection          # the record
  python -m experiments.detection.run --status --out=experiments/detection # done / left, ETA

Trains `configs/detr_shapes.py` for `detr_sine` (Sine-2D), `embed_2d`, `mlp` and `fourier`
(Learnable-Fourier+MLP), `--seeds` seeds each, under protocol `all` (every size in
training and testing, normalised positions: Table 1) and `heldout` (the two largest sizes
for testing only, raw positions: Table 2), through the regular trainer (one workdir per
run under `--out/runs`, `experiments/runs.py`: a stopped record resumes where it stopped, a
finished run is read back, `--status` reports without training). Then every
run is scored at each test size alone (`trainer.evaluate_each`: one restore and one
compiled eval step for the five sizes; `--quick` tests one size and skips this), and
`report.py` writes
`results.json`, `tables.md` (mean ± 95 % CI beside 002's numbers) and the AP-vs-size plot;
`predictions.png` shows Learnable-Fourier+MLP's boxes on test images (`picture.py`).
"""

from __future__ import annotations

import argparse
import os

from configs import detr_shapes
from experiments import runs
from experiments.detection import picture, report
from experiments.runs import for_run
from lfpe.train import trainer

ENCODINGS = ("detr_sine", "embed_2d", "mlp", "fourier")
PROTOCOLS = ("all", "heldout")
PICTURED = "fourier"  # whose predictions predictions.png shows (seed 0, each protocol)


def load_config(posemb: str, protocol: str, seed: int, args: argparse.Namespace):
  """configs/detr_shapes.py for one run, with the experiment's steps and seed."""
  arg = f"posemb={posemb},protocol={protocol}" + (",small=1" if args.quick else "")
  return for_run(detr_shapes.get_config(arg), seed=seed, steps=args.steps)


def run_dir(args: argparse.Namespace, protocol: str, posemb: str, seed: int) -> str:
  return os.path.join(args.out, "runs", protocol, posemb, str(seed))


def planned(args: argparse.Namespace) -> list[runs.Run]:
  """Every run of the record, seed-major: a stopped record has whole seeds."""
  return [
    runs.Run(
      f"{protocol}/{posemb}/{seed}",
      load_config(posemb, protocol, seed, args),
      run_dir(args, protocol, posemb, seed),
    )
    for seed in range(args.seeds)
    for protocol in PROTOCOLS
    for posemb in ENCODINGS
  ]


def score(run: runs.Run, summary: dict, quick: bool) -> dict:
  """A trained run's results entry: its eval, and AP at every test size alone."""
  tested = run.config.data.detection.test_sizes
  by_size = {str(tested[0]): summary["eval"]} if len(tested) == 1 else {}
  sizes = [] if quick else report.SIZES
  if sizes:
    scores = trainer.evaluate_each(one_size(run.config, sizes), run.workdir)
    by_size.update(zip(map(str, sizes), scores, strict=True))
  print(f"{run.key}: AP {summary['eval']['AP']:.4f}", flush=True)
  return {"eval": summary["eval"], "by_size": by_size, "seconds": summary.get("wall_s")}


def one_size(config, sizes) -> list:
  """`config` once per test image size, each testing that size alone."""
  configs = []
  for size in sizes:
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.data.detection.test_sizes = (size,)
    configs.append(variant)
  return configs


def main(argv: list[str] | None = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="tiny sizes: a test of the pipeline")
  parser.add_argument("--out", default="experiments/detection")
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=0, help="override total_steps (0: config's)")
  parser.add_argument("--status", action="store_true", help="print what is done and left")
  args = parser.parse_args(argv)
  if args.quick:
    args.seeds, args.steps = 1, args.steps or 4
  if args.status:
    runs.status(planned(args), runs.load(os.path.join(args.out, "results.json")))
    return {}
  results = runs.load(os.path.join(args.out, "results.json"))
  save = runs.saver(os.path.join(args.out, "results.json"))
  runs.execute(planned(args), results, lambda run, summary: score(run, summary, args.quick), save)
  report.write(results, args.out)
  scenes = {
    protocol: picture.predictions(
      load_config(PICTURED, protocol, 0, args), run_dir(args, protocol, PICTURED, 0), count=4
    )
    for protocol in PROTOCOLS
  }
  picture.draw(scenes, os.path.join(args.out, "predictions.png"))
  return results


if __name__ == "__main__":
  main()
