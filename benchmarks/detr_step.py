"""DETR-lite train-step time with each Hungarian matcher, and matching's share of the step.

  python -m benchmarks.detr_step [--batch 32] [--steps 20] [--groups 1,2,4]

Builds configs/detr_shapes.py (the tiny DETR of the detection experiment, 64 px canvas,
20 queries, up to 8 targets) on one device, times the jitted train step (donated state)
with `task.matcher` = scipy and optax on a fixed random batch, and times
`hungarian_match` alone on the same cost shapes (one call per decoder layer, as the step
makes), so the matching share = layers x match time / step time; then the optax step with
each number of Group DETR query groups (`model.query_groups`). Figures go to
benchmarks/README.md as ratios against the scipy (or one-group) step measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from lfpe.tasks.detection_ops import hungarian_match
from lfpe.train import program, sharding

CONFIG = os.path.join(os.path.dirname(__file__), "..", "configs", "detr_shapes.py")


def _config(matcher: str, batch: int, groups: int = 1):
  spec = importlib.util.spec_from_file_location("detr_shapes", CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config("posemb=fourier")
  with config.unlocked():
    config.task.matcher, config.batch_size = matcher, batch
    config.model.query_groups = groups
    config.mesh.data = 1
  return config


def random_batch(prog, batch: int, rng: np.random.Generator) -> dict:
  """A random batch of the task's shapes with 1-8 valid targets per image."""
  example = prog.task.example_batch(prog.config)
  out = {k: np.repeat(v, batch, axis=0) for k, v in example.items()}
  out["image"] = rng.random(out["image"].shape, np.float32)
  t = out["boxes"].shape[1]
  out["target_valid"] = np.arange(t)[None] < rng.integers(1, t + 1, (batch, 1))
  out["boxes"] = np.concatenate(
    [rng.uniform(0.2, 0.8, (batch, t, 2)), rng.uniform(0.1, 0.3, (batch, t, 2))], -1
  ).astype(np.float32)
  out["labels"] = rng.integers(0, 6, (batch, t)).astype(np.int32)
  return jax.device_put(out, prog.data_sharding)


def time_step(
  matcher: str, batch: int, steps: int, groups: int = 1
) -> tuple[float, int, tuple[int, ...]]:
  """(seconds per train step, decoder layers, cost shape [B, Q, T]) for `matcher`."""
  config = _config(matcher, batch, groups)
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  prog = program.build(config, mesh)
  state, data = prog.init_state(), random_batch(prog, batch, np.random.default_rng(0))
  state, metrics = prog.train_step(state, data, prog.dropout_rng)  # compile
  jax.block_until_ready(metrics)
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics = prog.train_step(state, data, prog.dropout_rng)
  jax.block_until_ready(metrics)
  layers, queries = prog.model.decoder_depth, prog.model.num_queries
  return (time.perf_counter() - start) / steps, layers, (batch, queries, data["boxes"].shape[1])


def time_matching(method: str, shape: tuple[int, ...], repeats: int = 50) -> float:
  """Seconds per jitted `hungarian_match` call on random costs of `shape`."""
  rng = np.random.default_rng(1)
  cost = jnp.asarray(rng.random(shape, np.float32))
  valid = jnp.asarray(np.arange(shape[2])[None] < rng.integers(1, shape[2] + 1, (shape[0], 1)))
  match = jax.jit(functools.partial(hungarian_match, method=method))
  jax.block_until_ready(match(cost, valid))
  start = time.perf_counter()
  for _ in range(repeats):
    out = match(cost, valid)
  jax.block_until_ready(out)
  return (time.perf_counter() - start) / repeats


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--groups", default="1,2,4", help="query groups to time (optax)")
  args = parser.parse_args()
  print(
    f"Date {datetime.date.today()}; jax {jax.__version__}; {jax.devices()[0].device_kind}; "
    f"load {os.getloadavg()[0]:.1f}\n"
  )
  print("| matcher | step (ms) | vs scipy step | matching (ms/step) | matching share |")
  print("|---|---|---|---|---|")
  base = None
  for matcher in ("scipy", "optax"):
    seconds, layers, shape = time_step(matcher, args.batch, args.steps)
    base = base or seconds
    match = layers * time_matching(matcher, shape)
    print(
      f"| {matcher} | {seconds * 1e3:.1f} | {seconds / base:.2f}x | {match * 1e3:.2f} | "
      f"{100 * match / seconds:.1f} % |",
      flush=True,
    )
  print("\n| query groups (optax) | step (ms) | vs one group |\n|---|---|---|")
  base = None
  for groups in map(int, args.groups.split(",")):
    seconds = time_step("optax", args.batch, args.steps, groups)[0]
    base = base or seconds
    print(f"| {groups} | {seconds * 1e3:.1f} | {seconds / base:.2f}x |", flush=True)


if __name__ == "__main__":
  main()
