"""Times DETR's Hungarian matching, `hungarian_match`, with both methods.

  JAX_PLATFORMS=cpu python -m benchmarks.matching [--targets 8] [--classes 91]

For batch 64 and 8 and Q = 100 and 20 queries, the `[B, Q, T]` cost of `matching_cost`
on random predictions against T = 8 padded targets (each image keeps a random 0..T of
them) is matched by the jitted `hungarian_match` with method "scipy" (host callback) and
"optax" (compiled); the cost itself is computed outside the timed function. Prints a
Markdown table (ms per batch, optax / scipy measured in the same run) and the load.
The goal: matching under 10 % of a DETR-lite train step with the faster method on CPU.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import machine, time_jitted
from lfpe.tasks.detection_ops import hungarian_match, matching_cost

SHAPES = ((64, 100), (8, 100), (64, 20), (8, 20))  # (batch, queries)


def problem(batch: int, queries: int, targets: int, classes: int) -> tuple[jax.Array, jax.Array]:
  """(cost [B, Q, T], target_valid [B, T]) of random predictions and targets."""
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(batch, queries, classes + 1)).astype(np.float32)
  boxes = rng.uniform(0.05, 0.5, size=(batch, queries, 4)).astype(np.float32)
  target_boxes = rng.uniform(0.05, 0.5, size=(batch, targets, 4)).astype(np.float32)
  labels = rng.integers(0, classes, size=(batch, targets)).astype(np.int32)
  counts = rng.integers(0, targets + 1, size=(batch, 1))
  valid = np.arange(targets)[None, :] < counts
  cost = jax.jit(matching_cost)(logits, boxes, labels, target_boxes)
  return cost, jnp.asarray(valid)


def table(targets: int, classes: int) -> list[tuple[int, int, float, float]]:
  """(batch, queries, scipy seconds, optax seconds) per shape."""
  rows = []
  for batch, queries in SHAPES:
    cost, valid = problem(batch, queries, targets, classes)
    seconds = [  # 2 s per median: timings on a shared 2-core machine are noisy
      time_jitted(functools.partial(hungarian_match, method=method), cost, valid, min_seconds=2.0)
      for method in ("scipy", "optax")
    ]
    rows.append((batch, queries, *seconds))
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--targets", type=int, default=8)
  parser.add_argument("--classes", type=int, default=91)
  args = parser.parse_args()
  load = os.getloadavg()
  print(f"Machine: {machine()}; date {datetime.date.today()}")
  print(f"Load average before: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min)\n")
  print("| batch | Q | T | scipy (ms) | optax (ms) | optax / scipy |\n|---|---|---|---|---|---|")
  for batch, queries, t_scipy, t_optax in table(args.targets, args.classes):
    print(
      f"| {batch} | {queries} | {args.targets} | {t_scipy * 1e3:.3f} | {t_optax * 1e3:.3f} "
      f"| {t_optax / t_scipy:.2f} |"
    )
  print(f"\nLoad average after: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
  main()
