"""`python -m lfpe.main` as a cluster job sees it: log lines, quick tries, clear failures.

Each case runs the command line as a subprocess (8 fake CPU devices, inherited from
tests/conftest.py) with stderr a pipe, not a terminal. The mistakes of a user are in
test_cli_mistakes.py, signals in test_cli_signals.py, workdirs that keep their record in
test_workdir_record.py.
"""

import json
import re
import shutil

import pytest
from cli_helpers import assert_one_line_error, run_main

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)

SMALL = "--config=configs/vit_digits.py:small=1"


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
  """A 12-step run with a 5-step warmup asked for: (workdir, its stderr)."""
  workdir = tmp_path_factory.mktemp("logged") / "w"
  result = run_main(
    SMALL, f"--workdir={workdir}", "--config.total_steps=12", "--config.schedule.warmup_steps=50"
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir, result.stderr


def test_a_run_without_a_terminal_logs_progress_lines(logged_run):
  """About 20 lines a run at most, at multiples of log_every (2): steps 2, 4, ..., 12."""
  _, stderr = logged_run
  train = re.findall(r"lfpe: step (\d+)/12 \(\d+%\) loss [\d.]+, [\d.]+ steps/s, ETA \w+", stderr)
  assert [int(s) for s in train] == [2, 4, 6, 8, 10, 12]


def test_a_run_shorter_than_log_every_says_where_it_starts_and_ends(tmp_path):
  result = run_main(SMALL, f"--workdir={tmp_path}", "--config.log_every=50")
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.startswith("lfpe: ")]
  assert lines[0] == f"lfpe: training to step 6 in {tmp_path}"
  assert [line for line in lines if "loss" in line and "eval" not in line] == [
    next(line for line in lines if re.match(r"lfpe: step 6/6 \(100%\) loss", line))
  ]  # the one training line: the last step
  assert "done at step 6" in lines[-1]


def test_each_evaluation_is_one_line(logged_run):
  workdir, stderr = logged_run
  evals = re.findall(r"lfpe: step (\d+)/12 eval: loss ([\d.]+), accuracy ([\d.]+)", stderr)
  records = [json.loads(r) for r in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert [(int(s), float(a)) for s, _, a in evals] == [
    (r["step"], round(r["accuracy"], 4)) for r in records if r["split"] == "eval"
  ]


def test_the_last_line_names_the_summary_and_the_headline_metric(logged_run):
  workdir, stderr = logged_run
  summary = json.loads((workdir / "summary.json").read_text())
  last = stderr.strip().splitlines()[-1]
  accuracy = f"{summary['eval']['accuracy']:.4g}"
  assert (
    last == f"lfpe: done at step 12: eval accuracy {accuracy}; summary in {workdir}/summary.json"
  )


def test_warmup_longer_than_the_run_is_clipped_and_logged(logged_run):
  workdir, stderr = logged_run
  assert "config.schedule.warmup_steps=50 does not fit config.total_steps=12" in stderr
  assert "clipped to 11 steps" in stderr
  assert json.loads((workdir / "config.json").read_text())["schedule"]["warmup_steps"] == 50


def test_report_every_sets_the_interval(tmp_path):
  result = run_main(
    SMALL, f"--workdir={tmp_path}", "--config.report_every=4", "--config.progress=true"
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.findall(r"lfpe: step (\d+)/6 \(", result.stderr) == ["4", "6"]  # and the last


def test_missing_dataset_says_how_to_prepare_it(tmp_path):
  """The one user error of several lines: its first names the dataset, the rest are commands."""
  (tmp_path / "data").mkdir()
  result = run_main(
    "--config=configs/vit_cifar10.py:small=1",
    f"--config.data.data_dir={tmp_path / 'data'}",
    f"--workdir={tmp_path / 'w'}",
  )
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  assert "lfpe.main: Dataset 'cifar10' is not prepared as array_record" in result.stderr
  assert f"tfds build cifar10 --data_dir={tmp_path / 'data'}" in result.stderr  # the commands


def test_damaged_checkpoints_are_kept_and_not_advised_for_deletion(tmp_path):
  step = tmp_path / "w" / "checkpoints" / "6"
  for name in ("state/_METADATA", "data/process_0-of-1.json"):
    (step / name).parent.mkdir(parents=True)
    (step / name).write_text("{not json")
  result = run_main(SMALL, f"--workdir={tmp_path / 'w'}")
  message = assert_one_line_error(
    result, f"No checkpoint in {tmp_path / 'w' / 'checkpoints'} can be read: all are damaged"
  )
  assert "Delete" not in message and "start a new --workdir" in message
  assert step.is_dir() and not (tmp_path / "w" / "config.json").exists()


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
  """A 20-step run with checkpoints at steps 10 and 20."""
  workdir = tmp_path_factory.mktemp("two") / "w"
  result = run_main(SMALL, f"--workdir={workdir}", *TWENTY_STEPS)
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir


TWENTY_STEPS = ("--config.total_steps=20", "--config.checkpoint_every=10")


def _halve_array_files(step_dir):
  """Truncate every data file of the step's arrays to half its size. All of them, not the
  largest: an OCDBT store keeps unreferenced files of earlier flushes, and halving one of
  those damages nothing (CI's latest stack once restored such a step cleanly)."""
  files = [p for p in (step_dir / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
  assert files, f"no array data files under {step_dir}/state: orbax's layout changed"
  for file in files:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def test_a_truncated_newest_checkpoint_resumes_from_the_previous_with_one_note(
  tmp_path, two_checkpoints
):
  workdir = tmp_path / "w"
  shutil.copytree(two_checkpoints, workdir)
  _halve_array_files(workdir / "checkpoints" / "20")
  result = run_main(SMALL, f"--workdir={workdir}", *TWENTY_STEPS, "--config.total_steps=30")
  assert result.returncode == 0, result.stderr[-3000:]
  for noise in ("Traceback", "Exception ignored", "Event loop is closed"):
    assert noise not in result.stderr, result.stderr[-3000:]
  notes = [line for line in result.stderr.splitlines() if "checkpoint step" in line]
  assert len(notes) == 1 and "Resuming from checkpoint step 10" in notes[0], notes
  assert json.loads((workdir / "summary.json").read_text())["start_step"] == 10


def test_init_from_starts_a_new_run_at_another_size_from_a_trained_one(tmp_path, two_checkpoints):
  """The CLI path of `config.init_from`: a 20-step run seeds one at 32 px instead of 16."""
  result = run_main(
    SMALL,
    f"--workdir={tmp_path / 'w'}",
    f"--config.init_from={two_checkpoints}",
    "--config.data.image_size=32",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"config.init_from={two_checkpoints}/checkpoints/20/state: " in result.stderr
  assert json.loads((tmp_path / "w" / "config.json").read_text())["init_from"] == str(
    two_checkpoints
  )


def test_init_from_a_truncated_step_is_one_line_naming_the_steps_to_choose(
  tmp_path, two_checkpoints
):
  source = tmp_path / "source"
  shutil.copytree(two_checkpoints, source)
  _halve_array_files(source / "checkpoints" / "20")
  result = run_main(SMALL, f"--workdir={tmp_path / 'w'}", f"--config.init_from={source}")
  assert_one_line_error(
    result,
    f"config.init_from='{source}': {source}/checkpoints/20/state cannot be read (",
    f"point it at another step's state folder ({source}/checkpoints/STEP/state, STEP in [10])",
  )
  for noise in ("Exception ignored", "Event loop is closed"):
    assert noise not in result.stderr, result.stderr[-3000:]


def test_every_checkpoint_truncated_is_one_line_and_exit_2(tmp_path, two_checkpoints):
  workdir = tmp_path / "w"
  shutil.copytree(two_checkpoints, workdir)
  for step in ("10", "20"):
    _halve_array_files(workdir / "checkpoints" / step)
  result = run_main(SMALL, f"--workdir={workdir}", *TWENTY_STEPS)
  message = assert_one_line_error(
    result, f"No checkpoint in {workdir / 'checkpoints'} can be read", "start a new --workdir"
  )
  assert "Exception ignored" not in result.stderr and "Event loop" not in result.stderr, message


@pytest.mark.parametrize("how", ["env", "flag"])
def test_traceback_on_request(tmp_path, how):
  extra, env = (("--verbosity=1",), {}) if how == "flag" else ((), {"LFPE_TRACEBACK": "1"})
  result = run_main(SMALL, "--config.batch_size=0", f"--workdir={tmp_path}", *extra, **env)
  assert result.returncode == 2
  assert "Traceback" in result.stderr and "lfpe.errors.ConfigError" in result.stderr
  assert "lfpe.main: config.batch_size must be an integer >= 1, got 0." in result.stderr
