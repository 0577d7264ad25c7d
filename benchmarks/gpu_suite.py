"""Every family's train step against its PyTorch peer, on one accelerator, in one table.

  python -m benchmarks.gpu_suite [--out DIR] [--budget 450] [--rows 4,5,6,7] [--xla-flags F]...
  python -m benchmarks.gpu_suite --cpu              # tiny shapes on the CPU (CI runs this)

On an H100 the eleven rows take about 14 minutes, most of it compiling (about 60 s per lfpe
ViT-B/16 step, 170 s per DETR-R50 step); rows past `--budget` seconds are skipped and say
so, in order of importance.
`--xla-flags=F` adds a row: lfpe's ViT step compiled with XLA_FLAGS=F (one change at a time;
each `--xla-flags` given adds one, numbered after the eleven). A flag this XLA lacks fails its
row only (XLA stops at an unknown flag).

Families and peers (full shapes; `--cpu` shrinks each to seconds):
* ViT-B/16, 224 px, batch 256, bfloat16 compute over float32 parameters: lfpe with
  `attention='auto'` (Embed-1D, Learnable-Fourier) against timm `vit_base_patch16_224`,
  eager and under `torch.compile` (`benchmarks/timm_step.py`); rows 10-11 time two earlier
  ways of padding the 197 tokens for cuDNN (`train_step.PATHS`: 'pad64', 'qkv64').
* DETR-R50 (configs/detr_coco.py: 6 + 6 post-norm layers, 100 queries, auxiliary losses),
  800 px canvas, batch 8, float32 (TF32 matmuls in both), against torchvision's ResNet-50 with
  DETR's transformer and scipy matching (`benchmarks/torch_peers.py detr`). lfpe's config
  matches with `auto` (scipy on a GPU); the last row is its in-graph `optax` matcher.
* The Reformer-style generator (configs/reformer_imagenet64.py: 12,288 tokens, LSH with
  2 hashes and chunks of 128, reversible, 6 layers of width 1024), batch 4, bfloat16,
  against reformer-pytorch's `ReformerLM` (`benchmarks/torch_peers.py reformer`).

Each measurement is its own process: JAX holds most of a GPU's memory once started, so
PyTorch could not run beside it, and each peak-memory figure is then one program's. A
process prints one `RESULT {json}` line; a process that fails or times out becomes a row
saying so, and the rest still run. Step time is the best of `--steps` synchronised steps
after warm-up (the median beside it). FLOPs are XLA's count of lfpe's step lowered for the
host CPU (`train_step.step_flops`); a peer's TFLOP/s and MFU use its lfpe family's count.
MFU is against the bf16 (or TF32) matmul peak measured in the same call and the spec sheet.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

RESULT = "RESULT "

# (family, implementation label, argv after `python -m`, full-scale timeout in seconds, XLA
# flags), in order of importance: rows past the time budget are skipped.
_DETR = "benchmarks.gpu_suite --one detr:detr_sine:auto"
_VIT = "benchmarks.gpu_suite --one vit:embed_1d"
GPU_RUNS = (
  ("vit", "lfpe, embed_1d", f"{_VIT}:auto", 120, ""),
  ("vit", "timm, torch.compile", "benchmarks.timm_step --modes compile --result", 150, ""),
  ("vit", "lfpe, fourier", "benchmarks.gpu_suite --one vit:fourier:auto", 120, ""),
  ("detr", "lfpe, detr_sine", _DETR, 240, ""),
  ("detr", "PyTorch DETR, eager", "benchmarks.torch_peers detr", 120, ""),
  ("reformer", "lfpe, fourier, lsh", "benchmarks.gpu_suite --one reformer:fourier:auto", 180, ""),
  ("reformer", "reformer-pytorch, eager", "benchmarks.torch_peers reformer", 120, ""),
  ("vit", "timm, eager", "benchmarks.timm_step --modes eager --result", 90, ""),
  ("detr", "lfpe, detr_sine, optax matcher", f"{_DETR} task.matcher=optax", 240, ""),
  ("vit", "lfpe, embed_1d, inputs padded to 256", f"{_VIT}:pad64", 120, ""),
  ("vit", "lfpe, embed_1d, q, k, v padded to 256", f"{_VIT}:qkv64", 120, ""),
)
PEERS = {"vit": "timm, torch.compile", "detr": "PyTorch DETR, eager"}
PEERS["reformer"] = "reformer-pytorch, eager"


def family_config(family: str, posemb: str, cpu: bool, overrides: tuple[str, ...] = ()):
  """The config of one family's step: full scale, or its CI-sized `small` version, with
  `overrides` ('dotted.path=value', as the trainer's --config.path=value) applied."""
  config = _family_config(family, posemb, cpu)
  from lfpe.train import config_cli

  for override in overrides:
    config_cli.set_field(config, *override.split("=", 1))
  return config


def _family_config(family: str, posemb: str, cpu: bool):
  small = ",small=True" if cpu else ""
  if family == "vit":
    from benchmarks import train_step

    variant, batch = ("Ti/16", 2) if cpu else ("B/16", 256)
    return train_step.vit_config(variant, posemb, batch, "float32" if cpu else "bfloat16")
  from configs import detr_coco, reformer_imagenet64

  module, batch = {"detr": (detr_coco, 8), "reformer": (reformer_imagenet64, 4)}[family]
  config = module.get_config(f"posemb={posemb}{small}")
  with config.unlocked():
    config.batch_size = 2 if cpu else batch
    config.mesh.data = 1
  return config


def measure_lfpe(
  family: str, posemb: str, attention: str, steps: int, cpu: bool, overrides: tuple[str, ...] = ()
) -> dict:
  """One lfpe family's compiled train step: times, peak memory, FLOPs, attention kernel."""
  import jax
  import numpy as np

  from benchmarks import detr_step, train_step
  from lfpe.train import sharding

  config = family_config(family, posemb, cpu, overrides)
  device = jax.devices()[0]
  mesh = sharding.make_mesh(config.mesh, [device])
  prog, compiled = train_step.compile_step(config, mesh, attention)
  if family == "detr":
    batch = detr_step.random_batch(prog, config.batch_size, np.random.default_rng(0))
  else:
    batch = train_step.random_batch(prog, config.batch_size)
  times = train_step.step_times(
    compiled, prog.init_state(), batch, prog.dropout_rng, steps, warmups=2
  )
  stats = device.memory_stats() or {}
  text = compiled.as_text()
  return dict(
    step_ms=1e3 * min(times),
    median_ms=1e3 * statistics.median(times),
    peak_bytes=stats.get("peak_bytes_in_use"),
    flops=train_step.step_flops(config),
    batch=config.batch_size,
    dtype=config.compute_dtype,
    kernel=f"{attention} ({'cuDNN' if '__cudnn$fmha' in text else 'XLA'})",
    device=device.device_kind,
    versions=f"jax {jax.__version__}",
  )


def matmul_peaks(cpu: bool) -> dict:
  """Measured matmul FLOP/s (bf16 and float32 at JAX's default precision) and spec sheet."""
  import jax

  from benchmarks import train_step

  device, n = jax.devices()[0], 1024 if cpu else 8192
  out = {"device": device.device_kind}
  for dtype in ("bfloat16", "float32"):
    out[f"measured_{dtype}"] = train_step.matmul_peak(dtype, n)
    spec = train_step.spec_peak(device, dtype)
    out[f"spec_{dtype}"] = spec and spec[1]
  return out


def run(argv: str, timeout: float, cpu: bool, xla_flags: str = "", log: list | None = None) -> dict:
  """The RESULT of `python -m argv` in a fresh process (`xla_flags` added), or {'error': why};
  the end of its output is appended to `log`."""
  cmd = [sys.executable, "-m", *shlex.split(argv), *(["--cpu"] if cpu else [])]
  flags = f"{os.environ.get('XLA_FLAGS', '')} {xla_flags if not cpu else ''}".strip()
  env = dict(os.environ, PYTHONUNBUFFERED="1", XLA_FLAGS=flags)
  try:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
  except subprocess.TimeoutExpired as e:
    proc = subprocess.CompletedProcess(cmd, -9, e.stdout or "", e.stderr or "")
  if log is not None:
    out = lambda x: x.decode() if isinstance(x, bytes) else x
    tail = "\n".join((out(proc.stdout) + out(proc.stderr)).splitlines()[-40:])
    log.append(f"$ {' '.join(cmd)}  (XLA_FLAGS={flags!r})\n{tail}\n")
  if proc.returncode == -9:
    return {"error": f"timed out after {timeout:.0f} s"}
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
  if proc.returncode or not lines:
    tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
    return {"error": f"exit {proc.returncode}: {tail[:160]}"}
  return json.loads(lines[-1][len(RESULT) :])


def table(rows: list[tuple[str, str, dict]], peaks: dict) -> str:
  """Markdown: one row per measurement; ratios against the family's peer."""
  flops = {f: r["flops"] for f, _, r in rows if r.get("flops")}
  peer = {f: r["step_ms"] for f, label, r in rows if PEERS.get(f) == label and "step_ms" in r}
  lines = [
    "| family | implementation | attention | step (ms) | median (ms) | peak memory (GiB) "
    "| TFLOP/s | MFU (measured) | MFU (spec) | step vs peer |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for family, label, r in rows:
    if "error" in r:
      lines.append(f"| {family} | {label} | | {r['error']} | | | | | | |")
      continue
    count = r.get("flops") or flops.get(family)
    rate = count / (r["step_ms"] / 1e3) if count else None
    dtype = "bfloat16" if r.get("dtype", "bfloat16") == "bfloat16" else "float32"
    measured, spec = peaks.get(f"measured_{dtype}"), peaks.get(f"spec_{dtype}")
    cells = [
      family,
      label,
      r.get("kernel", "(its own)"),
      f"{r['step_ms']:.1f}",
      f"{r['median_ms']:.1f}",
      f"{r['peak_bytes'] / 2**30:.1f}" if r.get("peak_bytes") else "n/a",
      f"{rate / 1e12:.1f}" if rate else "n/a",
      f"{100 * rate / measured:.1f} %" if rate and measured else "n/a",
      f"{100 * rate / spec:.1f} %" if rate and spec else "n/a",
      f"{r['step_ms'] / peer[family]:.2f}x" if family in peer else "n/a",
    ]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--cpu", action="store_true", help="tiny shapes on the CPU")
  parser.add_argument("--steps", type=int, default=0, help="timed steps (0: 10, 2 on --cpu)")
  parser.add_argument("--only", default="", help="comma-separated families to run")
  parser.add_argument(
    "--xla-flags", action="append", default=[], help="add a ViT row compiled with these"
  )
  parser.add_argument("--rows", default="", help="row numbers (1-based), run in this order")
  parser.add_argument("--budget", type=float, default=450, help="seconds for all rows")
  parser.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for the log")
  # --one family:posemb:attention [path=value ...]: one lfpe row, in this process
  parser.add_argument("--one", help=argparse.SUPPRESS)
  parser.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
  args = parser.parse_args()
  steps = args.steps or (2 if args.cpu else 10)
  if args.cpu:
    os.environ["JAX_PLATFORMS"] = "cpu"
  if args.one == "peaks":
    print(RESULT + json.dumps(matmul_peaks(args.cpu)))
    return
  if args.one:
    family, posemb, attention = args.one.split(":")
    row = measure_lfpe(family, posemb, attention, steps, args.cpu, tuple(args.overrides))
    print(RESULT + json.dumps(row))
    return
  if args.cpu and not importlib.util.find_spec("torch"):
    print("torch is not installed: the PyTorch peers' rows say so, lfpe's run.")
  flagged = tuple(("vit", f"lfpe, embed_1d, {f}", GPU_RUNS[0][2], 120, f) for f in args.xla_flags)
  runs = GPU_RUNS + flagged
  order = [int(n) for n in args.rows.split(",") if n] or range(1, len(runs) + 1)
  if bad := [n for n in order if not 1 <= n <= len(runs)]:
    parser.error(f"--rows: no row {bad[0]}; the rows are 1-{len(runs)}")
  # This process never starts JAX: it would hold most of the GPU's memory from its children.
  peaks = run("benchmarks.gpu_suite --one peaks", 120, args.cpu)
  families = set(args.only.split(",")) - {""} or {f for f, *_ in GPU_RUNS}
  logs: list[str] = []
  rows, start = [], time.perf_counter()
  for family, label, argv, timeout, xla_flags in (runs[n - 1] for n in order):
    if family not in families:
      continue
    left = args.budget - (time.perf_counter() - start)
    if left < 30:
      rows.append((family, label, {"error": f"skipped: the {args.budget:.0f} s budget is spent"}))
      continue
    timeout = min(timeout * (3 if args.cpu else 1), left)
    started = time.perf_counter()
    rows.append((family, label, run(f"{argv} --steps {steps}", timeout, args.cpu, xla_flags, logs)))
    print(f"{family} / {label}: {time.perf_counter() - started:.0f} s", flush=True)
    report(rows, peaks, logs, args.out)  # after every row: a run stopped early keeps its rows
  if not args.cpu and args.budget - (time.perf_counter() - start) > 60:
    kernel = [sys.executable, "-m", "benchmarks.attention_kernel", "--pad", "0,2,64"]
    try:  # which kernel ViT-B/16's attention call takes, and why cuDNN refuses it, if it does
      logs.append(subprocess.run(kernel, capture_output=True, text=True, timeout=60).stdout)
    except subprocess.TimeoutExpired:
      logs.append("benchmarks.attention_kernel: timed out after 60 s")
  print("\n" + report(rows, peaks, logs, args.out))


def report(rows: list, peaks: dict, logs: list[str], out: str) -> str:
  """The table with its header line; written to `out`/gpu_suite.md (and the processes' log)."""
  text = f"Date {datetime.date.today()}; {peaks.get('device', peaks.get('error'))}; "
  if "error" not in peaks:
    text += (
      f"measured matmul peak bf16 {peaks['measured_bfloat16'] / 1e12:.1f} TFLOP/s, "
      f"float32 {peaks['measured_float32'] / 1e12:.1f} TFLOP/s"
    )
  text += f"\n\n{table(rows, peaks)}"
  if out:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_suite.md"), "w") as f:
      f.write(text + "\n\n" + "\n".join(json.dumps(row) for row in rows) + "\n")
    with open(os.path.join(out, "gpu_suite_runs.log"), "w") as f:
      f.write("\n".join(logs))
  return text


if __name__ == "__main__":
  main()
