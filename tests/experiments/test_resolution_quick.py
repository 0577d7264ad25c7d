"""`python -m experiments.resolution.run --quick`: sweep, train, test at other sizes, report,
resume."""

import json

import pytest

from experiments import sweeps
from experiments.provenance import FIELDS
from experiments.resolution import plan, report, run
from experiments.stats import check_claim


@pytest.mark.slow
def test_quick_resolution_benchmark_runs_end_to_end(tmp_path, capsys):
  results = run.main(["--quick", f"--out={tmp_path}"])
  arms = {a.slug: a for a in plan.arms(quick=True)}
  swept = {k.split("/")[1] for k in results if k.startswith("sweep/")}
  assert swept == {"embed_1d", "rope_axial"}  # every arm with a knob; `none` has none
  assert all(len(grid) >= sweeps.VALUES for grid in report.sweep(results).values())
  record = {k: v for k, v in results.items() if k != "provenance" and not k.startswith("sweep/")}
  assert {k.split("/")[0] for k in record} == set(arms)
  for key, entry in record.items():
    arm = arms[key.split("/")[0]]
    assert set(entry["scores"]) == set(arm.policies)
    for policy, by_size in entry["scores"].items():
      sizes = {"64", "128"} if policy in plan.ENLARGING_ONLY else {"32", "64", "128"}
      assert set(by_size) == sizes and all(0 <= v <= 1 for v in by_size.values())
  assert set(results["provenance"]) >= set(FIELDS)
  for entry in json.loads((tmp_path / "claims.json").read_text()):
    check_claim(entry)
  board = (tmp_path / "leaderboard.md").read_text()
  assert "| none | extrapolate |" in board and "at its chosen knob" in board
  assert "The sweep" in board and "### Power" in board
  assert (tmp_path / "accuracy_vs_size.png").stat().st_size > 0

  capsys.readouterr()
  run.main(["--quick", f"--out={tmp_path}", "--status"])
  done = len(results) - 1  # but the provenance
  status = capsys.readouterr().out
  assert f"{done} of {done} runs done" in status
  assert "plans 2 seeds per arm" in status and "| seeds needed |" in status  # the power plan
  again = run.main(["--quick", f"--out={tmp_path}"])  # everything is read, nothing retrained
  assert json.dumps(again, sort_keys=True) == json.dumps(results, sort_keys=True)
