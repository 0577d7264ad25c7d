"""Timing helper shared by the benchmark scripts: compile once, then median wall time."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable

import jax


def time_jitted(fn: Callable, *args, repeats: int = 10, min_seconds: float = 0.5) -> float:
  """Median seconds per call of `jax.jit(fn)(*args)`, excluding compilation."""
  jitted = jax.jit(fn)
  jax.block_until_ready(jitted(*args))  # compile + warm up
  times = []
  start = time.perf_counter()
  while len(times) < repeats or time.perf_counter() - start < min_seconds:
    t0 = time.perf_counter()
    jax.block_until_ready(jitted(*args))
    times.append(time.perf_counter() - t0)
    if len(times) >= 200:
      break
  return statistics.median(times)


def machine() -> str:
  """One line naming the machine the figures were taken on."""
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
  except (OSError, StopIteration):
    pass
  devices = jax.devices()
  return (
    f"{cpu}; {len(devices)} x {devices[0].platform} device(s); jax {jax.__version__}; "
    f"python {platform.python_version()}"
  )
