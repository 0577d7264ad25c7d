"""Seeds of one configuration as one vmapped train step, against one seed after another.

  python -m benchmarks.seeds_vmap [--config configs/reformer_crops.py] [--arg posemb=fourier]
      [--seeds 3] [--steps 30]

Takes the trainer's own step (`lfpe.train.steps.train_step` with the config's task, model
and optimizer), jits it once for one seed and once vmapped over a leading seed axis of the
state and of the dropout / hashing key (every seed sees the same batch, as in
`lfpe.studies.multiseed`), and times `--steps` updates of `--seeds` seeds both ways on a
fixed batch of the config's data, one device. Prints the ratio for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import time

import jax

from benchmarks.aot_tpu import load_config
from benchmarks.record_steps import step_parts
from lfpe.train import sharding, steps

ROOT = os.path.join(os.path.dirname(__file__), "..")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(ROOT, "configs", "reformer_crops.py"))
  parser.add_argument("--arg", default="posemb=fourier")
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=30)
  args = parser.parse_args()
  config = load_config(args.config, args.arg)
  task, model, tx, schedule, batch = step_parts(config)
  init = functools.partial(
    steps.init_state, example=task.example_batch(config), task=task, model=model, tx=tx
  )
  step = lambda state, batch, key: steps.train_step(
    state, batch, task=task, model=model, tx=tx, schedule=schedule, dropout_rng=key
  )
  keys = jax.random.split(jax.random.key(0), args.seeds)
  init_one = jax.jit(lambda k: sharding.unbox(init(k)))

  def timed(run, state) -> float:
    state, metrics = run(state)  # compile
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(args.steps):
      state, metrics = run(state)
    jax.block_until_ready(metrics)
    return (time.perf_counter() - start) / args.steps

  single = jax.jit(step, donate_argnums=0)
  states = [init_one(k) for k in keys]

  def one_after_another(states):
    out = [single(s, batch, k) for s, k in zip(states, keys, strict=True)]
    return [s for s, _ in out], [m for _, m in out]

  loop = timed(one_after_another, states)
  vmapped = jax.jit(jax.vmap(step, in_axes=(0, None, 0)), donate_argnums=0)
  stacked = jax.jit(jax.vmap(lambda k: sharding.unbox(init(k))))(keys)
  vmap = timed(lambda s: vmapped(s, batch, keys), stacked)
  print(
    f"{datetime.date.today()}; jax {jax.__version__}; {jax.devices()[0].device_kind}; "
    f"{os.path.basename(args.config)}:{args.arg}; batch {config.batch_size}; "
    f"{args.seeds} seeds\n\n| strategy | ms per step of all seeds | speed vs one after another |\n"
    f"|---|---|---|\n| one after another | {1e3 * loop:.1f} | 1.00x |\n"
    f"| vmapped | {1e3 * vmap:.1f} | {loop / vmap:.2f}x |"
  )


if __name__ == "__main__":
  main()
