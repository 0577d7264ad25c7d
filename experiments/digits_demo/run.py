"""The Quickstart job: ViTs with embed_1d, sine_2d and fourier on digits, compared.

  python -m experiments.digits_demo.run [--seeds 1] [--out experiments/digits_demo]

Builds the embedded digits dataset (offline, once), trains and evaluates one ViT per
encoding and seed with `configs/vit_digits.py` through the regular trainer, then
prints a Markdown table (test accuracy mean ± std over seeds, wall time) and writes
`results.md` and `digits_demo.png` (test accuracy and training loss curves).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from configs import vit_digits
from lfpe.train import trainer

ENCODINGS = ("embed_1d", "sine_2d", "fourier")


def run_one(posemb: str, seed: int, workdir: str) -> dict:
  """Trains one config and returns its summary plus the training-loss curve."""
  config = vit_digits.get_config(f"posemb={posemb}")
  with config.unlocked():
    config.seed = seed
    config.progress = False
  start = time.perf_counter()
  trainer.train_and_evaluate(config, workdir)
  seconds = time.perf_counter() - start
  with open(os.path.join(workdir, "summary.json")) as f:
    summary = json.load(f)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    train = [r for r in map(json.loads, f) if r.get("split") == "train"]
  return {
    "accuracy": summary["eval"]["accuracy"],
    "seconds": seconds,
    "curve": [(r["step"], r["loss"]) for r in train],
  }


def table(results: dict[str, list[dict]]) -> str:
  lines = ["| encoding | test accuracy (mean ± std) | seeds | s / run |", "|---|---|---|---|"]
  for name, runs in results.items():
    acc = np.array([r["accuracy"] for r in runs]) * 100
    sec = np.mean([r["seconds"] for r in runs])
    lines.append(f"| `{name}` | {acc.mean():.2f} ± {acc.std():.2f} % | {len(runs)} | {sec:.0f} |")
  return "\n".join(lines)


def plot(results: dict[str, list[dict]], path: str) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(10, 3.8))
  names = list(results)
  accs = [np.array([r["accuracy"] for r in results[n]]) * 100 for n in names]
  ax_acc.bar(names, [a.mean() for a in accs], yerr=[a.std() for a in accs], capsize=4)
  ax_acc.set_ylim(min(a.min() for a in accs) - 5, 100)
  ax_acc.set_ylabel("test accuracy (%)")
  for name in names:
    steps, losses = zip(*results[name][0]["curve"], strict=True)
    ax_loss.plot(steps, losses, label=name)
  ax_loss.set_xlabel("step")
  ax_loss.set_ylabel("training loss (seed 0)")
  ax_loss.set_yscale("log")
  ax_loss.legend()
  fig.suptitle("ViT on digits: position encodings compared")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=1)
  parser.add_argument("--encodings", default=",".join(ENCODINGS))
  parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
  parser.add_argument("--workdir", default="/tmp/lfpe_digits_demo")
  args = parser.parse_args()
  results = {}
  for name in args.encodings.split(","):
    results[name] = []
    for seed in range(args.seeds):
      run = run_one(name, seed, os.path.join(args.workdir, f"{name}_seed{seed}_{time.time_ns()}"))
      print(
        f"{name} seed {seed}: test accuracy {100 * run['accuracy']:.2f} % ({run['seconds']:.0f} s)",
        flush=True,
      )
      results[name].append(run)
  md = table(results)
  print("\n" + md)
  with open(os.path.join(args.out, "results.md"), "w") as f:
    f.write(md + "\n")
  plot(results, os.path.join(args.out, "digits_demo.png"))
  print(f"\nwrote {args.out}/results.md and {args.out}/digits_demo.png")


if __name__ == "__main__":
  main()
