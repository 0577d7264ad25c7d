"""Test passes of the resolution benchmark's ViT at each eval batch size, on XLA:CPU.

  python -m benchmarks.eval_batch --sizes 96,128,192 --batches 200,40,8,4

For each test size: the arm's model (configs/vit_shape_layout.py, random weights scaled so
that every layer matters) scores `--scenes` stored test scenes (`shape_layout/colour_test_S`,
prepared if missing) once per batch size, the batch sizes interleaved over `--repeats`
rounds (best round kept), and its logits are compared with the first batch size's: the
figure to read is each batch size's time against the first's, measured in the same run.
The loader's time to read the scenes at each batch size is timed apart (one pass each).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import machine
from experiments.resolution import plan, run
from lfpe.train import evaluation, trainer


def size_config(arm: str, size: int):
  """The evaluation config of `arm`'s first policy at `size` px (`plan.evals`)."""
  args = argparse.Namespace(quick=False, steps=plan.STEPS)
  config = run.load_config(plan.by_slug()[arm], 0, args)
  tests = plan.evals(plan.by_slug()[arm], config.model.posemb, (size,), config.data.name)
  name = next(iter(tests))
  with config.unlocked():
    config.evals = {name: tests[name]}
  return evaluation.configs(config)[name]


def read(config, batch: int, scenes: int) -> tuple[np.ndarray, float]:
  """The first `scenes` test images, read `batch` at a time, and the seconds it took."""
  sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  loader = trainer.default_loader(
    config.data, global_batch_size=batch, seed=0, train=False, mesh=sharding
  )
  start, images = time.perf_counter(), []
  for b in loader:
    images.append(np.asarray(b["image"]))
    if sum(len(x) for x in images) >= scenes:
      break
  return np.concatenate(images)[:scenes], time.perf_counter() - start


def random_variables(model, image: jax.Array) -> dict:
  """Initial variables with every leaf redrawn N(0, 0.05²): the zero-initialised head would
  make every logit 0 and the bitwise comparison empty."""
  variables = model.init(jax.random.key(0), image, train=False)
  leaves, tree = jax.tree.flatten(variables)
  keys = jax.random.split(jax.random.key(1), len(leaves))
  draw = lambda key, x: 0.05 * jax.random.normal(key, x.shape, x.dtype)
  redrawn = [draw(k, x) for k, x in zip(keys, leaves, strict=True)]
  return jax.tree.unflatten(tree, redrawn)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--arm", default="rope_axial")
  parser.add_argument("--sizes", default="96,128,192")
  parser.add_argument("--batches", default="200,40,8,4")
  parser.add_argument("--scenes", type=int, default=800)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  batches = [int(b) for b in args.batches.split(",")]
  print(machine())
  print("| size | batch | forward s | vs first | loader s | max |Δlogit| vs first |")
  print("|---|---|---|---|---|---|")
  for size in map(int, args.sizes.split(",")):
    config = size_config(args.arm, size)
    _, model = trainer.checked_task_and_model(config, 1, check_data=False)
    images, _ = read(config, batches[0], args.scenes)
    variables = random_variables(model, jnp.asarray(images[:1]))
    forward = jax.jit(lambda v, x, model=model: model.apply(v, x, train=False))
    chunks = {
      b: list(map(jnp.asarray, np.split(images, range(b, len(images), b)))) for b in batches
    }
    logits = {b: np.concatenate([forward(variables, x) for x in chunks[b]]) for b in batches}
    best = dict.fromkeys(batches, float("inf"))
    for _ in range(args.repeats):
      for b in batches:
        start = time.perf_counter()
        for x in chunks[b]:  # one batch at a time, as `evaluation.run_all` reads them
          jax.block_until_ready(forward(variables, x))
        best[b] = min(best[b], time.perf_counter() - start)
    for b in batches:
      loader_s = read(config, b, args.scenes)[1]
      diff = float(np.abs(logits[b] - logits[batches[0]]).max())
      ratio = best[batches[0]] / best[b]
      print(f"| {size} | {b} | {best[b]:.2f} | {ratio:.2f}x | {loader_s:.2f} | {diff:g} |")


if __name__ == "__main__":
  main()
