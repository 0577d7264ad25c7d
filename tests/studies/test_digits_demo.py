"""The digits demo (experiments/digits_demo/run.py): data, statistics and a `--quick` run.

The recorded numbers come from `bash scripts/demo.sh` (experiments/digits_demo/results.md);
this checks the plumbing in about half a minute.
"""

import json

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
