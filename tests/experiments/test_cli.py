"""An experiment's command line (`experiments/cli.py`): a record and its `--quick` test kept
apart, and a user's mistake told in one line with exit 2."""

import argparse
import json
import os
import signal
import subprocess
import sys

import pytest

from experiments import cli
from lfpe.errors import ConfigError

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)


def _args(out, *, quick, status=False):
  return argparse.Namespace(out=str(out), quick=quick, status=status)


def test_a_quick_out_is_marked_and_its_status_is_its_own_plan(tmp_path, capsys):
  args = _args(tmp_path, quick=True)
  cli.settle_mode(args)
  assert (tmp_path / cli.QUICK_MARK).exists()
  status = _args(tmp_path, quick=False, status=True)  # --status without --quick
  cli.settle_mode(status)
  assert status.quick and "was made with --quick" in capsys.readouterr().out
  with pytest.raises(ConfigError, match="holds a --quick test; add --quick"):
    cli.settle_mode(_args(tmp_path, quick=False))  # training the record into it


def test_quick_runs_never_go_into_a_record(tmp_path, capsys):
  (tmp_path / "results.json").write_text("{}")
  with pytest.raises(ConfigError, match="holds a record; give --quick runs their own --out"):
    cli.settle_mode(_args(tmp_path, quick=True))
  status = _args(tmp_path, quick=True, status=True)
  cli.settle_mode(status)
  assert not status.quick and "was made without --quick" in capsys.readouterr().out
  assert not (tmp_path / cli.QUICK_MARK).exists()


@pytest.mark.parametrize(
  ("command", "given", "jobs"),
  [
    ("python run.py --out=o --jobs 2", None, 2),  # resumed or --status: the record's own
    ("python run.py --out=o --jobs=3", None, 3),
    ("python run.py --out=o", None, 1),  # trained without --jobs: one at a time
    (None, None, 1),  # no record yet
    ("python run.py --out=o --jobs 2", 1, 1),  # given: kept
  ],
)
def test_an_unset_jobs_is_the_records_own(tmp_path, command, given, jobs):
  """`--jobs` left out takes the last invocation's (results.json provenance), so a resumed
  record keeps one `--jobs` and `--status` divides its ETA by the jobs that train it."""
  if command:
    provenance = {"provenance": {"command": command}}
    (tmp_path / "results.json").write_text(json.dumps(provenance))
  args = argparse.Namespace(out=str(tmp_path), quick=False, status=True, jobs=given)
  cli.settle_mode(args)
  assert args.jobs == jobs
  parser = argparse.ArgumentParser()
  cli.add_jobs_flag(parser)
  assert parser.parse_args([]).jobs is None and parser.parse_args(["--jobs", "2"]).jobs == 2


def test_an_experiment_refuses_in_one_line_and_exit_2(tmp_path):
  """A user error on an experiment's command line: `python -m ...: <message>`, no traceback."""
  (tmp_path / "results.json").write_text("{}")
  result = subprocess.run(
    [sys.executable, "-m", "experiments.layout.run", "--quick", f"--out={tmp_path}"],
    cwd=os.path.join(os.path.dirname(__file__), "..", ".."),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  assert (
    result.stderr.strip()
    .splitlines()[-1]
    .startswith(f"python -m experiments.layout.run: --out={tmp_path} holds a record")
  )


@pytest.mark.parametrize(
  "module, flags, message",
  [
    ("digits_demo", ["--seeds", "1"], "--seeds: must be at least 2, got 1"),
    ("resolution", ["--seeds", "0"], "--seeds: must be at least 2, got 0"),
    ("layout", ["--jobs", "0"], "--jobs: must be at least 1, got 0"),
    ("digits_demo", ["--encodings", "fourier,sine2d"], "--encodings='sine2d': Unknown"),
    ("digits_demo", ["--encodings", ""], "--encodings='': "),
    ("detection", ["--steps", "-5"], "--steps: must be at least 0, got -5"),  # was accepted
    ("generation", ["--eval-every", "0"], "--eval-every: must be at least 1, got 0"),
    ("layout", ["--stpes", "3"], "unrecognized arguments: --stpes 3 (--help lists the flags)"),
  ],
)
def test_bad_flags_are_refused_in_one_line_before_anything_trains(module, flags, message):
  """One line, `python -m experiments.NAME.run: <message>` (argparse printed its usage)."""
  result = subprocess.run(
    [sys.executable, "-m", f"experiments.{module}.run", *flags, "--status", "--out=/nonexistent"],
    cwd=os.path.join(os.path.dirname(__file__), "..", ".."),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  (line,) = result.stderr.strip().splitlines()
  assert line.startswith(f"python -m experiments.{module}.run: ") and message in line, line


def test_an_out_that_cannot_be_made_is_refused_in_one_line(tmp_path):
  (tmp_path / "file").write_text("")
  args = argparse.Namespace(out=str(tmp_path / "file" / "x"), quick=True, status=False)
  with pytest.raises(ConfigError, match=r"--out=.*/file/x cannot be made \(Not a directory\)"):
    cli.settle_mode(args)


@pytest.mark.parametrize(
  "signum, status, line",
  [
    (signal.SIGTERM, 143, "stopped (SIGTERM); re-run the same command to resume"),
    (signal.SIGINT, 130, "interrupted; re-run the same command to resume"),
  ],
)
def test_sigterm_or_ctrl_c_stops_a_record_in_one_line(tmp_path, signum, status, line):
  """A scheduler's SIGTERM takes Ctrl-C's way out of a record's command (its jobs stopped,
  its results kept), in one line with its own status."""
  (tmp_path / "waits.py").write_text(
    "import time\nfrom experiments import cli\n"
    "cli.run(lambda: (print('ready', flush=True), time.sleep(120)))\n"
  )
  root = os.path.join(os.path.dirname(__file__), "..", "..")
  job = subprocess.Popen(
    [sys.executable, "-m", "waits"],
    cwd=root,
    env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root])},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's job
  )
  assert job.stdout.readline() == "ready\n", job.stderr.read()
  job.send_signal(signum)
  _, stderr = job.communicate(timeout=60)
  assert job.returncode == status and "Traceback" not in stderr, stderr[-3000:]
  assert stderr.strip().splitlines()[-1].startswith(f"python -m waits: {line}"), stderr
