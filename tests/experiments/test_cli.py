"""An experiment's command line (`experiments/cli.py`): a record and its `--quick` test kept
apart, and a user's mistake told in one line with exit 2."""

import argparse
import os
import subprocess
import sys

import pytest

from experiments import cli
from lfpe.errors import ConfigError


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
