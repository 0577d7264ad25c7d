"""Where a ViT train step's device time goes: kernels of a traced step, grouped by name.

  python -m benchmarks.profile_step [--variant B/16] [--posemb embed_1d] [--batch 256]
      [--dtype bfloat16] [--attention auto] [--out /tmp/profile]

Compiles `Program.train_step` as benchmarks/train_step.py does, runs three warm-up steps,
then traces three steps with `jax.profiler` (a Perfetto trace under `--out`) and prints the
kernels that took the most device time, with their share, and the step time the trace
shows. On a GPU the events are the accelerator's kernels; on CPU, the XLA ops of the host.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pathlib

import jax

from benchmarks import train_step
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


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--variant", default="B/16")
  parser.add_argument("--posemb", default="embed_1d")
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
  parser.add_argument("--attention", default="auto", choices=tuple(train_step.PATHS))
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--out", default="/tmp/profile")
  args = parser.parse_args()

  config = train_step.vit_config(args.variant, args.posemb, args.batch, args.dtype)
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  prog, compiled = train_step.compile_step(config, mesh, args.attention)
  batch = train_step.random_batch(prog, args.batch)
  state = prog.init_state()
  for _ in range(3):
    state, metrics = compiled(state, batch)
  jax.block_until_ready(metrics)
  with jax.profiler.trace(args.out, create_perfetto_trace=True):
    for _ in range(TRACED_STEPS):
      state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)

  path = max(pathlib.Path(args.out).rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
  events = device_events(json.load(gzip.open(path)))
  by_name, count = collections.Counter(), collections.Counter()
  for e in events:
    by_name[e["name"]] += e["dur"]
    count[e["name"]] += 1
  total = sum(by_name.values())
  span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
  print(
    f"ViT-{args.variant} `{args.posemb}` batch {args.batch} {args.dtype}, attention "
    f"{args.attention}: {span / TRACED_STEPS / 1e3:.1f} ms per step in the trace, "
    f"kernels busy {total / TRACED_STEPS / 1e3:.1f} ms ({path})\n\n"
    "| kernel | ms per step | share | calls per step |\n|---|---|---|---|"
  )
  for name, dur in by_name.most_common(args.top):
    print(
      f"| `{name[:90]}` | {dur / TRACED_STEPS / 1e3:.2f} | {100 * dur / total:.1f} % "
      f"| {count[name] // TRACED_STEPS} |"
    )


if __name__ == "__main__":
  main()
