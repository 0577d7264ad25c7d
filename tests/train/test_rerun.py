"""Running a finished workdir again keeps its results; a larger total_steps trains on.

A tiny config (TinyModel on in-memory blobs, one device) runs 20 steps; the same call
again must leave summary.json, metrics.jsonl and the TensorBoard files byte for byte
(and say that the run is complete); with total_steps=30 it resumes at step 20.
"""

import json
import logging
import shutil

import jax
import pytest
from train_fixtures import make_array_loader, tiny_config

from lfpe.errors import WorkdirError
from lfpe.train import trainer


def _run(workdir, **overrides):
  config = tiny_config(**{"mesh.data": 1, **overrides})
  return trainer.train_and_evaluate(
    config, str(workdir), make_loader=make_array_loader, devices=jax.devices()[:1]
  )


def _files(workdir):
  """The results a re-run must not touch: {relative path: bytes}."""
  paths = [workdir / "summary.json", workdir / "metrics.jsonl", *(workdir / "tb").iterdir()]
  return {str(p.relative_to(workdir)): p.read_bytes() for p in paths}


def _records(workdir, split):
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  return [r for r in map(json.loads, lines) if r["split"] == split]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """A workdir trained to its total_steps=20, and the summary it returned."""
  workdir = tmp_path_factory.mktemp("finished")
  return workdir, _run(workdir)


def test_a_trained_run_returns_its_summary_file(finished):
  """What `train_and_evaluate` returns is summary.json, wall time included: a record that
  trains in a job process keeps each run's seconds."""
  workdir, summary = finished
  assert summary == json.loads((workdir / "summary.json").read_text())
  assert summary["wall_s"] > 0 and summary["start_step"] == 0


def test_rerun_of_a_finished_workdir_keeps_its_results(tmp_path, finished, caplog):
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  before = _files(workdir)
  with caplog.at_level(logging.WARNING):
    summary = _run(workdir)
  assert _files(workdir) == before  # summary, metrics and TensorBoard events untouched
  assert summary == json.loads(before["summary.json"])
  assert summary["train"] == finished[1]["train"] and summary["eval"] == finished[1]["eval"]
  assert "already trained to step 20" in caplog.text and "the run is complete" in caplog.text


def test_rerun_rebuilds_a_missing_summary_from_the_metrics(tmp_path, finished):
  """A run stopped between its last checkpoint and summary.json still gets its summary."""
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  (workdir / "summary.json").unlink()
  summary = _run(workdir)
  on_disk = json.loads((workdir / "summary.json").read_text())
  assert on_disk == summary and summary["step"] == 20
  assert summary["train"] == finished[1]["train"] and summary["eval"] == finished[1]["eval"]


@pytest.mark.parametrize("record", ["[1, 2]", "null"])
def test_a_record_that_is_no_config_is_refused_as_unreadable(tmp_path, finished, record):
  """Valid JSON but no object (the refusal listed `config.: [1, 2] -> '<absent>'`)."""
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  (workdir / "config.json").write_text(record)
  with pytest.raises(WorkdirError, match=r"config.json cannot be read \(it holds a .*not a config"):
    _run(workdir)


def test_a_finished_run_without_its_results_says_how_to_score_it(tmp_path, finished):
  """Checkpoints copied without summary.json and metrics.jsonl (a FileNotFoundError)."""
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  (workdir / "summary.json").unlink()
  (workdir / "metrics.jsonl").unlink()
  with pytest.raises(WorkdirError, match="holds neither summary.json nor metrics.jsonl"):
    _run(workdir)


def test_larger_total_steps_trains_on_from_the_last_checkpoint(tmp_path, finished):
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  first_run = _records(workdir, "train")
  summary = _run(workdir, total_steps=30)
  train = _records(workdir, "train")
  assert [r["step"] for r in train] == list(range(1, 31))
  assert train[:20] == first_run  # the first 20 steps' lines stay as they were
  assert [r["step"] for r in _records(workdir, "eval")] == [10, 20, 30]
  on_disk = json.loads((workdir / "summary.json").read_text())
  assert on_disk["step"] == summary["step"] == 30 and on_disk["start_step"] == 20
  assert on_disk["eval"] == summary["eval"] != finished[1]["eval"]
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["10", "20", "30"]


def _back_to_step_10(workdir, finished):
  """`finished`'s workdir as a run stopped at step 10 would leave it: its checkpoint 10, and
  its metrics up to step 10."""
  shutil.copytree(finished[0], workdir)
  shutil.rmtree(workdir / "checkpoints" / "20")
  lines = (workdir / "metrics.jsonl").read_text().splitlines(keepends=True)
  kept = [line for line in lines if json.loads(line)["step"] <= 10]
  (workdir / "metrics.jsonl").write_text("".join(kept))
  (workdir / "summary.json").unlink()


def test_a_run_preempted_at_an_evaluation_step_evaluates_it_when_resumed(tmp_path, finished):
  """A SIGTERM at step 10 saves checkpoint 10 and skips step 10's evaluation (the grace period
  goes to the save): the resumed run evaluates step 10 first, as the straight run did."""
  workdir = tmp_path / "w"
  _back_to_step_10(workdir, finished)
  lines = (workdir / "metrics.jsonl").read_text().splitlines(keepends=True)
  skipped = [line for line in lines if json.loads(line)["split"] != "eval"]
  (workdir / "metrics.jsonl").write_text("".join(skipped))
  summary = _run(workdir)
  assert _records(workdir, "eval") == _records(finished[0], "eval")  # steps 10 and 20, equal
  assert summary["eval"] == finished[1]["eval"]
  again = tmp_path / "again"  # where step 10's evaluation is in the metrics: not run twice
  _back_to_step_10(again, finished)
  _run(again)
  assert [r["step"] for r in _records(again, "eval")] == [10, 20]


def test_a_summary_or_metrics_line_a_kill_cut_short_is_rebuilt_or_dropped(tmp_path, finished):
  """summary.json cut short is rebuilt from the metrics (it used to stop every re-run with a
  JSONDecodeError), and a half-written last metrics line is dropped when the run resumes."""
  workdir = tmp_path / "w"
  shutil.copytree(finished[0], workdir)
  text = (workdir / "summary.json").read_text()
  (workdir / "summary.json").write_text(text[: len(text) // 2])
  summary = _run(workdir)
  assert summary["train"] == finished[1]["train"] and summary["eval"] == finished[1]["eval"]
  resumed = tmp_path / "resumed"
  _back_to_step_10(resumed, finished)
  with open(resumed / "metrics.jsonl", "a") as f:
    f.write('{"step": 11, "split": "tr')
  summary = _run(resumed)
  timeless = lambda rows: [{k: v for k, v in r.items() if k != "steps_per_s"} for r in rows]
  assert timeless(_records(resumed, "train")) == timeless(_records(finished[0], "train"))
  assert summary["eval"] == finished[1]["eval"]
