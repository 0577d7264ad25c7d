"""benchmarks/gpu_suite.py: its table's arithmetic, its process runner, the whole `--cpu` run."""

import pathlib
import re
import subprocess
import sys

import pytest

from benchmarks import gpu_suite
from lfpe.errors import ConfigError

PEAKS = {"measured_bfloat16": 500e12, "spec_bfloat16": 1000e12, "measured_float32": 250e12}


def test_table_rates_mfu_and_ratios_against_the_family_peer():
  rows = [
    ("vit", "lfpe, embed_1d", dict(step_ms=100.0, median_ms=101.0, flops=30e12, peak_bytes=2**31)),
    ("vit", "timm, torch.compile", dict(step_ms=80.0, median_ms=80.5, peak_bytes=None)),
    ("detr", "lfpe, detr_sine", dict(step_ms=50.0, median_ms=50.0, flops=5e12, dtype="float32")),
    ("detr", "PyTorch DETR, eager", {"error": "exit 1: ModuleNotFoundError: torch"}),
  ]
  lines = gpu_suite.table(rows, PEAKS).splitlines()
  # 30 TFLOP in 0.1 s = 300 TFLOP/s: 60 % of the measured bf16 peak, 30 % of the spec sheet.
  assert lines[2].split(" | ")[3:] == [
    "100.0",
    "101.0",
    "2.0",
    "300.0",
    "60.0 %",
    "30.0 %",
    "1.25x |",
  ]
  # The peer is timed against itself and counted with its family's (lfpe's) FLOPs.
  assert lines[3].split(" | ")[6:] == ["375.0", "75.0 %", "37.5 %", "1.00x |"]
  # float32 rows use the float32 peaks; no spec-sheet peak given, no peer timed.
  assert lines[4].split(" | ")[6:] == ["100.0", "40.0 %", "n/a", "n/a |"]
  assert "exit 1: ModuleNotFoundError: torch" in lines[5]


def test_a_failing_or_silent_process_becomes_an_error_row(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "ok.py").write_text('print("noise")\nprint(\'RESULT {"step_ms": 1.5}\')\n')
  (tmp_path / "bad.py").write_text('raise SystemExit("no GPU here")\n')
  (tmp_path / "slow.py").write_text("import time\ntime.sleep(5)\n")
  assert gpu_suite.run("ok", timeout=60, cpu=False) == {"step_ms": 1.5}
  assert gpu_suite.run("bad", timeout=60, cpu=False) == {"error": "exit 1: no GPU here"}
  assert gpu_suite.run("slow", timeout=1, cpu=False) == {"error": "timed out after 1 s"}


def test_a_row_number_out_of_range_is_refused_before_anything_runs():
  cmd = [sys.executable, "-m", "benchmarks.gpu_suite", "--cpu", "--rows", "4,12"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2 and "--rows: no row 12; the rows are 1-11" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_each_xla_flags_adds_a_row():
  flags = ["--xla-flags=--xla_a=1", "--xla-flags=--xla_b=2"]  # `=`: a value starting with --
  cmd = [sys.executable, "-m", "benchmarks.gpu_suite", "--cpu", "--rows", "14", *flags]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
  assert proc.returncode == 2 and "--rows: no row 14; the rows are 1-13" in proc.stderr


def test_family_config_applies_trainer_overrides_and_names_a_wrong_field():
  config = gpu_suite.family_config("detr", "detr_sine", True, ("task.matcher=optax",))
  assert config.task.matcher == "optax" and config.batch_size == 2
  assert gpu_suite.family_config("detr", "detr_sine", False).task.matcher == "auto"
  with pytest.raises(ConfigError, match="did you mean 'matcher'"):
    gpu_suite.family_config("detr", "detr_sine", True, ("task.matchr=optax",))


@pytest.mark.slow
def test_the_cpu_suite_prints_a_row_for_every_measurement(tmp_path):
  cmd = [sys.executable, "-m", "benchmarks.gpu_suite", "--cpu", "--out", str(tmp_path)]
  cmd += ["--budget", "1100"]  # beside the other xdist worker: every row, under the timeout
  out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1200).stdout
  table = (tmp_path / "gpu_suite.md").read_text()
  assert table.split("\n\n")[1] in out
  for family, label, *_ in gpu_suite.GPU_RUNS:
    (row,) = [r for r in table.splitlines() if r.startswith(f"| {family} | {label} |")][:1]
    if label.startswith("lfpe"):  # lfpe's rows always run; the peers' need torch
      assert "(XLA) |" in row and "exit" not in row, row


def test_the_prepared_gpu_call_asks_for_rows_that_exist_and_fits_its_timeout():
  """benchmarks/gpu_call.sh is run once, on a GPU lent for minutes: its rows must exist (the
  eleven and one per --xla-flags) and its budget leave the suite's peaks (120 s) and the
  install inside the 590 s the call is given."""
  script = (pathlib.Path(gpu_suite.__file__).parent / "gpu_call.sh").read_text()
  rows = [int(n) for n in re.search(r"--rows ([\d,]+)", script).group(1).split(",")]
  flags = script.count("--xla-flags=")
  assert set(rows) <= set(range(1, len(gpu_suite.GPU_RUNS) + flags + 1)) and 1 in rows
  budget = int(re.search(r"BUDGET:-(\d+)", script).group(1))
  assert 120 + budget + 60 <= 590
