"""ViT train-step time and model FLOPs utilisation (MFU) per attention path; input throughput.

  JAX_PLATFORMS=cpu python -m benchmarks.train_step [--variants Ti/16,S/16] [--batch 8]
  python -m benchmarks.train_step --variants B/16 --batch 256 --dtype bfloat16 --no-pipeline

1. Peak: the same run times an n x n x n matmul in the compute dtype (2·n³ FLOPs; n = 2048
   on CPU, 8192 on accelerators) before every model; the best of these is the measured
   peak. On a known accelerator (`SPEC_PEAKS`) the spec-sheet dense peak is a second
   denominator.
2. For each ViT variant at 224x224 (Embed-1D and Learnable-Fourier by default), the
   compiled `Program.train_step` of configs/vit_b16_imagenet.py in `--dtype`, once per
   attention path (`Attention.implementation`: `explicit` weights, `auto` = fused through
   jax.nn.dot_product_attention, cuDNN's kernel where it applies, or `xla` / `cudnn`).
   FLOPs of one step: XLA's cost analysis of the explicit path lowered for the host CPU
   (`step_flops`; the fused paths do the same math). MFU = FLOPs / step time / peak. Step
   time is the best of `--steps` steps (on a shared machine the best is the least disturbed
   one); the explicit path is always timed, as the baseline of the ratio.
3. Input pipeline: examples/s of the digits grain pipeline (the demo's preprocessing)
   against what the demo's train step consumes (examples/s of its compiled step).
Prints Markdown tables for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import itertools
import time
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import machine, time_jitted
from configs import vit_b16_imagenet, vit_digits
from lfpe.nn import attention, fused, transformer
from lfpe.train import program as program_lib
from lfpe.train import sharding

# Dense (no 2:4 sparsity) peak TFLOP/s of one chip: (device_kind substrings, name, bf16,
# float32). float32 is the rate of float32 matmuls at JAX's default precision: TF32 tensor
# cores on A100/H100/H200, one bfloat16 pass on TPUs (docs.jax.dev/en/latest/201/
# precision.html). NVIDIA's datasheets (nvidia.com/en-us/data-center/{a100,h100,h200})
# quote tensor-core rates with sparsity, twice the dense ones: H100 SXM and H200 SXM BF16
# 1,979 / TF32 989; H100 PCIe 1,513 / 756; H100 NVL and H200 NVL 1,671 / 835; A100 (SXM4 and
# PCIe, 40 and 80 GB) 624 / 312. Cloud TPU system architecture pages (cloud.google.com/tpu/
# docs/{v4,v5e,v5p,v6e}): bf16 per chip v4 275, v5e 197, v5p 459, v6e 918.
SPEC_PEAKS = (
  (("h100 nvl",), "H100 NVL", 835.5, 417.5),
  (("h100 pcie",), "H100 PCIe", 756.5, 378.0),
  (("h100",), "H100 SXM", 989.4, 494.7),
  (("h200 nvl",), "H200 NVL", 835.5, 417.5),
  (("h200",), "H200 SXM", 989.4, 494.7),
  (("a100",), "A100", 312.0, 156.0),
  (("tpu v4",), "TPU v4", 275.0, 275.0),
  (("tpu v5 lite", "tpu v5e"), "TPU v5e", 197.0, 197.0),
  (("tpu v5",), "TPU v5p", 459.0, 459.0),
  (("tpu v6",), "TPU v6e", 918.0, 918.0),
)
# Attention paths, as `Attention` keyword arguments. Two earlier ways of padding ViT's 197
# tokens for cuDNN, kept to time against the automatic one (inputs padded to 198):
# 'pad64', the inputs padded to 256; 'qkv64', q, k, v padded to 256 inside the fused call
# (lfpe until 2026-11-28).
PATHS = {
  "explicit": {"implementation": "explicit"},
  "auto": {},
  "xla": {"implementation": "xla"},
  "cudnn": {"implementation": "cudnn"},
  "pad64": {"pad_multiple": 64},
  "qkv64": {},
}


def spec_peak(device: jax.Device, dtype: str) -> tuple[str, float] | None:
  """(name, dense spec-sheet FLOP/s) of `device` for `dtype`, or None if unknown."""
  kind = device.device_kind.lower()
  for patterns, name, bf16, f32 in SPEC_PEAKS:
    if any(p in kind for p in patterns):
      return name, 1e12 * (bf16 if dtype == "bfloat16" else f32)
  return None


def matmul_peak(dtype: str, n: int) -> float:
  """Attainable FLOP/s of one n x n x n matmul in `dtype`."""
  a = jax.random.normal(jax.random.key(0), (n, n), dtype)
  return 2 * n**3 / time_jitted(jnp.matmul, a, a, repeats=20)


@contextlib.contextmanager
def attention_path(path: str):
  """Programs built and traced inside use `Attention(**PATHS[path])`.

  The model config has no attention field, so this swaps the class that the transformer
  blocks instantiate; parameters and their names do not change. 'qkv64' also restores the
  earlier padding rule: no padding of the inputs, q, k, v padded to a multiple of 64.
  """
  attn = functools.partial(attention.Attention, **PATHS[path])
  with contextlib.ExitStack() as stack:
    stack.enter_context(mock.patch.object(transformer, "Attention", attn))
    if path == "qkv64":
      stack.enter_context(mock.patch.object(fused, "cudnn_padding", lambda *shape: None))
      stack.enter_context(mock.patch.object(fused, "CUDNN_PAD_MULTIPLES", (64,)))
    yield


def random_batch(prog: program_lib.Program, batch_size: int) -> dict:
  _, abstract_batch, _ = prog.abstract_inputs(batch_size)
  rng = np.random.default_rng(0)
  make = lambda s: jax.device_put(
    rng.integers(0, 10, s.shape).astype(s.dtype)
    if jnp.issubdtype(s.dtype, jnp.integer)
    else rng.standard_normal(s.shape).astype(s.dtype),
    s.sharding,
  )
  return jax.tree.map(make, abstract_batch)


def compile_step(config, mesh, path: str):
  """(program, compiled train step) of `config` with attention `path`."""
  with attention_path(path):
    prog = program_lib.build(config, mesh)
    return prog, prog.train_step.lower(*prog.abstract_inputs(config.batch_size)).compile()


def step_flops(config) -> float:
  """XLA's FLOPs of one explicit-attention train step, lowered for the host CPU.

  The same count on every platform: a GPU's lowered module has no cost analysis, and its
  compiled one misses the matmuls, which are cuBLAS custom calls there (on an H100 it
  reported 1.23 of ViT-B/16's 27.0 TFLOPs per step at batch 256).
  """
  cpu_mesh = sharding.make_mesh(config.mesh, jax.devices("cpu")[:1])
  with attention_path("explicit"):
    prog = program_lib.build(config, cpu_mesh)
    lowered = prog.train_step.lower(*prog.abstract_inputs(config.batch_size))
    return float(lowered.cost_analysis()["flops"])


def step_times(
  compiled, state, batch: dict, key: jax.Array, steps: int, warmups: int = 1
) -> list[float]:
  """Seconds of each synchronised call of the compiled train step (dropout key `key`), after
  `warmups` calls."""
  for _ in range(warmups):
    state, metrics = compiled(state, batch, key)
  jax.block_until_ready(metrics)
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    state, metrics = compiled(state, batch, key)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - t0)
  return times


def best_step_time(prog: program_lib.Program, compiled, batch: dict, steps: int) -> float:
  """Best seconds per step of the compiled train step, after one warm-up step."""
  return min(step_times(compiled, prog.init_state(), batch, prog.dropout_rng, steps))


def measure_paths(config, mesh, paths: list[str], steps: int) -> tuple[float, list[tuple]]:
  """(XLA FLOPs of one explicit-path step, [(path, kernel, best s/step)]), explicit first."""
  rows = []
  for path in dict.fromkeys(("explicit", *paths)):
    prog, compiled = compile_step(config, mesh, path)
    kernel = "cuDNN" if "__cudnn$fmha" in compiled.as_text() else "XLA"
    seconds = best_step_time(prog, compiled, random_batch(prog, config.batch_size), steps)
    rows.append((path, kernel, seconds))
  return step_flops(config), rows


def vit_config(variant: str, posemb: str, batch: int, dtype: str = "float32"):
  config = vit_b16_imagenet.get_config(f"posemb={posemb}")
  with config.unlocked():
    config.model.variant = variant
    config.batch_size = batch
    config.compute_dtype = dtype
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
  prog, compiled = compile_step(config, mesh, "auto")
  return produced, config.batch_size / best_step_time(prog, compiled, batch, steps=30)


def print_table(args, rows: list[tuple], peak: float, spec: tuple[str, float] | None) -> None:
  """Markdown: one row per (variant, posemb, path); ratios against the explicit path."""
  unit, prefix = (1e12, "T") if peak >= 1e12 else (1e9, "G")
  spec_head = f" | MFU ({spec[0]} spec)" if spec else ""
  print(
    f"| model (224x224, batch {args.batch}, {args.dtype}) | posemb | attention | step (ms) "
    f"| img/s | {prefix}FLOPs/step (XLA) | achieved {prefix}FLOP/s | MFU (measured){spec_head} "
    f"| speed vs explicit |\n|---|---|---|---|---|---|---|---|{'---|' if spec else ''}---|"
  )
  for variant, posemb, flops, paths in rows:
    baseline = paths[0][2]
    for path, kernel, seconds in paths:
      rate = flops / seconds
      spec_cell = f" | {100 * rate / spec[1]:.1f} %" if spec else ""
      print(
        f"| ViT-{variant} | `{posemb}` | {path} ({kernel}) | {seconds * 1e3:.1f} | "
        f"{args.batch / seconds:.0f} | {flops / unit:.2f} | {rate / unit:.1f} | "
        f"{100 * rate / peak:.1f} %{spec_cell} | {baseline / seconds:.2f}x |"
      )


def parse_args() -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default="Ti/16,S/16")
  parser.add_argument("--posembs", default="embed_1d,fourier")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
  parser.add_argument(
    "--attention", default="explicit,auto", help=f"comma-separated, of {tuple(PATHS)}"
  )
  parser.add_argument("--matmul-size", type=int, default=0, help="0: 2048 on CPU, else 8192")
  parser.add_argument("--pipeline", action=argparse.BooleanOptionalAction, default=True)
  args = parser.parse_args()
  if unknown := set(args.attention.split(",")) - set(PATHS):
    parser.error(f"--attention: unknown path(s) {sorted(unknown)}; use {tuple(PATHS)}")
  return args


def main() -> None:
  args = parse_args()
  device = jax.devices()[0]
  n = args.matmul_size or (2048 if device.platform == "cpu" else 8192)
  print(f"Machine: {machine()}; {device.device_kind}; date {datetime.date.today()}\n")
  mesh = sharding.make_mesh(vit_config("Ti/16", "fourier", args.batch).mesh, [device])
  rows, peak, paths = [], 0.0, args.attention.split(",")
  for variant, posemb in itertools.product(args.variants.split(","), args.posembs.split(",")):
    peak = max(peak, matmul_peak(args.dtype, n))
    config = vit_config(variant, posemb, args.batch, args.dtype)
    rows.append((variant, posemb, *measure_paths(config, mesh, paths, args.steps)))
  spec = spec_peak(device, args.dtype)
  print(f"Measured {args.dtype} matmul peak ({n}³, best of {len(rows)}): {peak / 1e9:.1f} GFLOP/s")
  if spec:
    print(f"Spec-sheet dense {args.dtype} peak ({spec[0]}): {spec[1] / 1e12:.1f} TFLOP/s")
  print()
  print_table(args, rows, peak, spec)
  if args.pipeline:
    produced, consumed = pipeline_throughput()
    print(
      f"\nInput pipeline (digits demo, batch 64): {produced:.0f} examples/s produced vs "
      f"{consumed:.0f} examples/s consumed by the demo's train step "
      f"({produced / consumed:.1f}x headroom)."
    )


if __name__ == "__main__":
  main()
