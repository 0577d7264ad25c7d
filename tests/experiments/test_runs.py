"""experiments/runs.py: how a record adapts a shipped config for one run, and runs them."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from configs import reformer_digits, vit_digits
from experiments import progress, provenance
from experiments import runs as runs_lib
from experiments.runs import Run, execute, for_run
from lfpe.errors import ConfigError

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)


def test_for_run_sets_seed_steps_and_keeps_the_configs_checkpoints():
  config = for_run(reformer_digits.get_config(), seed=3, steps=2000, eval_every=250)
  assert (config.seed, config.progress, config.total_steps) == (3, True, 2000)  # bar or lines
  assert config.eval_every == 250
  assert config.checkpoint_every == 1000  # the config's: a killed run loses < 1,000 steps
  assert config.schedule.warmup_steps == 100  # the config's, under a tenth of the run
  short = for_run(reformer_digits.get_config(), seed=0, steps=300)
  assert (short.checkpoint_every, short.eval_every, short.schedule.warmup_steps) == (300, 300, 30)
  unchanged = for_run(reformer_digits.get_config(), seed=1)
  assert (unchanged.total_steps, unchanged.checkpoint_every) == (3000, 1000)


def test_execute_trains_jobs_in_processes_saves_each_and_reads_finished_runs(tmp_path, monkeypatch):
  """Three runs, two at once (`jobs=2`: spawned one-thread processes, a fresh one per run) all
  finish, each saved as it ends, their dataset prepared once here first; a second invocation
  reads the finished workdirs instead of training again."""
  prepared = []
  monkeypatch.setattr(runs_lib.data, "prepare", lambda *a: prepared.append(a))
  planned = [
    Run(
      f"seed{s}",
      for_run(vit_digits.get_config("small=1"), seed=s, steps=3),
      str(tmp_path / f"s{s}"),
    )
    for s in (0, 1, 2)
  ]
  saved = []
  score = lambda run, summary: {"step": summary["step"], "loss": summary["train"]["loss"]}
  results = execute(planned, {}, score, lambda r: saved.append(dict(r)), jobs=2)
  assert sorted(results) == ["seed0", "seed1", "seed2"] and [len(r) for r in saved] == [1, 2, 3]
  assert prepared == [(planned[0].config.data.name, planned[0].config.data.data_dir)]
  assert all(r["step"] == 3 for r in results.values())
  assert results["seed0"]["loss"] != results["seed1"]["loss"]  # each run has its own seed
  again = execute(planned, {}, score, lambda r: None)  # in this process, no training
  without_date = lambda r: {
    k: {**e, "provenance": {**e["provenance"], "date": None}} for k, e in r.items()
  }
  assert without_date(again) == without_date(results)  # stamped by the invocation reading it


def _score_where(run, summary):
  """A picklable score: which process scored the run, and its step."""
  return {"scored_by": os.getpid(), "step": summary["step"]}


def test_score_in_jobs_scores_each_run_in_its_own_job_process(tmp_path, monkeypatch):
  """`score_in_jobs=True`: each job process scores the run it trained (not the record's
  process, which only stamps and saves), with its scoring time recorded; without it, the
  record's process scores."""
  monkeypatch.setattr(runs_lib.data, "prepare", lambda *a: None)
  planned = [
    Run(
      f"seed{s}", for_run(vit_digits.get_config("small=1"), seed=s, steps=2), str(tmp_path / f"{s}")
    )
    for s in (0, 1)
  ]
  results = execute(planned, {}, _score_where, lambda r: None, jobs=2, score_in_jobs=True)
  scorers = {entry["scored_by"] for entry in results.values()}
  assert os.getpid() not in scorers and len(scorers) == 2  # a fresh process per run
  assert all(e["step"] == 2 and progress.SCORE_SECONDS in e for e in results.values())
  assert all(e["provenance"]["commit"] for e in results.values())  # stamped by the record
  again = execute(planned, {}, _score_where, lambda r: None, jobs=2)  # read back, scored here
  assert {entry["scored_by"] for entry in again.values()} == {os.getpid()}


def test_a_failed_job_stops_the_record_and_kills_the_other_jobs(tmp_path, monkeypatch):
  """One run's error ends `execute` at once (not after every queued run), with that error;
  the other job is killed part-way and nothing is saved for it, and the pool's own thread
  ends without an error of its own (CPython gh-119592)."""
  thread_errors = []
  monkeypatch.setattr(threading, "excepthook", thread_errors.append)
  bad = for_run(vit_digits.get_config("small=1"), seed=0, steps=3)
  with bad.unlocked():
    bad.optim.lr = -1.0  # a ConfigError in the job, before any compilation
  long = for_run(vit_digits.get_config("small=1"), seed=1, steps=100_000)
  planned = [Run("long", long, str(tmp_path / "long")), Run("bad", bad, str(tmp_path / "bad"))]
  saved = []
  start = time.perf_counter()
  with pytest.raises(Exception, match="optim.lr"):
    execute(planned, {}, lambda run, s: s, saved.append, jobs=2)
  assert time.perf_counter() - start < 600 and not saved  # not the 100,000-step run
  assert not _running_jobs() and not thread_errors
  assert not os.path.exists(tmp_path / "long" / "summary.json")


def _running_jobs() -> list[str]:
  """This process's job processes still running, from /proc (not multiprocessing's own
  bookkeeping, which can miss a child that another waiter reaped)."""
  jobs = []
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/stat") as f:
        state, parent = f.read().rsplit(")", 1)[1].split()[:2]
      with open(f"/proc/{pid}/cmdline") as f:
        command = f.read()
    except OSError:  # it ended while we looked
      continue
    if int(parent) == os.getpid() and state != "Z" and "spawn_main" in command:
      jobs.append(pid)
  return jobs


def test_saver_stamps_the_provenance_of_the_invocation_start(tmp_path, monkeypatch):
  """Commits made while a record trains do not relabel the code that trained it."""
  stamps = iter([{"commit": "start"}, {"commit": "later"}])
  monkeypatch.setattr(provenance, "provenance", lambda: next(stamps))
  save = runs_lib.saver(str(tmp_path / "out" / "results.json"))
  save({"a": 1})
  save({"a": 1, "b": 2})
  with open(tmp_path / "out" / "results.json") as f:
    assert json.load(f) == {"a": 1, "b": 2, "provenance": {"commit": "start"}}


def test_each_run_records_its_own_provenance_and_a_dirty_tree_is_said_loudly(
  tmp_path, monkeypatch, capsys, fresh_stamp
):
  """Records span invocations: each entry keeps the commit, command and date that trained it;
  a dirty tree or a command other than an experiment's run.py is marked and warned about."""
  stamp = {
    "commit": "abc+uncommitted changes",
    "command": "python driver.py",
    "date": "2026-11-27T00:00:00+00:00",
    "machine": {"cpu": "test CPU"},
  }
  monkeypatch.setattr(provenance, "provenance", lambda: stamp)
  monkeypatch.setattr(runs_lib.trainer, "train_and_evaluate", lambda config, workdir: {"step": 6})
  run = Run("a/0", for_run(vit_digits.get_config("small=1"), seed=0), str(tmp_path / "a"))
  results = execute([run], {}, lambda run, summary: {"score": 1.0}, lambda results: None)
  assert results["a/0"]["provenance"] == {
    "commit": "abc+uncommitted changes",
    "command": "python driver.py",
    "date": "2026-11-27T00:00:00+00:00",
    "dirty": True,
    "cpu": "test CPU",
    "own_command": False,  # under pytest, not python -m experiments.NAME.run
  }
  warning = capsys.readouterr().err
  assert "WARNING: the runs trained now are marked in results.json" in warning
  assert "uncommitted changes" in warning and "is not an experiment's run.py" in warning
  execute([run], results, lambda run, summary: {}, lambda results: None)  # nothing to train
  assert "WARNING" not in capsys.readouterr().err


def test_a_diverged_sweep_run_is_recorded_and_ranks_last_a_record_run_stops(
  tmp_path, monkeypatch, fresh_stamp
):
  """A sweep value that diverges is a result (re-running reaches the same NaN); a record
  run that diverges stops the record, as any failed run does."""
  from experiments import sweeps  # noqa: PLC0415
  from lfpe.train import trainer  # noqa: PLC0415

  def train(config, workdir):
    if "gamma=4" in workdir or "record" in workdir:
      raise trainer.NonFiniteLossError("Training loss is nan at step 5: stopping; ...")
    return {"step": 6, "eval": {"AP": 0.5}}

  monkeypatch.setattr(runs_lib.trainer, "train_and_evaluate", train)
  config = for_run(vit_digits.get_config("small=1"), seed=0)
  keys = ("sweep/all/fourier/gamma=1/0", "sweep/all/fourier/gamma=4/0")
  sweep = [Run(k, config, str(tmp_path / k.replace("/", "_"))) for k in keys]
  score = lambda run, summary: {"eval": summary["eval"]}
  results = execute(sweep, {}, score, lambda results: None)
  assert results[keys[1]]["diverged"] == "Training loss is nan at step 5"
  assert "posemb" in results[keys[1]] and "provenance" in results[keys[1]]
  by_arm = sweeps.scores(results, lambda e: e["eval"]["AP"])
  assert by_arm["all/fourier"][1.0] == [0.5] and np.isnan(by_arm["all/fourier"][4.0][0])
  assert sweeps.choose(by_arm, higher_is_better=True) == {"all/fourier": 1.0}
  record = Run("all/fourier/0", config, str(tmp_path / "record"))
  with pytest.raises(trainer.NonFiniteLossError):
    execute([record], results, score, lambda results: None)


def test_sweep_runs_start_at_first_seed_in_key_config_and_workdir(tmp_path):
  """A sweep from `first_seed` (generation and detection: `SWEEP_FIRST_SEED`, past the
  record's seeds) keys, seeds and places each run at its own seed."""
  make = lambda arm, value, seed: for_run(reformer_digits.get_config(), seed=seed, steps=3)
  planned = runs_lib.sweep_runs({"lsh/fourier": (1.0,)}, 2, make, str(tmp_path), first_seed=100)
  assert [r.config.seed for r in planned] == [100, 101]
  assert [r.key.rsplit("/", 1)[1] for r in planned] == ["100", "101"]
  assert all(r.workdir.endswith(r.key) for r in planned)
  assert runs_lib.SWEEP_FIRST_SEED >= 10  # past any record's seeds


def test_execute_hands_each_job_the_records_start_code(tmp_path, monkeypatch):
  """A job (a fresh process per run) compares its library with the record's start: a record
  whose start fingerprint differs from the tree's stops with the message, before training."""
  monkeypatch.setattr(provenance, "start_code", lambda: "stale")
  config = for_run(vit_digits.get_config("small=1"), seed=0, steps=2)
  planned = [Run(k, config, str(tmp_path / k)) for k in ("a", "b")]
  with pytest.raises(ConfigError, match="changed since this record started"):
    execute(planned, {}, lambda run, summary: {}, lambda results: None, jobs=2)
  assert not os.path.exists(tmp_path / "a" / "summary.json")


def test_kept_is_the_lowest_seed_whose_checkpoints_are_left(tmp_path):
  record = {k: Run(k, None, str(tmp_path / k)) for k in ("a/0", "a/1", "a/2", "a/gamma=2/0")}
  (tmp_path / "a/0" / "checkpoints").mkdir(parents=True)  # emptied: pruned to save disk
  for key in ("a/1", "a/2", "a/gamma=2/0"):
    (tmp_path / key / "checkpoints" / "3000").mkdir(parents=True)
  spec = "fourier"  # gamma = 1 is its own value: the defaults run is keyed `a/<seed>`
  assert runs_lib.kept(record, "a", spec, None, 3) is record["a/1"]
  assert runs_lib.kept(record, "a", spec, 2.0, 1) is record["a/gamma=2/0"]
  assert runs_lib.kept(record, "a", spec, None, 1) is None


@pytest.mark.slow  # two job processes compile and train: about a minute
def test_a_stopped_record_stops_its_jobs_each_saving_its_step_and_starts_no_other(tmp_path):
  """Ctrl-C (here SIGUSR1 raising it) to a `--jobs 2` record of three runs while two train:
  each job saves the step it reached (no periodic checkpoint is due), ends, and the pool breaks
  instead of giving the third run a fresh worker (it would train, 30 steps, and finish)."""
  config = for_run(vit_digits.get_config("small=1"), seed=0, steps=100_000)
  with config.unlocked():
    config.checkpoint_every = config.eval_every = 100_000
    config.log_every, config.data.data_dir = 5, str(tmp_path / "data")
  third = for_run(vit_digits.get_config("small=1"), seed=0, steps=30)
  with third.unlocked():
    third.data.data_dir = str(tmp_path / "data")
  planned = [Run("a/0", config, str(tmp_path / "a")), Run("b/0", config, str(tmp_path / "b"))]
  planned.append(Run("c/0", third, str(tmp_path / "c")))

  def logged(name):  # a train row: in its loop, SIGTERM handled (the file opens before it)
    path = tmp_path / name / "metrics.jsonl"
    return path.exists() and path.read_text().strip()

  def stop_once_both_train():
    while not all(logged(k) for k in "ab"):
      time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGUSR1)

  def interrupt(signum, frame):
    raise KeyboardInterrupt

  previous = signal.signal(signal.SIGUSR1, interrupt)
  try:
    threading.Thread(target=stop_once_both_train, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
      execute(planned, {}, lambda run, summary: {}, lambda results: None, jobs=2)
  finally:
    signal.signal(signal.SIGUSR1, previous)
  for name in "ab":
    [saved] = os.listdir(tmp_path / name / "checkpoints")
    assert 0 < int(saved) < 100_000, saved
  assert not (tmp_path / "c").exists()
