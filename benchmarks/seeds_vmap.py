"""Seeds of one configuration as one vmapped train step, against one seed after another.

  python -m benchmarks.seeds_vmap [--config configs/reformer_crops.py] [--arg posemb=fourier]
      [--seeds 3] [--steps 30]

Builds the trainer's own program of the config twice on one device: with `config.seeds = S`
(one jitted step vmapped over a leading seed axis of the state, the batch and the dropout /
hashing key: `lfpe.train.seeds`) and as a plain run, whose step is called once per seed.
Times `--steps` updates of `--seeds` seeds both ways on a fixed batch of the config's data
(every seed sees the same batch). Prints the ratio for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import jax
import jax.numpy as jnp

from benchmarks.aot_tpu import load_config
from benchmarks.record_steps import step_parts
from lfpe.train import program, sharding

ROOT = os.path.join(os.path.dirname(__file__), "..")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(ROOT, "configs", "reformer_crops.py"))
  parser.add_argument("--arg", default="posemb=fourier")
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=30)
  args = parser.parse_args()
  config = load_config(args.config, args.arg)
  batch = step_parts(config)[-1]
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])

  def timed(run, state) -> float:
    state, metrics = run(state)  # compile
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(args.steps):
      state, metrics = run(state)
    jax.block_until_ready(metrics)
    return (time.perf_counter() - start) / args.steps

  plain = program.build(config, mesh)

  def one_after_another(states):
    out = [plain.train_step(s, batch, plain.dropout_rng) for s in states]
    return [s for s, _ in out], [m for _, m in out]

  loop = timed(one_after_another, [plain.init_state() for _ in range(args.seeds)])
  with config.unlocked():
    config.seeds = args.seeds
  seeded = program.build(config, mesh)
  stacked = jax.tree.map(lambda x: jnp.stack([x] * args.seeds), batch)
  vmap = timed(lambda s: seeded.train_step(s, stacked, seeded.dropout_rng), seeded.init_state())
  print(
    f"{datetime.date.today()}; jax {jax.__version__}; {jax.devices()[0].device_kind}; "
    f"{os.path.basename(args.config)}:{args.arg}; batch {config.batch_size}; "
    f"{args.seeds} seeds\n\n| strategy | ms per step of all seeds | speed vs one after another |\n"
    f"|---|---|---|\n| one after another | {1e3 * loop:.1f} | 1.00x |\n"
    f"| vmapped | {1e3 * vmap:.1f} | {loop / vmap:.2f}x |"
  )


if __name__ == "__main__":
  main()
