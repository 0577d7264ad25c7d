"""Where a train step's device time goes: kernels of a traced step, grouped by name.

  python -m benchmarks.profile_step [--variant B/16] [--posemb embed_1d] [--batch 256]
      [--dtype bfloat16] [--attention auto] [--out /tmp/profile]
  python -m benchmarks.profile_step --family detr --posemb detr_sine [task.matcher=scipy]

`--family vit` (the default) is the ViT step of benchmarks/train_step.py at the given
variant, batch and dtype; `detr` and `reformer` are benchmarks/gpu_suite.py's full-scale
steps, with trainer overrides (path=value) applied. Compiles `Program.train_step`, runs
three warm-up steps,
then traces three steps with `jax.profiler` (a Perfetto trace under `--out`) and prints the
kernels that took the most device time, with their share, and the step time the trace
shows. On a GPU the events are the accelerator's kernels; on CPU, the XLA ops of the host.
Below the table, the HLO of the `--hlo` costliest kernels that XLA fused itself (not cuBLAS's
or cuDNN's): which ops each one holds, to tell a layer norm from a layout change.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pathlib
import re

import jax
import numpy as np

from benchmarks import detr_step, gpu_suite, train_step
from lfpe.train import sharding

TRACED_STEPS = 3


def device_events(trace: dict) -> list[dict]:
  """Complete events of the accelerator's processes, else of the host's XLA threads."""
  events = trace["traceEvents"]
  names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
  accel = {pid for pid, name in names.items() if "/device:" in name and "CPU" not in name}
  threads = {
    (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"
  }
  keep = (
    (lambda e: e["pid"] in accel)
    if accel
    else (lambda e: "XLA" in threads.get((e["pid"], e.get("tid")), ""))
  )
  return [e for e in events if e.get("ph") == "X" and keep(e)]


def _kernel_name(hlo_name: str) -> str:
  """The kernel name a GPU trace gives a fused HLO instruction (`fusion.3` -> `fusion_3`)."""
  return re.sub(r"[^A-Za-z0-9_]", "_", hlo_name.lstrip("%"))


def _short(hlo_line: str) -> str:
  """An HLO line with its metadata cut to the op's name: `... # jit(step)/.../mul`."""
  return re.sub(r', metadata=\{op_name="([^"]*)"[^}]*\}', r"  # \1", hlo_line.strip())


def fusion_bodies(hlo_text: str, kernels: list[str], max_lines: int = 30) -> dict[str, str]:
  """For each kernel of `kernels` that is a fusion of the compiled HLO `hlo_text`: its
  instruction line and the body of the computation it calls (first `max_lines` lines)."""
  computations, current = {}, None
  for line in hlo_text.splitlines():
    if match := re.match(r"^%?([\w.\-]+) .*\{$", line):
      current = computations.setdefault(match.group(1), [])
    elif line.startswith("}"):
      current = None
    elif current is not None:
      current.append(_short(line))
  found, wanted = {}, {_kernel_name(k): k for k in kernels}
  for line in hlo_text.splitlines():
    fused = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .* fusion\(.*calls=%?([\w.\-]+)", line)
    if fused and (kernel := wanted.get(_kernel_name(fused.group(1)))):
      body = computations.get(fused.group(2), [])
      found[kernel] = "\n".join([_short(line), *body[:max_lines]])
  return found


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--family", default="vit", choices=("vit", "detr", "reformer"))
  parser.add_argument("overrides", nargs="*", help="path=value trainer overrides")
  parser.add_argument("--variant", default="B/16")
  parser.add_argument("--posemb", default="embed_1d")
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
  parser.add_argument("--attention", default="auto", choices=tuple(train_step.PATHS))
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--hlo", type=int, default=8, help="XLA fusions whose HLO to print")
  parser.add_argument("--out", default="/tmp/profile")
  args = parser.parse_args()

  if args.family == "vit":
    config = train_step.vit_config(args.variant, args.posemb, args.batch, args.dtype)
  else:
    config = gpu_suite.family_config(args.family, args.posemb, False, tuple(args.overrides))
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  prog, compiled = train_step.compile_step(config, mesh, args.attention)
  if args.family == "detr":
    batch = detr_step.random_batch(prog, config.batch_size, np.random.default_rng(0))
  else:
    batch = train_step.random_batch(prog, config.batch_size)
  state = prog.init_state()
  for _ in range(3):
    state, metrics = compiled(state, batch, prog.dropout_rng)
  jax.block_until_ready(metrics)
  with jax.profiler.trace(args.out, create_perfetto_trace=True):
    for _ in range(TRACED_STEPS):
      state, metrics = compiled(state, batch, prog.dropout_rng)
    jax.block_until_ready(metrics)

  path = max(pathlib.Path(args.out).rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
  events = device_events(json.load(gzip.open(path)))
  by_name, count = collections.Counter(), collections.Counter()
  for e in events:
    by_name[e["name"]] += e["dur"]
    count[e["name"]] += 1
  total = sum(by_name.values())
  what = f"ViT-{args.variant}" if args.family == "vit" else f"{args.family} {args.overrides}"
  span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
  print(
    f"{what} `{args.posemb}` batch {config.batch_size} {config.compute_dtype}, attention "
    f"{args.attention}: {span / TRACED_STEPS / 1e3:.1f} ms per step in the trace, "
    f"kernels busy {total / TRACED_STEPS / 1e3:.1f} ms ({path})\n\n"
    "| kernel | ms per step | share | calls per step |\n|---|---|---|---|"
  )
  for name, dur in by_name.most_common(args.top):
    print(
      f"| `{name[:90]}` | {dur / TRACED_STEPS / 1e3:.2f} | {100 * dur / total:.1f} % "
      f"| {count[name] // TRACED_STEPS} |"
    )
  own = [n for n, _ in by_name.most_common() if "fusion" in n][: args.hlo]
  for name, body in fusion_bodies(compiled.as_text(), own).items():
    print(f"\n`{name}`:\n```\n{body}\n```")


if __name__ == "__main__":
  main()
