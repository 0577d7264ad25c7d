"""Training metrics out: JSON lines, TensorBoard events, progress, a summary file.

Progress (process 0, stderr): every run starts with a line naming its workdir and steps, and
ends with one naming the summary and its headline metric, whatever `progress` and `log_every`
are. Between them, with `progress`: a tqdm bar on a terminal; otherwise (a log file, a cluster
job, one of several runs a record trains at once) one line every `report_every` steps and at
the last step, with step, loss, steps/s and ETA, and one line per evaluation with its
metrics. A process started by another (a record's job) never draws a bar: two bars on one
terminal garble each other; its lines name its workdir.

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
import multiprocessing
import os
import sys
import time
from typing import Any

import numpy as np
import tqdm
from etils import epath
from tensorboardX import SummaryWriter

from lfpe.train.mirror import Mirror
from lfpe.train.workdir import write_atomically


def to_python(metrics: dict[str, Any]) -> tuple[dict[str, float], dict[str, list[float]]]:
  """(host floats, per-seed lists) from metrics: scalars (numpy or jax; ints stay ints), or
  `[S]` arrays of a seed axis (lfpe.train.seeds), which give their mean and their values."""
  out, per_seed = {}, {}
  for k, v in metrics.items():
    v = np.asarray(v)
    if v.ndim:
      per_seed[k] = [float(x) for x in v]
      v = v.mean()
    v = v.item()
    out[k] = v if isinstance(v, int) else float(v)
  return out, per_seed


def truncate_jsonl(path: str, last_step: int) -> set[str]:
  """Drops the lines of `path` whose step is past `last_step`, and a line a killed run left
  half-written; returns the splits logged at `last_step` (`MetricWriter.splits_at_start`).
  Rewritten whole and renamed over it: a kill meanwhile leaves the file as it was."""
  if not os.path.exists(path):
    return set()
  with open(path) as f:
    kept = [(line.rstrip("\n"), row) for line in f if (row := read_row(line)) is not None]
  kept = [(line, row) for line, row in kept if row["step"] <= last_step]
  write_atomically(path, "".join(line + "\n" for line, _ in kept))  # the lines as written
  return {row["split"] for _, row in kept if row["step"] == last_step}


def read_row(line: str) -> dict | None:
  """One line of metrics.jsonl, or None for one cut short by a kill."""
  try:
    row = json.loads(line)
  except ValueError:
    return None
  return row if isinstance(row, dict) and "step" in row else None


def format_seconds(seconds: float) -> str:
  """'1h02m', '3m05s', '42s'."""
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def report_interval(report_every: int, total_steps: int, log_every: int) -> int:
  """Steps between progress lines: `report_every`, or about 20 lines a run when it is 0;
  a multiple of `log_every` (the steps whose metrics are fetched), so never an extra sync."""
  steps = report_every or max(total_steps // 20, 1)
  return max(1, math.ceil(steps / log_every)) * log_every


def final_line(summary: dict[str, Any], headline: str | None, workdir: str) -> str:
  """'lfpe: done at step S: eval accuracy 0.95; summary in WORKDIR/summary.json'."""
  evals = summary.get("eval", {})
  name = headline if headline in evals else next(iter(evals), None)
  metric = f": eval {name} {evals[name]:.4g}" if name is not None else ""
  path = os.path.join(workdir, "summary.json")
  return f"lfpe: done at step {summary.get('step')}{metric}; summary in {path}"


class MetricWriter:
  """Writes metrics from process 0; a no-op elsewhere. Use as a context manager."""

  def __init__(
    self,
    workdir: str,
    *,
    total_steps: int,
    start_step: int = 0,
    progress: bool = True,
    report_every: int = 0,
    is_main: bool = True,
  ):
    self.is_main = is_main
    self.total_steps = total_steps
    self.latest: dict[str, dict[str, float]] = {}
    self.splits_at_start: set[str] = set()  # read on process 0: what its metrics hold
    self._jsonl = self._tb = None
    if is_main:  # appended files go through the mirror (a local folder for a remote workdir)
      self.workdir = workdir
      self._mirror = Mirror(workdir, pull=("metrics.jsonl",))
      path = os.path.join(self._mirror.local, "metrics.jsonl")
      self.splits_at_start = truncate_jsonl(path, start_step)
      self._jsonl = open(path, "a")
      # Events past the checkpoint, from the interrupted run, are dropped as the JSON's are
      # (all of them when it was killed before its first checkpoint: start_step 0).
      purge = start_step + 1
      self._tb = SummaryWriter(os.path.join(self._mirror.local, "tb"), purge_step=purge)
    in_job = multiprocessing.parent_process() is not None
    self._prefix = f"lfpe [{workdir}]" if in_job else "lfpe"
    if is_main:
      where = f"from step {start_step} " if start_step else ""
      print(
        f"{self._prefix}: training {where}to step {total_steps} in {workdir}",
        file=sys.stderr,
        flush=True,
      )
    show = progress and is_main and sys.stderr.isatty() and not in_job
    # Lines instead of the bar: every `report_every` steps (0: none) when stderr is no terminal.
    self._report_every = report_every if progress and is_main and not show else 0
    self._report = (start_step, time.perf_counter())  # step and time of the last line
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
    """Logs `metrics` of `split` ('train', 'eval', ...) at `step`: scalars, or `[S]` per
    seed (their mean everywhere, and their values under `seeds` in the JSON); returns the
    scalars."""
    values, per_seed = to_python(metrics)
    line = {**values, "seeds": per_seed} if per_seed else values
    self.latest[split] = line
    if self.is_main:
      self._jsonl.write(json.dumps({"step": step, "split": split, **line}) + "\n")
      self._jsonl.flush()
      for k, v in values.items():
        if math.isfinite(v):
          self._tb.add_scalar(f"{split}/{k}", v, step)
      self._tb.flush()
      self._mirror.push()
    every = self._report_every
    if every and (split != "train" or step % every == 0 or step == self.total_steps):
      self._print_line(step, split, values)
    return values

  def _print_line(self, step: int, split: str, values: dict[str, float]) -> None:
    where = f"step {step}/{self.total_steps}"
    if split != "train":
      shown = ", ".join(f"{k} {v:.4g}" for k, v in values.items() if k != "count")
      print(f"{self._prefix}: {where} {split}: {shown}", file=sys.stderr, flush=True)
      return
    last_step, last_time = self._report
    now = time.perf_counter()
    rate = (step - last_step) / max(now - last_time, 1e-9)
    self._report = (step, now)
    eta = format_seconds((self.total_steps - step) / rate) if rate > 0 else "?"
    print(
      f"{self._prefix}: {where} ({100 * step / self.total_steps:.0f}%) loss {values['loss']:.4g}, "
      f"{rate:.3g} steps/s, ETA {eta}",
      file=sys.stderr,
      flush=True,
    )

  def advance(self, step: int, **postfix: float) -> None:
    """Moves the progress bar to `step`, showing `postfix` values."""
    if step > self._bar.n:
      self._bar.update(step - self._bar.n)
    if postfix:
      self._bar.set_postfix({k: f"{v:.4g}" for k, v in postfix.items()}, refresh=False)

  def summary(self, step: int, **extra: Any) -> dict[str, Any]:
    """WORKDIR/summary.json: the last metrics of every split, the step, `extra`; returned
    (on every process) as written."""
    summary = {"step": step, **self.latest, **extra}
    if self.is_main:
      write_atomically(epath.Path(self.workdir) / "summary.json", json.dumps(summary, indent=2))
    return summary

  def sync(self) -> None:
    """Uploads the metrics written so far now (a remote workdir's, before a checkpoint: a
    run resumed from it then has every metric up to its step)."""
    if self.is_main:
      self._mirror.push(force=True)

  def close(self) -> None:
    self._bar.close()
    if self.is_main:
      self._jsonl.close()
      self._tb.close()
      self._mirror.close()

  def __enter__(self) -> MetricWriter:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
