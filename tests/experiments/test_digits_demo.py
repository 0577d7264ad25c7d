"""The digits demo (experiments/digits_demo/run.py): data, statistics and a `--quick` run.

The committed record comes from the record's own command (README, "The record"), never from
`bash scripts/demo.sh`, which writes to workdirs/; this checks the plumbing in under a minute.
"""

import json
import pathlib
import shutil
import subprocess

import pytest

from experiments import recipe
from experiments.digits_demo import report, run


def test_demo_config_keeps_the_recipe_but_the_length():
  config = run.demo_config("sine_2d", 600, quick=False)
  assert (config.total_steps, config.schedule.warmup_steps, config.batch_size) == (600, 60, 64)
  assert config.model.posemb == "sine_2d" and config.task.label_smoothing == 0.1


def test_verdict_says_beats_trails_or_unresolved():
  by_seed = lambda *values: dict(enumerate(values))
  low, high = by_seed(0.90, 0.91, 0.92), by_seed(0.95, 0.96, 0.97)
  assert "`fourier` beats" in report.verdict({"fourier": high, "sine_2d": low})
  assert "`fourier` trails" in report.verdict({"fourier": low, "sine_2d": high})
  assert "unresolved (the interval holds 0" in report.verdict(
    {"fourier": low, "sine_2d": by_seed(0.89, 0.91, 0.93)}
  )


def _other_setting_run(encoding: str, seed: int) -> dict:
  curve = {"step": [6], "loss": [2.3]}
  return {"setting": "max ISA AVX2 (AVX-512 host, 2 cores)", "machine": {"cpu": "test CPU"},
          "encoding": encoding, "posemb": encoding, "seed": seed, "batch": 16, "steps": 6,
          "accuracy": 0.1 * (seed + 1), "curve": curve, "seconds": 1.0}  # fmt: skip


def test_quick_run_adds_its_setting_without_pooling(tmp_path, capsys):
  other = {f"avx2/6_steps/{e}/{s}": _other_setting_run(e, s) for e in ("sine_2d", "fourier")
           for s in (0, 1)}  # fmt: skip
  (tmp_path / "QUICK").write_text("")
  (tmp_path / "results.json").write_text(json.dumps(other))
  results = run.main(
    ["--quick", "--encodings=sine_2d,fourier,none", "--length", f"--out={tmp_path}"]
  )
  mine = {k: e for k, e in results.items() if k not in other and k != "provenance"}
  # --length: each encoding but the control at defaults, seeds 100-101, test curves every 2 steps
  length = {k: mine.pop(k) for k in list(mine) if k.startswith(recipe.LENGTH)}
  assert sorted((e["encoding"], e["seed"]) for e in length.values()) == [
    ("fourier", 100), ("fourier", 101), ("sine_2d", 100), ("sine_2d", 101)
  ]  # fmt: skip
  assert all([p[0] for p in e["test_curve"]] == [2, 4, 6] for e in length.values())
  assert "**The length rule**" in (tmp_path / "results.md").read_text()
  assert len(mine) == 6 and {e["steps"] for e in mine.values()} == {6}
  assert all(e == results[k] for k, e in other.items())  # the other setting's runs kept
  # Each seed is a trainer workdir, seed s as `python -m lfpe.main --config.seed=s` runs it.
  configs = sorted(tmp_path.glob("runs/*/6_steps/fourier/*/config.json"))
  assert [json.loads(p.read_text())["seed"] for p in configs] == [0, 1]
  md = (tmp_path / "results.md").read_text()
  # Seed s on two settings is not an independent run: settings are never pooled.
  assert "pooled" not in md.replace("not pooled", "") and md.count("`fourier` − `sine_2d`") == 2
  assert (tmp_path / "digits_demo.png").stat().st_size > 10_000
  claims = json.loads((tmp_path / "claims.json").read_text())
  assert [c["n"] for c in claims] == []  # no embed_1d here: nothing to claim
  capsys.readouterr()
  flags = ["--quick", "--encodings=sine_2d,fourier,none", f"--out={tmp_path}"]
  run.main([*flags, "--length", "--status"])
  assert "10 of 10 runs done" in capsys.readouterr().out
  again = run.main(flags)
  assert {k: e["accuracy"] for k, e in again.items() if k in mine} == {
    k: e["accuracy"] for k, e in mine.items()
  }  # read back, nothing retrained


def test_claims_pair_seeds_of_one_setting():
  accuracy = {
    "fourier": {0: 0.95, 1: 0.96, 2: 0.97},
    "embed_1d": {0: 0.90, 1: 0.92, 2: 0.91},
    "none": {0: 0.2, 1: 0.2, 2: 0.2},
  }
  claims = report.claims({"accuracy": accuracy, "tuned": {}, "sweep": {}})
  assert [(c["a"], c["b"], c["paired"], c["n"]) for c in claims] == [
    ("fourier", "embed_1d", True, 3),
    ("embed_1d", "none", True, 3),
  ]
  assert claims[0]["difference"] == pytest.approx(5.0)
  assert claims[0]["paper_value"] == 0.9 and claims[0]["ratio_to_paper"] == pytest.approx(5 / 0.9)


ROOT = pathlib.Path(__file__).resolve().parents[2]


def _git_status() -> str:
  return subprocess.run(
    ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
  ).stdout


@pytest.mark.cli
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


def _entry(encoding, posemb, seed, accuracy, setting="s"):
  return {"setting": setting, "encoding": encoding, "posemb": posemb, "seed": seed, "steps": 600,
          "accuracy": accuracy, "seconds": 1.0, "machine": {"cpu": "x"}}  # fmt: skip


def test_tuned_arms_are_the_runs_at_the_sweeps_choice_or_the_defaults_run():
  """The sweep picks γ = 1 for fourier (its tuned runs are the γ = 1 runs) and temperature
  10000 for sine_2d, its default (its tuned runs are its defaults runs)."""
  results = {}
  for seed in (0, 1):
    for value, acc in ((0.0625, 0.5), (0.25, 0.6), (1.0, 0.7)):
      results[f"sweep/s/600_steps/fourier/gamma={value:g}/{seed}"] = _entry(
        "fourier", f"fourier(gamma={value})", seed, acc
      )
    for value, acc in ((2500.0, 0.5), (10000.0, 0.9), (40000.0, 0.6)):
      results[f"sweep/s/600_steps/sine_2d/temperature={value:g}/{seed}"] = _entry(
        "sine_2d", f"sine_2d(temperature={value})", seed, acc
      )
    results[f"s/600_steps/fourier/{seed}"] = _entry("fourier", "fourier(gamma=0.25)", seed, 0.8)
    results[f"s/600_steps/fourier/gamma=1/{seed}"] = _entry(
      "fourier", "fourier(gamma=1.0)", seed, 0.85
    )
    results[f"s/600_steps/sine_2d/{seed}"] = _entry("sine_2d", "sine_2d", seed, 0.95)
  assert report.chosen(results) == {"s/600_steps/fourier": 1.0, "s/600_steps/sine_2d": 10000.0}
  group = report.groups(results)[(600, "s")]
  assert group["accuracy"] == {"fourier": {0: 0.8, 1: 0.8}, "sine_2d": {0: 0.95, 1: 0.95}}
  assert group["tuned"] == {"fourier": {0: 0.85, 1: 0.85}, "sine_2d": {0: 0.95, 1: 0.95}}
  assert set(group["sweep"]) == {"fourier", "sine_2d"}


@pytest.mark.slow
def test_quick_tuned_record_sweeps_every_encoding_with_a_knob(tmp_path):
  """`--tune`: each encoding's own knob swept on validation digits by one rule (`none`, with no
  knob, is not), each trained at its choice beside its defaults runs, and every claim read
  both ways (at defaults, and each tuned)."""
  results = run.main(
    ["--quick", "--tune", "--encodings=embed_1d,fourier,none", f"--out={tmp_path}"]
  )
  swept = {k.split("/")[3] + "/" + k.split("/")[4].split("=")[0] for k in results
           if k.startswith("sweep/")}  # fmt: skip
  assert swept == {"embed_1d/init_std", "fourier/gamma"}
  claims = json.loads((tmp_path / "claims.json").read_text())
  tuned = [c for c in claims if c["claim"].endswith("(each tuned)")]
  assert [(c["a"], c["b"]) for c in tuned] == [("fourier", "embed_1d")]
  assert "Learnable-Fourier+MLP, Embed-1D: its own knob over" in tuned[0]["tuned"]
  assert all(
    c["tuned"].startswith("none: every arm at its defaults") for c in claims if c not in tuned
  )
  assert "**Each encoding tuned**" in (tmp_path / "results.md").read_text()


def test_claims_pair_arms_on_the_seeds_both_ran():
  """Each arm lacks a different seed: the claim pairs seeds 0-2 (fourier 1.0, 1.1 and 1.2
  points ahead), not the lists by position (which would pair fourier's seed 4 with embed_1d's
  3)."""
  results = {}
  for seed in (0, 1, 2, 4):
    acc = 0.5 + 0.1 * seed
    results[f"s/600_steps/fourier/{seed}"] = _entry(
      "fourier", "fourier", seed, acc + 0.01 + 0.001 * seed
    )
  for seed in (0, 1, 2, 3):
    acc = 0.5 + 0.1 * seed
    results[f"s/600_steps/embed_1d/{seed}"] = _entry("embed_1d", "embed_1d", seed, acc)
  (claim,) = report.claims(report.groups(results)[(600, "s")])
  assert claim["paired"] and claim["n"] == 3
  assert claim["difference"] == pytest.approx(1.1)
  half = 0.1 * 4.302653 / 3**0.5  # t(0.975, 2) x sd / sqrt(n)
  assert claim["ci_high"] - claim["difference"] == pytest.approx(half)


def test_a_printed_claim_names_its_test_paired_or_welch():
  """The run printed "(paired, n=3)" for every claim, also one compared unpaired (Welch)."""
  paired = {"fourier": {0: 0.95, 1: 0.96, 2: 0.97}, "embed_1d": {0: 0.90, 1: 0.92, 2: 0.91}}
  (claim,) = report.claims({"accuracy": paired, "tuned": {}, "sweep": {}})
  line = report.claim_line(claim)
  assert "`fourier` − `embed_1d` +5.00 [" in line and line.endswith(
    f"(paired, n=3): {claim['verdict']}"
  )
  assert line.startswith(claim["claim"])
  apart = {"fourier": {0: 0.95, 1: 0.96, 2: 0.97}, "embed_1d": {3: 0.90, 4: 0.92}}
  (claim,) = report.claims({"accuracy": apart, "tuned": {}, "sweep": {}})
  assert "(Welch, n=3 and 2)" in report.claim_line(claim)


def test_a_claim_inside_a_tenth_of_the_control_gap_prints_so():
  """The best encoding (fourier, 96 %) beats no position by 86 points: fourier's +5 over
  embed_1d lies inside ±8.6 and prints so; the control's own claim does not."""
  accuracy = {
    "fourier": {0: 0.95, 1: 0.96, 2: 0.97},
    "embed_1d": {0: 0.90, 1: 0.92, 2: 0.91},
    "none": {0: 0.09, 1: 0.11, 2: 0.10},
  }
  ours, control = report.claims({"accuracy": accuracy, "tuned": {}, "sweep": {}})
  assert ours["inside_margin"] and ours["margin"] == pytest.approx(8.6)
  assert report.claim_line(ours).endswith(
    "(inside the about-equal margin ±8.6: a tenth of the control gap 86)"
  )
  assert not control["inside_margin"] and "margin" not in report.claim_line(control)


def test_where_one_more_run_lands_stays_within_an_accuracys_range():
  """Two runs far apart: the prediction interval is clipped to 0-100 % (-33.8 – 57.9 %)."""
  row = report.table({"fourier": {0: 0.05, 1: 0.2}}).splitlines()[-1]
  assert "| 0.0 – " in row and "-" not in row.split("|")[3]
  row = report.table({"fourier": {0: 0.8, 1: 0.99}}).splitlines()[-1]
  assert " – 100.0 % |" in row
