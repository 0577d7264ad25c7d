"""Where a record stands, without training or compiling anything: which of its runs are
done, which are part-way and which have not started, and the time left estimated from the
speed of the runs already trained (each record's `--status`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from experiments import provenance
from experiments.sweeps import DIVERGED

if TYPE_CHECKING:  # runs.py imports this module; a run is only read here
  from experiments.runs import Run

SCORE_SECONDS = "score_seconds"  # a results entry's time spent scoring its trained run
# The finished runs of a kind whose speed and scoring time the ETA takes: the latest, as a
# record's protocol and machine change over its life (the resolution record's first runs
# timed their tests inside the trainer, 3-30x the training of its later runs).
RECENT = 10


@dataclasses.dataclass(frozen=True)
class Progress:
  """Where one run stands: `steps_done` of `total_steps`, and the seconds per step it took
  (from its summary; None while unfinished or if the summary lacks its wall time)."""

  steps_done: int
  total_steps: int
  seconds_per_step: float | None = None

  @property
  def done(self) -> bool:
    return self.steps_done >= self.total_steps


def read(run: Run) -> Progress:
  """Reads `run.workdir`: the summary of a finished run, else its newest checkpoint step."""
  total = int(run.config.total_steps)
  path = os.path.join(run.workdir, "summary.json")
  if os.path.exists(path):
    with open(path) as f:
      summary = json.load(f)
    if summary.get("step", 0) >= total:
      trained = summary["step"] - summary.get("start_step", 0)
      rate = summary["wall_s"] / trained if "wall_s" in summary and trained > 0 else None
      return Progress(summary["step"], total, rate)
  checkpoints = os.path.join(run.workdir, "checkpoints")
  steps = (
    [int(d) for d in os.listdir(checkpoints) if d.isdigit()] if os.path.isdir(checkpoints) else []
  )
  return Progress(min(max(steps, default=0), total), total)


def status(
  runs: Iterable[Run],
  results: dict | None = None,
  out=None,
  *,
  jobs: int = 1,
  score_in_jobs: bool = False,
) -> dict[str, int]:
  """Prints done / part-way / not started, each part-way run, and an ETA (to `out`, default
  the current `sys.stdout`); returns the counts. A run recorded in `results` (results.json)
  is done even where its workdir is gone (`execute` reads it back, never retrains it), and
  its recorded `seconds` still give its speed.

  The ETA is the steps left times the median seconds per step of the latest `RECENT` finished
  runs of the same kind (in results.json's order, then those only in a workdir; `kind`: a
  record run may test far more than a sweep run inside its trainer; all finished runs where
  none of its kind has finished; the median, so that a few runs slowed by other work on the
  machine do not move it), those finished on this CPU where there are any
  (`provenance.same_cpu`; a record spans machines), over `jobs` runs at once (each run's
  seconds per step were measured beside the other jobs), plus each unfinished run's scoring:
  the median `score_seconds` of the latest `RECENT` finished runs of its kind (in the record's
  own process, one run at a time; over `jobs` with `score_in_jobs`, as `runs.execute` scores
  then). A guess.
  """
  runs, out, results = list(runs), out or sys.stdout, results or {}
  states = {run.key: read(run) for run in runs}
  for run in runs:
    if run.key in results and not states[run.key].done:
      total, entry = states[run.key].total_steps, results[run.key]
      rate = entry["seconds"] / total if entry.get("seconds") else None
      states[run.key] = Progress(total, total, rate)
  done = [k for k, p in states.items() if p.done]
  partial = [k for k, p in states.items() if 0 < p.steps_done < p.total_steps]
  counts = {"runs": len(runs), "done": len(done), "partial": len(partial)}
  counts["pending"] = counts["runs"] - counts["done"] - counts["partial"]
  print(
    f"{counts['done']} of {counts['runs']} runs done, {counts['partial']} part-way, "
    f"{counts['pending']} not started.",
    file=out,
  )
  for key in partial:
    print(
      f"  part-way: {key} at step {states[key].steps_done} of {states[key].total_steps}", file=out
    )
  rates, here = {}, {}  # seconds per step of the finished runs, by kind: all, this CPU's
  cpu = provenance.this_cpu()
  for key in [k for k in results if k in states] + [k for k in states if k not in results]:
    p = states[key]
    if p.done and p.seconds_per_step:
      rates.setdefault(kind(key), []).append(p.seconds_per_step)
      if key not in results or provenance.same_cpu(provenance.run_cpu(results[key]), cpu):
        here.setdefault(kind(key), []).append(p.seconds_per_step)  # a workdir: trained here
  every = [r for by_kind in rates.values() for r in by_kind]
  left = sum(p.total_steps - p.steps_done for p in states.values())
  if left and every:
    rate = lambda k: statistics.median((here.get(k) or rates.get(k) or every)[-RECENT:])  # noqa: E731
    steps = lambda k, p: (p.total_steps - p.steps_done) * rate(k)  # noqa: E731
    seconds = sum(steps(kind(k), p) for k, p in states.items()) / max(jobs, 1)
    scoring = _scoring(results)
    unscored = [kind(k) for k, p in states.items() if not p.done]
    scoring_left = sum(scoring.get(k, 0.0) for k in unscored)
    seconds += scoring_left / max(jobs, 1) if score_in_jobs else scoring_left
    unknown = sorted({k for k in unscored if k not in scoring})
    untimed = sorted({k for k in unscored if k not in rates})
    elsewhere = sorted({k for k in unscored if k in rates and k not in here})
    notes = []
    if here and elsewhere:  # this CPU has finished runs, but none of these kinds yet
      notes.append(f"{', '.join(elsewhere)} runs timed on other CPUs")
    if untimed:
      notes.append(f"{', '.join(untimed)} runs timed at the other kinds' speed")
    if unknown:
      notes.append(f"not counting the scoring of {', '.join(unknown)} runs: not yet measured")
    print(
      f"  {left} steps left: about {_duration(seconds)} at the speed of the runs finished "
      + ("on this CPU" if here else "on other CPUs (none yet on this one)")
      + (f" ({'; '.join(notes)})" if notes else "")
      + ".",
      file=out,
    )
  elif left:
    print(f"  {left} steps left; no finished run yet to estimate the time from.", file=out)
  return counts


def kind(key: str) -> str:
  """A run's kind for its scoring time: "sweep", "recipe" (a learning-rate choice's run) or
  "record"."""
  first = key.split("/")[0]
  return first if first in ("sweep", "recipe") else "record"


def _scoring(results: dict) -> dict[str, float]:
  """{kind: median seconds its latest `RECENT` finished runs spent scoring} (entries that
  recorded it, in results.json's order; not a diverged run's, which had nothing to score)."""
  spent = {}
  for key, entry in results.items():
    if isinstance(entry, dict) and SCORE_SECONDS in entry and DIVERGED not in entry:
      spent.setdefault(kind(key), []).append(entry[SCORE_SECONDS])
  return {k: statistics.median(v[-RECENT:]) for k, v in spent.items()}


def _duration(seconds: float) -> str:
  hours, minutes = divmod(round(seconds / 60), 60)
  return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
