"""A record's `--status` (experiments/progress.py): runs done, part-way and left, and the time
left, from the speed of the runs finished (on this CPU where some did), by kind of run."""

import io
import json
import os

from configs import vit_digits
from experiments import progress, provenance
from experiments.runs import Run, for_run


def test_status_counts_runs_and_estimates_the_time_left_per_job(tmp_path):
  """Done (a summary at the last step, or a results entry), part-way (a checkpoint) and not
  started; the ETA is the steps left at the finished runs' median seconds per step, over
  `jobs`."""
  config = lambda: for_run(vit_digits.get_config("small=1"), seed=0, steps=100)
  keys = ("done", "slow", "fast", "partway", "fresh", "recorded")
  done, slow, fast, partway, fresh, recorded = (Run(k, config(), str(tmp_path / k)) for k in keys)
  for run, wall_s in ((done, 60.0), (slow, 600.0), (fast, 50.0)):  # 0.6 s a step: the median
    os.makedirs(run.workdir)
    with open(os.path.join(run.workdir, "summary.json"), "w") as f:
      json.dump({"step": 100, "start_step": 0, "wall_s": wall_s}, f)
  os.makedirs(os.path.join(partway.workdir, "checkpoints", "40"))
  planned, results = [done, slow, fast, partway, fresh, recorded], {"recorded": {}}
  out = io.StringIO()
  counts = progress.status(planned, results, out)
  assert counts == {"runs": 6, "done": 4, "partial": 1, "pending": 1}
  assert "part-way: partway at step 40 of 100" in out.getvalue()
  assert "160 steps left: about 2 min" in out.getvalue()  # 160 x 0.6 s = 96 s
  out = io.StringIO()
  progress.status(planned, results, out, jobs=2)
  assert "160 steps left: about 1 min" in out.getvalue()  # two runs at once: 48 s


def test_status_times_a_recorded_run_whose_workdir_is_gone_from_its_seconds(tmp_path):
  """A later session's checkout has results.json but no workdirs: the recorded `seconds`
  still give the speed (here 2 s a step) for the ETA."""
  config = lambda: for_run(vit_digits.get_config("small=1"), seed=0, steps=100)
  gone, fresh = (Run(k, config(), str(tmp_path / k)) for k in ("gone", "fresh"))
  out = io.StringIO()
  progress.status([gone, fresh], {"gone": {"seconds": 200.0}}, out)
  assert "1 of 2 runs done" in out.getvalue()
  assert "100 steps left: about 3 min" in out.getvalue()  # 100 x 2 s


def test_status_times_runs_on_this_cpu_where_some_finished_here(tmp_path, monkeypatch):
  """A record spans machines: its ETA takes the speed of the runs finished on this CPU (a
  workdir here, or a stamp naming this CPU), and those recorded elsewhere only for a kind this
  CPU has not finished yet."""
  monkeypatch.setattr(provenance, "this_cpu", lambda: ("Xeon", ("avx2", "amx_bf16")))
  config = lambda: for_run(vit_digits.get_config("small=1"), seed=0, steps=100)
  runs_ = [Run(k, config(), str(tmp_path / k.replace("/", "_"))) for k in ("a/0", "a/1", "a/2")]
  stamp = lambda cpu, isa=None: {"provenance": {"cpu": cpu, **({"isa": isa} if isa else {})}}
  results = {"a/0": {"seconds": 600.0, **stamp("EPYC")}}  # 6 s a step, elsewhere
  out = io.StringIO()
  progress.status(runs_, results, out)
  assert "200 steps left: about 20 min at the speed of the runs finished on other CPUs (none" in (
    out.getvalue()
  )  # 200 x 6 s
  results["a/1"] = {"seconds": 100.0, **stamp("Xeon", ["avx2", "amx_bf16"])}  # 1 s a step, here
  out = io.StringIO()
  progress.status(runs_, results, out)
  assert "100 steps left: about 2 min at the speed of the runs finished on this CPU (" in (
    out.getvalue()
  )  # 100 x 1 s: not the median of 1 and 6
  results["a/1"] = {"seconds": 100.0, **stamp("Xeon", ["avx2"])}  # another Xeon: elsewhere
  out = io.StringIO()
  progress.status(runs_, results, out)
  assert "about 6 min at the speed of the runs finished on other CPUs" in out.getvalue()


def test_status_times_each_unfinished_run_by_its_kind(tmp_path):
  """A record run can take far longer than a sweep run (tested at every size): each unfinished
  run is timed at its kind's median seconds per step, and adds its kind's median scoring
  time (`score_seconds`, spent outside the trainer)."""
  config = lambda: for_run(vit_digits.get_config("small=1"), seed=0, steps=100)
  keys = ("sweep/a/0", "sweep/a/1", "a/0", "a/1", "a/2", "recipe/lr=1/a/0")
  runs_ = [Run(k, config(), str(tmp_path / k)) for k in keys]
  results = {
    "sweep/a/0": {"seconds": 60.0, progress.SCORE_SECONDS: 30.0},  # 0.6 s a step
    "a/0": {"seconds": 300.0, progress.SCORE_SECONDS: 900.0},  # 3 s a step: its kind's rate
  }
  out = io.StringIO()
  progress.status(runs_, results, out)
  # Training: sweep/a/1 100 x 0.6 s, a/1 and a/2 200 x 3 s, the recipe run (no finished run of
  # its kind) 100 x 1.8 s (the median of all) = 840 s; scoring: 30 s (sweep/a/1) + 2 x 900 s
  # (a/1, a/2) = 1830 s, and the recipe run's is unknown: 2670 s in all
  assert "400 steps left: about 44 min" in out.getvalue()
  assert "recipe runs timed at the other kinds' speed" in out.getvalue()
  assert "not counting the scoring of recipe runs" in out.getvalue()
  for in_jobs, left in ((False, "about 38 min"), (True, "about 22 min")):
    out = io.StringIO()  # two jobs: training over two (420 s); scoring too when in the jobs
    progress.status(runs_, results, out, jobs=2, score_in_jobs=in_jobs)
    assert f"400 steps left: {left}" in out.getvalue()  # 420 + 1830 s, or 420 + 915 s
  assert [progress.kind(k) for k in (keys[0], keys[2], keys[5])] == ["sweep", "record", "recipe"]


def test_status_times_the_latest_runs_of_a_kind(tmp_path):
  """A record's protocol changes over its life (its first runs tested inside the trainer): the
  ETA takes the median speed and scoring time of the latest `RECENT` finished runs of a kind,
  in results.json's order, not of all of them."""
  config = lambda: for_run(vit_digits.get_config("small=1"), seed=0, steps=100)
  old, new = progress.RECENT + 5, progress.RECENT
  keys = [f"a/{i}" for i in range(old + new + 1)]
  runs_ = [Run(k, config(), str(tmp_path / k)) for k in keys]
  slow = {"seconds": 1000.0, progress.SCORE_SECONDS: 0.0}  # 10 s a step, its tests inside
  fast = {"seconds": 100.0, progress.SCORE_SECONDS: 60.0}  # 1 s a step, then 60 s of tests
  results = {k: dict(slow if i < old else fast) for i, k in enumerate(keys[:-1])}
  out = io.StringIO()
  progress.status(runs_, results, out)
  assert "100 steps left: about 3 min" in out.getvalue()  # 100 x 1 s + 60 s, not 1000 s + 0
