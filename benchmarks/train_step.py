"""ViT train-step time and model FLOPs utilisation (MFU) on this machine; input throughput.

  JAX_PLATFORMS=cpu python -m benchmarks.train_step [--variants Ti/16,S/16] [--batch 8]

1. Peak: the same run times a 2048x2048x2048 float32 matmul (2·n³ FLOPs) before every
   model — the machine's attainable matmul rate; the best of these is MFU's denominator.
2. For each ViT variant at 224x224 (batch 8, float32, Embed-1D and Learnable-Fourier),
   the compiled `Program.train_step` of configs/vit_b16_imagenet.py: XLA's cost analysis
   gives the FLOPs of one step; MFU = FLOPs / step time / peak. Step time is the best of
   `--steps` steps (on a shared machine the best is the least disturbed one).
3. Input pipeline: examples/s of the digits grain pipeline (the demo's preprocessing)
   against what the demo's train step consumes (examples/s of its compiled step).
Prints Markdown tables for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import machine, time_jitted
from configs import vit_b16_imagenet, vit_digits
from lfpe.train import program as program_lib
from lfpe.train import sharding


def matmul_peak(n: int = 2048) -> float:
  """Attainable float32 FLOP/s of one n x n x n matmul."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  return 2 * n**3 / time_jitted(jnp.matmul, a, a, repeats=20)


def random_batch(prog: program_lib.Program, batch_size: int) -> dict:
  _, abstract_batch = prog.abstract_inputs(batch_size)
  rng = np.random.default_rng(0)
  make = lambda s: jax.device_put(
    rng.integers(0, 10, s.shape).astype(s.dtype)
    if jnp.issubdtype(s.dtype, jnp.integer)
    else rng.standard_normal(s.shape).astype(s.dtype),
    s.sharding,
  )
  return jax.tree.map(make, abstract_batch)


def time_train_step(prog: program_lib.Program, batch: dict, steps: int) -> tuple[float, float]:
  """(best seconds per step, XLA FLOPs per step) of the compiled train step."""
  state = prog.init_state()
  compiled = prog.train_step.lower(state, batch).compile()
  flops = float(compiled.cost_analysis()["flops"])
  state, metrics = compiled(state, batch)  # warm up
  jax.block_until_ready(metrics)
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - t0)
  return min(times), flops


def vit_config(variant: str, posemb: str, batch: int):
  config = vit_b16_imagenet.get_config(f"posemb={posemb}")
  with config.unlocked():
    config.model.variant = variant
    config.batch_size = batch
    config.compute_dtype = "float32"
    config.model.dropout = 0.0
  return config


def pipeline_throughput(batches: int = 50) -> tuple[float, float]:
  """(examples/s the digits pipeline yields, examples/s the demo's train step consumes)."""
  from lfpe.data import pipeline

  config = vit_digits.get_config("posemb=fourier")
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  loader = pipeline.make_loader(
    config.data,
    global_batch_size=config.batch_size,
    seed=0,
    train=True,
    mesh=sharding.batch_sharding(mesh),
  )
  batch = next(loader)
  start = time.perf_counter()
  for _ in range(batches):
    batch = next(loader)
  jax.block_until_ready(batch)
  produced = batches * config.batch_size / (time.perf_counter() - start)
  prog = program_lib.build(config, mesh)
  step_s, _ = time_train_step(prog, batch, steps=30)
  return produced, config.batch_size / step_s


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default="Ti/16,S/16")
  parser.add_argument("--posembs", default="embed_1d,fourier")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--steps", type=int, default=5)
  args = parser.parse_args()
  print(f"Machine: {machine()}; date {datetime.date.today()}\n")
  mesh = sharding.make_mesh(vit_config("Ti/16", "fourier", args.batch).mesh, jax.devices()[:1])
  rows, peak = [], 0.0
  for variant, posemb in itertools.product(args.variants.split(","), args.posembs.split(",")):
    peak = max(peak, matmul_peak())
    prog = program_lib.build(vit_config(variant, posemb, args.batch), mesh)
    rows.append(
      (variant, posemb, *time_train_step(prog, random_batch(prog, args.batch), args.steps))
    )
  print(f"Measured float32 matmul peak (2048³, best of {len(rows)}): {peak / 1e9:.1f} GFLOP/s\n")
  print(
    f"| model (224x224, batch {args.batch}, f32) | posemb | step (ms) | GFLOPs/step "
    "(XLA) | achieved GFLOP/s | MFU |\n|---|---|---|---|---|---|"
  )
  for variant, posemb, step_s, flops in rows:
    print(
      f"| ViT-{variant} | `{posemb}` | {step_s * 1e3:.0f} | {flops / 1e9:.1f} | "
      f"{flops / step_s / 1e9:.1f} | {100 * flops / step_s / peak:.1f} % |"
    )
  produced, consumed = pipeline_throughput()
  print(
    f"\nInput pipeline (digits demo, batch 64): {produced:.0f} examples/s produced vs "
    f"{consumed:.0f} examples/s consumed by the demo's train step "
    f"({produced / consumed:.1f}x headroom)."
  )


if __name__ == "__main__":
  main()
