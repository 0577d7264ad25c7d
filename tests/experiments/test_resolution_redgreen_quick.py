"""`python -m experiments.resolution_redgreen.run --quick`: train, test at sizes, report, resume."""

import json

import pytest

from experiments.provenance import FIELDS
from experiments.resolution_redgreen import plan, run
from experiments.stats import check_claim


@pytest.mark.slow
def test_quick_resolution_benchmark_runs_end_to_end(tmp_path, capsys):
  results = run.main(["--quick", f"--out={tmp_path}"])
  arms = plan.arms(quick=True)
  assert len(results["runs"]) == 2 * len(arms)  # 2 seeds, one task
  for entry in results["runs"].values():
    arm = next(a for a in arms if a.name == entry["arm"])
    assert set(entry["scores"]) == set(arm.policies)
    for by_size in entry["scores"].values():
      assert set(by_size) == {"16", "32", "64"} and all(0 <= v <= 1 for v in by_size.values())
  assert set(results["provenance"]) >= set(FIELDS)
  for entry in json.loads((tmp_path / "claims.json").read_text()):
    check_claim(entry)
  assert "| none | extrapolate |" in (tmp_path / "leaderboard.md").read_text()
  assert (tmp_path / "accuracy_vs_size.png").stat().st_size > 0

  capsys.readouterr()
  run.main(["--quick", f"--out={tmp_path}", "--status"])
  assert f"{len(results['runs'])} of {len(results['runs'])} runs done" in capsys.readouterr().out
  again = run.main(["--quick", f"--out={tmp_path}"])  # everything is read, nothing retrained
  assert again["runs"] == results["runs"]
