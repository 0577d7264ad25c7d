"""Training metrics out: JSON lines, TensorBoard events, a progress bar, a summary file.

Files (process 0 only):
  WORKDIR/metrics.jsonl  one object per line: {"step", "split", <metric>: value, ...}
  WORKDIR/tb/            tensorboardX event files, tags "<split>/<metric>"
  WORKDIR/summary.json   {"step", "train": {...}, "eval": {...}} with the final metrics
On resume from step s, lines of metrics.jsonl past s (written after that checkpoint
by the interrupted run) are dropped so that the file reads as one run.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

import numpy as np
import tqdm
from tensorboardX import SummaryWriter


def to_python(metrics: dict[str, Any]) -> dict[str, float]:
  """Host floats from scalars (numpy or jax); ints stay ints."""
  out = {}
  for k, v in metrics.items():
    v = np.asarray(v).item()
    out[k] = v if isinstance(v, int) else float(v)
  return out


def truncate_jsonl(path: str, last_step: int) -> None:
  """Drops the lines of `path` whose step is past `last_step`."""
  if not os.path.exists(path):
    return
  with open(path) as f:
    lines = [line for line in f if line.strip() and json.loads(line)["step"] <= last_step]
  with open(path, "w") as f:
    f.writelines(lines)


class MetricWriter:
  """Writes metrics from process 0; a no-op elsewhere. Use as a context manager."""

  def __init__(
    self,
    workdir: str,
    *,
    total_steps: int,
    start_step: int = 0,
    progress: bool = True,
    is_main: bool = True,
  ):
    self.is_main = is_main
    self.latest: dict[str, dict[str, float]] = {}
    self._jsonl = self._tb = None
    if is_main:
      os.makedirs(workdir, exist_ok=True)
      self.workdir = workdir
      path = os.path.join(workdir, "metrics.jsonl")
      truncate_jsonl(path, start_step)
      self._jsonl = open(path, "a")
      self._tb = SummaryWriter(os.path.join(workdir, "tb"))
    show = progress and is_main and sys.stderr.isatty()
    self._bar = tqdm.tqdm(
      total=total_steps,
      initial=start_step,
      disable=not show,
      file=sys.stderr,
      unit="step",
      dynamic_ncols=True,
    )
    self._last_step, self._last_time = start_step, time.perf_counter()

  def rate(self, step: int) -> float:
    """Steps per second since the previous call (0 for the first)."""
    now = time.perf_counter()
    steps, secs = step - self._last_step, now - self._last_time
    self._last_step, self._last_time = step, now
    return steps / secs if secs > 0 else 0.0

  def write(self, step: int, split: str, metrics: dict[str, Any]) -> dict[str, float]:
    """Logs `metrics` (scalars) of `split` ('train', 'eval', ...) at `step`."""
    values = to_python(metrics)
    self.latest[split] = values
    if self.is_main:
      self._jsonl.write(json.dumps({"step": step, "split": split, **values}) + "\n")
      self._jsonl.flush()
      for k, v in values.items():
        if math.isfinite(v):
          self._tb.add_scalar(f"{split}/{k}", v, step)
      self._tb.flush()
    return values

  def advance(self, step: int, **postfix: float) -> None:
    """Moves the progress bar to `step`, showing `postfix` values."""
    if step > self._bar.n:
      self._bar.update(step - self._bar.n)
    if postfix:
      self._bar.set_postfix({k: f"{v:.4g}" for k, v in postfix.items()}, refresh=False)

  def summary(self, step: int, **extra: Any) -> None:
    """WORKDIR/summary.json: the last metrics of every split, the step, `extra`."""
    if self.is_main:
      summary = {"step": step, **self.latest, **extra}
      with open(os.path.join(self.workdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

  def close(self) -> None:
    self._bar.close()
    if self.is_main:
      self._jsonl.close()
      self._tb.close()

  def __enter__(self) -> MetricWriter:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
