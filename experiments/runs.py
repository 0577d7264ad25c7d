"""The runs of a record: how each adapts a shipped config, trains and resumes.

A record (`experiments/<name>/run.py`) is a list of `Run`s, one trainer workdir each. `execute`
trains them in order through `lfpe.train.trainer` (a finished workdir is read, not retrained;
an interrupted one resumes from its last checkpoint), so a record of many hours is one command
run as often as needed; `experiments.progress.status` says where it stands.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any

from experiments import editions, progress, provenance, recipe, sweeps
from experiments import jobs as jobs_lib
from lfpe import data
from lfpe.train import stopping, trainer
from lfpe.train.workdir import has_checkpoints


def for_run(config: Any, *, seed: int, steps: int = 0, eval_every: int = 0) -> Any:
  """`config` (unlocked and changed in place) with `seed`, and with `steps` > 0 that many
  updates, evaluated every `eval_every` steps (0: at the end), checkpointed as
  often as the config says (and at the end: a killed run loses at most that many steps), and
  warmup cut to at most a tenth of the run."""
  with config.unlocked():
    config.seed = seed
    if steps:
      config.total_steps = steps
      config.eval_every = eval_every or steps
      config.checkpoint_every = min(config.checkpoint_every, steps)
      config.schedule.warmup_steps = min(config.schedule.warmup_steps, steps // 10)
  return config


def on_validation(config: Any, held: int) -> Any:
  """`config` (changed in place) trained on its training split but the first `held` examples
  and evaluated on those: a sweep run chooses from validation data, never from the test split."""
  with config.unlocked():
    config.data.train_split = f"train[{held}:]"
    config.data.eval_split = f"train[:{held}]"
  return config


def only_evals(config: Any, names: Iterable[str]) -> Any:
  """A copy of `config` with only its named evaluations `names` (to score what a finished
  run lacks, `trainer.evaluate_all`, without running the others again)."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.evals = {name: config.evals[name] for name in names}
  return config


@dataclasses.dataclass(frozen=True)
class Run:
  """One run of a record: its key in results.json, its config and its trainer workdir."""

  key: str
  config: Any
  workdir: str


def kept(record: dict[str, Run], arm: str, spec: str, value: float | None, seeds: int):
  """`arm`'s record run at knob `value` of the lowest seed whose workdir still holds
  checkpoints, for a figure drawn from a trained model: a long record's older workdirs may
  be pruned to save disk (None: every seed's are)."""
  keys = (sweeps.record_key(arm, spec, value, seed) for seed in range(seeds))
  return next((record[k] for k in keys if has_checkpoints(record[k].workdir)), None)


MakeConfig = Callable[[str, "float | None", int], Any]  # (arm, knob value or None, seed)
# The first seed of the sweeps of records begun after 2026-11-28 (generation and detection's
# second editions); the sweeps run before (digits, layout, resolution, and the first editions
# of detection and generation) start at 0.
SWEEP_FIRST_SEED = 100


def sweep_runs(
  grids: dict[str, tuple[float, ...]], seeds: int, make: MakeConfig, out: str, first_seed: int = 0
):
  """Every sweep run of `grids` (`{arm: knob values}`), seed-major over seeds `first_seed`,
  ..., `first_seed + seeds - 1`: `make(arm, value, seed)` is its config (the knob at `value`,
  `sweeps.at`), keyed `sweeps.run_key`, in `out/runs/<key>`. A `first_seed` past the record's
  seeds (`SWEEP_FIRST_SEED`) keeps the sweep's initialisations and batch orders apart from
  the record runs', so that a choice is not fitted to the draws of the seeds it is tested on."""
  planned = []
  for seed in range(first_seed, first_seed + seeds):
    for arm, grid in grids.items():
      for value in grid:
        config = make(arm, value, seed)
        key = sweeps.run_key(arm, config.model.posemb, value, seed)
        planned.append(Run(key, config, os.path.join(out, "runs", key)))
  return planned


def recipe_runs(rates: Iterable[float], arms: Iterable[str], seeds: Iterable[int], make, out: str):
  """The runs of a record's learning-rate choice (`experiments.recipe`), seed-major:
  `make(arm, rate, seed)` is each one's config (the arm at defaults, trained at `rate` on
  validation data), keyed `recipe.run_key`, in `out/runs/<key>`."""
  planned = []
  for seed in seeds:
    for rate in rates:
      for arm in arms:
        key = recipe.run_key(rate, arm, seed)
        planned.append(Run(key, make(arm, rate, seed), os.path.join(out, "runs", key)))
  return planned


def record_runs(arms: Iterable[str], seeds: int, chosen: dict, make: MakeConfig, out: str):
  """Every record run, seed-major (a stopped record holds whole seeds): each arm at defaults
  (`make(arm, None, seed)`) and at the value its sweep chose (`chosen`, by arm; one and the
  same run when that is the default, keyed by `sweeps.record_key`), in `out/runs/<key>`."""
  return [
    Run(key, config, os.path.join(out, "runs", key))
    for seed in range(seeds)
    for arm in arms
    for key, config in _both_ways(arm, seed, chosen, make).items()
  ]


def _both_ways(arm: str, seed: int, chosen: dict, make: MakeConfig) -> dict[str, Any]:
  """`arm`'s configs of `seed` at defaults and at the value `chosen` names for it, keyed by
  `sweeps.record_key`: one config where that value is the default (or none is chosen)."""
  default = make(arm, None, seed)
  key = lambda value: sweeps.record_key(arm, default.model.posemb, value, seed)
  configs = {key(None): default}
  if key(chosen.get(arm)) not in configs:
    configs[key(chosen.get(arm))] = make(arm, chosen[arm], seed)
  return configs


def length_runs(arms: Iterable[str], make: MakeConfig, every: int, out: str, chosen=None):
  """A length check's runs (`experiments.recipe`): each arm at defaults (`make(arm, None,
  seed)`, its record config) and, where `chosen` (by arm) names another value, at that value
  too (its tuned reading), at `recipe.LENGTH_SEEDS`, evaluated every `every` steps, keyed
  `length/` + `sweeps.record_key` (`length/<arm>/<seed>`, `length/<arm>/<knob>=<value>/<seed>`),
  in `out/runs/<key>`."""
  planned = []
  for arm in arms:
    for seed in recipe.LENGTH_SEEDS:
      for key, config in _both_ways(arm, seed, chosen or {}, make).items():
        with config.unlocked():
          config.eval_every = every
        key = recipe.LENGTH + key
        planned.append(Run(key, config, os.path.join(out, "runs", key)))
  return planned


def curve(workdir: str, metric: str) -> list[list[float]]:
  """`[[step, metric], ...]` of a run's evaluations (its metrics.jsonl's eval rows): its
  learning curve on the evaluation split."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  points = {r["step"]: r[metric] for r in rows if r.get("split") == "eval"}
  return [[step, points[step]] for step in sorted(points)]


def load(path: str) -> dict[str, Any]:
  """The record's results.json at `path` ({} before its first run)."""
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f)


def saver(path: str) -> Callable[[dict], None]:
  """`save(results)` for `execute`: writes `path` with this invocation's provenance (the
  invocation that trained the newest run), creating its folder. The provenance is taken
  now, as the invocation starts: the commit of the code it imported, not of later commits
  made while it trains."""
  stamp = provenance.provenance()

  def save(results: dict) -> None:
    results["provenance"] = stamp
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"  # then renamed: a kill never leaves half a file
    with open(temp, "w") as f:
      json.dump(results, f, indent=1)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temp, path)

  return save


def check_encodings(planned: Iterable[Run], results: dict) -> None:
  """Stops (before training) if a finished run in `results` was trained with another
  encoding, length or learning rate than its config now gives (its `posemb`, `steps` and `lr`
  entries; older entries without one pass), e.g. a γ or a rate that a choice made before the
  record's flags changed."""
  for run in planned:
    entry = results.get(run.key, {})
    now = {
      "posemb": str(run.config.model.posemb),
      "steps": int(run.config.total_steps),
      "lr": float(run.config.optim.lr),
    }
    for field, value in now.items():
      if entry.get(field, value) != value:
        fix = (
          f"it was adopted from {entry[editions.ADOPTED]} (--choices-from), whose flags differ: "
          "adopt from an edition trained with this one's, or train this edition's own"
          if editions.ADOPTED in entry
          else "keep the flags as they were, or re-run it (remove it from results.json and "
          "its workdir)"
        )
        sys.exit(
          f"{run.key} was recorded with {field}={entry[field]}, but its config now gives "
          f"{value}: {fix}."
        )


def _trained_with(run: Run, summary: dict) -> dict:
  """What a finished run was trained with (its encoding, with γ; its length; its learning
  rate), recorded in its results entry for `check_encodings` (a diverged run has no length
  to record)."""
  steps = {"steps": summary["step"]} if "step" in summary else {}
  return {"posemb": str(run.config.model.posemb), **steps, "lr": float(run.config.optim.lr)}


def chosen(sweep: Iterable[Run], results: dict) -> dict:
  """The entries of `results` that belong to this invocation's `sweep` (not those of another
  invocation's flags): what a declared rule chooses from."""
  return {run.key: results[run.key] for run in sweep if run.key in results}


def execute(
  runs: Iterable[Run],
  results: dict[str, Any],
  score: Callable[[Run, dict], dict],
  save: Callable,
  *,
  jobs: int = 1,
  score_in_jobs: bool = False,
) -> dict[str, Any]:
  """Trains (or resumes, or reads) every run not yet in `results`, after `check_encodings`;
  each new entry also records what its run was trained with (`posemb`, `steps`) and its own
  `provenance` (`provenance.run_provenance`; a dirty tree or a foreign command is also said loudly).

  A run's stamp is written into its workdir by the invocation that trains it and
  read from there, so a run trained elsewhere (another command, a driver script) and read back
  here keeps its own; one read back from a workdir without a stamp gets this invocation's,
  marked `read_back`.

  `score(run, summary)` turns a finished run into its results entry (its time is recorded as
  `score_seconds`, which `progress.status` adds to the time left); `save(results)` is
  called after each run, so a killed record loses at most the runs it was training (and
  those resume from their checkpoints). With `jobs` > 1, that many runs train at once, each
  in its own process with one XLA:CPU thread (`jobs.one_thread_backend`): on the 2-core CPU two
  such jobs train 1.15-1.3x the steps per second of one two-thread run
  (benchmarks/README.md, "`--jobs` on one thread, really"). A run that fails stops the
  record with its error (the other jobs are killed, to resume from their checkpoints), but
  for a sweep or rate-choice run whose loss diverges: its entry says `diverged` and its
  validation score reads NaN (`sweeps.scores`, `recipe.scores`). A job whose lfpe/ or
  configs/ differ from this process's start refuses to train (`provenance.same_code`). Float
  sums may group differently with one thread than with several, so keep `jobs` the same
  across the invocations of one record.

  With `score_in_jobs` (and `jobs` > 1), each job process scores its own run right after
  training it (`score` must then be picklable, e.g. a module-level function or a partial of
  one): for a score that takes minutes (the resolution record's tests), the jobs then score
  in parallel on one thread each, instead of the record's process scoring one run at a time
  while the jobs train ahead runs that wait untested (and are lost with a machine that ends
  first).
  """
  runs = list(runs)
  check_encodings(runs, results)
  pending = [run for run in runs if run.key not in results]
  if not pending:
    return results
  stamp = provenance.run_provenance()
  provenance.warn_if_unfit_for_a_record(stamp)

  def entry(run: Run, summary: dict, scored: dict | None = None) -> dict:
    scored = _timed_score(run, summary, score) if scored is None else scored
    stamped = {"provenance": provenance.of_workdir(run.workdir, stamp)}  # who trained it
    return {**scored, **_trained_with(run, summary), **stamped}

  if jobs <= 1:
    for run in pending:
      results[run.key] = entry(run, _train(run.config, run.workdir, run.key, stamp=stamp))
      save(results)
    return results
  for name, data_dir in {(r.config.data.name, r.config.data.data_dir) for r in pending}:
    data.prepare(name, data_dir)  # here, once: jobs building one dataset at once collide
  code = provenance.start_code()  # the library this process started with (`same_code`)
  with jobs_lib.pool(jobs) as workers:
    in_job = score if score_in_jobs else None  # None: this process scores
    started = {workers.submit(_train_and_score, r, code, stamp, in_job): r for r in pending}
    try:
      for done in futures.as_completed(started):
        run = started[done]
        results[run.key] = entry(run, *done.result())
        save(results)
    except BaseException:  # a failed run (or ^C) stops the record now, not after every run
      jobs_lib.stop(started, workers)
      raise
  return results


def _timed_score(run: Run, summary: dict, score: Callable[[Run, dict], dict]) -> dict:
  """`score(run, summary)` with the seconds it took (`progress.SCORE_SECONDS`, for its time
  left); a choice's run whose loss went non-finite is scored `DIVERGED` (NaN) instead."""
  start = time.monotonic()
  if sweeps.DIVERGED in summary:
    print(f"{run.key}: diverged ({summary[sweeps.DIVERGED]})", flush=True)
    scored = {sweeps.DIVERGED: summary[sweeps.DIVERGED]}
  else:
    scored = score(run, summary)
  return {**scored, progress.SCORE_SECONDS: round(time.monotonic() - start, 1)}


def _train_and_score(
  run: Run, code: str | None, stamp: dict, score: Callable[[Run, dict], dict] | None
) -> tuple[dict, dict | None]:
  """A job of `execute`: the run trained (`_train`), then, given `score` (`score_in_jobs`),
  scored in the same process (`_timed_score`); returns (summary, scored entry or None).

  Stopped with SIGTERM (the record stopping, `execute`), a run in its training loop saves the
  step it reached (`lfpe.train.stopping`); the job then ends at once, as a killed job did, so
  that the pool breaks instead of starting the next run in a fresh worker."""
  try:
    summary = _train(run.config, run.workdir, run.key, code, stamp)
  except stopping.Preempted:
    os._exit(stopping.Preempted.exit_code)
  return summary, None if score is None else _timed_score(run, summary, score)


def _train(
  config: Any, workdir: str, key: str, code: str | None = None, stamp: dict | None = None
) -> dict:
  """`trainer.train_and_evaluate` (a module-level function: picklable for job processes). A
  sweep or rate-choice run whose loss goes non-finite returns `{sweeps.DIVERGED: message}`: a
  knob value or learning rate that diverges is a result of its choice (it ranks last,
  `sweeps.choose`, `recipe.choose`), and re-running would only reach the same NaN, so it must
  not stop the record. A record run's stops it. In a job process, `code` is the record's
  library fingerprint (`provenance.same_code`; None: not checked). Unless the workdir was
  finished already (`progress.read`), `stamp` (the record's `provenance.run_provenance`) is
  written into it (`provenance.stamp_workdir`): the run's own provenance, wherever it is read
  back."""
  provenance.same_code(code)
  trained_here = not progress.read(Run(key, config, workdir)).done
  try:
    summary = trainer.train_and_evaluate(config, workdir)
  except trainer.NonFiniteLossError as e:
    if not key.startswith(("sweep/", recipe.PREFIX)):
      raise
    summary = {sweeps.DIVERGED: str(e).split(":")[0]}
  if stamp and trained_here:
    provenance.stamp_workdir(workdir, stamp)
  return summary
