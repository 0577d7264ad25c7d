"""The digits demo (experiments/digits_demo/run.py): data, statistics and a `--quick` run.

The committed record comes from the record's own command (README, "The record"), never from
`bash scripts/demo.sh`, which writes to workdirs/; this checks the plumbing in under a minute.
"""

import json
import pathlib
import shutil
import subprocess

import pytest

from experiments.digits_demo import run


def test_demo_config_keeps_the_recipe_but_the_length():
  config = run.demo_config("sine_2d", 600, quick=False)
  assert (config.total_steps, config.schedule.warmup_steps, config.batch_size) == (600, 60, 64)
  assert config.model.posemb == "sine_2d" and config.task.label_smoothing == 0.1


def test_verdict_says_beats_matches_or_trails():
  low, high = [0.90, 0.91, 0.92], [0.95, 0.96, 0.97]
  assert "`fourier` beats" in run.verdict({"fourier": high, "sine_2d": low})
  assert "`fourier` trails" in run.verdict({"fourier": low, "sine_2d": high})
  assert "`fourier` matches" in run.verdict({"fourier": low, "sine_2d": [0.89, 0.91, 0.93]})


def test_quick_run_merges_its_setting_without_pooling(tmp_path):
  other = {
    "setting": "max ISA AVX2 (AVX-512 host, 2 cores)",
    "machine": {"cpu": "test CPU"},
    "seeds": 2,
    "steps": 6,
    "batch": 16,
    "command": "recorded elsewhere",
    "seconds": 1.0,
    "encodings": {
      name: {"accuracy": [0.1, 0.2], "seconds": 1.0, "curve": {"step": [6], "loss": [2.3]}}
      for name in ("sine_2d", "fourier")
    },
  }
  (tmp_path / "results.json").write_text(json.dumps({"settings": {"other": other}}))
  settings = run.main(["--quick", "--encodings=sine_2d,fourier", f"--out={tmp_path}"])
  assert len(settings) == 2
  mine = next(e for k, e in settings.items() if k != "other")
  assert mine["steps"] == 6 and all(len(e["accuracy"]) == 2 for e in mine["encodings"].values())
  # Each seed is a trainer workdir, seed s as `python -m lfpe.main --config.seed=s` runs it.
  runs = sorted(tmp_path.glob("runs/*/fourier/seed*/config.json"))
  assert [json.loads(p.read_text())["seed"] for p in runs] == [0, 1]
  md = (tmp_path / "results.md").read_text()
  # Seed s on two settings is not an independent run: settings are never pooled.
  assert "pooled" not in md.replace("not pooled", "") and md.count("`fourier` − `sine_2d`") == 2
  assert (tmp_path / "digits_demo.png").stat().st_size > 10_000


ROOT = pathlib.Path(__file__).resolve().parents[2]


def _git_status() -> str:
  return subprocess.run(
    ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
  ).stdout


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_the_demo_leaves_every_tracked_file_as_it_was():
  """`bash scripts/demo.sh` as a new user runs it (here --quick): its files go to the ignored
  workdirs/, never over the committed record in experiments/digits_demo/."""
  out = ROOT / "workdirs" / "digits_demo_quick"
  shutil.rmtree(out, ignore_errors=True)
  before = _git_status()
  result = subprocess.run(
    ["bash", "scripts/demo.sh", "--quick", "--encodings=sine_2d,fourier"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  try:
    assert result.returncode == 0, result.stderr[-3000:]
    assert _git_status() == before
    assert {p.name for p in out.iterdir()} >= {"results.json", "claims.json", "results.md"}
    # Each run says where it starts and where it ended, though 6 steps are under log_every.
    assert result.stderr.count("lfpe: training to step 6 in workdirs/digits_demo_quick/") == 4
    assert result.stderr.count("lfpe: done at step 6") == 4
  finally:
    shutil.rmtree(out, ignore_errors=True)
