"""The shared γ-sweep reader, rule and table (experiments/sweeps.py)."""

import pytest

from experiments import sweeps


def test_scores_group_by_arm_and_gamma_and_skip_record_runs():
  results = {
    "sweep/lsh/fourier/gamma=0.25/1": {"v": 2.0},
    "sweep/lsh/fourier/gamma=0.25/0": {"v": 1.0},
    "sweep/heldout/gamma=1.0/0": {"v": 3.0},
    "lsh/fourier/0": {"v": 9.0},
  }
  by_arm = sweeps.scores(results, lambda entry: entry["v"])
  assert by_arm == {"heldout": {1.0: [3.0]}, "lsh/fourier": {0.25: [1.0, 2.0]}}


def test_rule_direction_and_ties_to_the_smaller_gamma():
  by_arm = {
    "a": {1.0: [0.5, 0.7], 0.25: [0.4, 0.6], 0.0625: [0.9]},
    "tie": {2.0: [1.0], 0.5: [1.0]},
  }
  assert sweeps.choose(by_arm, higher_is_better=True) == {"a": 0.0625, "tie": 0.5}
  assert sweeps.choose(by_arm, higher_is_better=False) == {"a": 0.25, "tie": 0.5}


def test_table_marks_only_the_chosen_gamma_in_ascending_order():
  by_arm = {"x": {1.0: [0.5], 0.25: [0.4]}}
  lines = sweeps.table(
    by_arm, {"x": 0.25}, columns=("arm", "score"), name=str.upper, cell=lambda v: f"{v[0]:.1f}"
  )
  assert lines[0] == "| arm | γ | score | chosen |"
  assert lines[2:] == ["| X | 0.25 | 0.4 (n = 1) | **yes** |", "| X | 1 | 0.5 (n = 1) |  |"]


def test_require_stops_a_record_whose_sweep_chose_nothing_for_an_arm():
  sweeps.require({"all": 1.0, "heldout": 4.0}, ["all", "heldout"])
  with pytest.raises(SystemExit, match=r"chose nothing for \['heldout'\]"):
    sweeps.require({"all": 1.0}, ["all", "heldout"])
