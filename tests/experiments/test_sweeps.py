"""The shared γ-sweep reader, rule and table (experiments/sweeps.py)."""

import dataclasses

import numpy as np
import pytest

from experiments import stats, sweeps


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


@pytest.mark.parametrize("higher", [True, False])
def test_a_diverged_value_never_wins(higher):
  by_arm = {"a": {0.25: [float("nan"), 1.0], 1.0: [0.5, 0.6], 4.0: [0.9, 0.9]}}
  assert sweeps.choose(by_arm, higher_is_better=higher) == {"a": 4.0 if higher else 1.0}


def test_table_marks_only_the_chosen_gamma_in_ascending_order():
  by_arm = {"x": {1.0: [0.5], 0.25: [0.4]}}
  lines = sweeps.table(
    by_arm, {"x": 0.25}, columns=("arm", "score"), name=str.upper, cell=lambda v: f"{v[0]:.1f}"
  )
  assert lines[0] == "| arm | γ | score | chosen |"
  assert lines[2:4] == ["| X | 0.25 | 0.4 (n = 1) | **yes** |", "| X | 1 | 0.5 (n = 1) |  |"]


@pytest.mark.parametrize(
  ("key", "seed"),
  [
    ("heldout/mlp/input_scale=0.0625/3", 3),
    ("all/none/0", 0),
    ("sweep/a/theta=1.0/1", None),
    ("recipe/lr=0.001/all/detr_sine/200", None),
    ("length/embed_1d/100", None),
    ("provenance", None),
  ],
)
def test_record_seed_reads_record_runs_alone(key, seed):
  assert sweeps.record_seed(key) == seed


def test_without_seeds_keeps_every_run_but_those_seeds_record_runs():
  results = {"provenance": {}, "sweep/a/gamma=1.0/1": {}, "a/0": {}, "a/1": {}, "b/1": {}}
  assert list(sweeps.without_seeds(results, [1])) == ["provenance", "sweep/a/gamma=1.0/1", "a/0"]


def test_tuned_note_names_the_budget_and_each_swept_arm_once():
  by_arm = {"a": {0.25: [1, 2], 1.0: [1, 2], 4.0: [1, 2]}, "b": {1.0: [1, 2], 4.0: [1, 2]}}
  note = sweeps.tuned_note(["A", "A"], [], by_arm, "the best mean", knob="its knob")
  assert note == "A: its knob over 2-3 values x 2 seeds, the best mean"  # one arm, two policies
  note = sweeps.tuned_note(["A"], ["none"], by_arm, "the best mean")
  assert note.endswith("; none at defaults")
  assert sweeps.tuned_note([], ["none"], by_arm, "the best mean") == stats.AT_DEFAULTS


def test_require_stops_a_record_whose_sweep_chose_nothing_for_an_arm():
  sweeps.require({"all": 1.0, "heldout": 4.0}, ["all", "heldout"])
  with pytest.raises(SystemExit, match=r"chose nothing for \['heldout'\]"):
    sweeps.require({"all": 1.0}, ["all", "heldout"])


def _widen(by_gamma, *, grid=(0.25, 1.0, 4.0), seeds=2, higher=True, limit=5):
  return sweeps.widen(
    {"a": grid}, {"a": by_gamma}, seeds=seeds, higher_is_better=higher, limits={"a": limit}
  )["a"]


def test_widen_adds_a_gamma_beyond_whichever_edge_leads():
  low_leads = {0.25: [0.9, 0.8], 1.0: [0.5, 0.5], 4.0: [0.1, 0.2]}
  assert _widen(low_leads) == (0.0625, 0.25, 1.0, 4.0)
  assert _widen(low_leads, higher=False) == (0.25, 1.0, 4.0, 16.0)  # lower is better
  assert _widen({0.25: [0.1, 0.1], 1.0: [0.5, 0.5], 4.0: [0.2, 0.2]}) == (0.25, 1.0, 4.0)


def test_widen_waits_for_every_seed_and_stops_at_its_limit():
  partial = {0.25: [0.9, 0.8], 1.0: [0.5], 4.0: [0.1, 0.2]}
  assert _widen(partial) == (0.25, 1.0, 4.0)  # seed 1 of γ = 1 not yet scored
  full = {0.25: [0.9, 0.8], 1.0: [0.5, 0.5], 4.0: [0.1, 0.2]}
  assert _widen(full, limit=3) == (0.25, 1.0, 4.0)


@dataclasses.dataclass
class _Run:
  key: str


def _make(grids):
  return [_Run(f"sweep/{arm}/gamma={g}/0") for arm, grid in grids.items() for g in grid]


def test_plan_widens_while_the_edge_leads_up_to_the_declared_number_of_widenings():
  base = {"x": (1.0, 4.0), "y": (1.0, 4.0)}
  ap = {0.015625: 0.3, 0.0625: 0.5, 0.25: 0.4, 1.0: 0.2, 4.0: 0.1}
  results = {f"sweep/x/gamma={g}/0": {"v": v} for g, v in ap.items()}
  results.update({"sweep/y/gamma=1.0/0": {"v": 0.1}, "sweep/y/gamma=4.0/0": {"v": 0.2}})
  plan = lambda widenings: {
    r.key
    for r in sweeps.plan(
      _make, base, results, lambda e: e["v"], seeds=1, higher_is_better=True, widenings=widenings
    )
  }
  # x: 1 leads {1, 4} -> add 0.25, which leads -> add 0.0625 (the limit: 2 widenings); y: 4
  # leads -> add 16, not yet trained, so y's grid waits there.
  assert plan(2) == {
    *(f"sweep/x/gamma={g}/0" for g in (0.0625, 0.25, 1.0, 4.0)),
    *(f"sweep/y/gamma={g}/0" for g in (1.0, 4.0, 16.0)),
  }
  assert plan(0) == {f"sweep/{a}/gamma={g}/0" for a in "xy" for g in (1.0, 4.0)}


def test_run_trains_each_widened_round_until_the_plan_is_finished():
  results, rounds = {}, []
  scores = {0.25: 0.9, 1.0: 0.5, 4.0: 0.1, 0.0625: 0.2}  # 0.25 leads, then is inside

  def train(planned):
    rounds.append(sorted(r.key for r in planned if r.key not in results))
    for r in planned:
      results.setdefault(r.key, {"v": scores[float(r.key.split("=")[1].split("/")[0])]})

  plan_now = lambda: sweeps.plan(
    _make, {"x": (0.25, 1.0, 4.0)}, results, lambda e: e["v"], seeds=1, higher_is_better=True
  )
  final = sweeps.run(plan_now, train, results)
  assert rounds == [
    [f"sweep/x/gamma={g}/0" for g in (0.25, 1.0, 4.0)],
    ["sweep/x/gamma=0.0625/0"],
  ]
  assert len(final) == 4 and sweeps.choose(
    sweeps.scores(results, lambda e: e["v"]), higher_is_better=True
  ) == {"x": 0.25}


def test_table_notes_how_far_the_choice_is_decided_and_an_edge():
  by_arm = {
    "x": {1.0: [0.5, 0.7], 4.0: [0.1, 0.3], 0.25: [0.0, 0.2]},
    "y": {1.0: [0.2], 2.0: [0.1]},
  }
  lines = sweeps.table(
    by_arm, {"x": 1.0, "y": 1.0}, columns=("a", "s"), name=str, cell=str, scale=100
  )
  x, y = lines[-2:]
  # 1 against 4 (the nearest mean): +40 points, Welch with n = 2 + 2, dof 2: 4.303 x 14.14 = 60.85.
  assert x == "- x: γ = 1 chosen; minus γ = 4 (the nearest mean): +40 ± 60.8 (Welch 95 %)."
  assert y.startswith("- y: γ = 1 chosen; minus γ = 2") and "(one seed: no interval)" in y
  assert "at the edge of the swept grid" in y and "edge" not in x


def test_table_never_names_a_diverged_value_the_runner_up():
  by_gamma = {1.0: [0.5, 0.6], 4.0: [float("nan"), 0.7], 16.0: [0.4, 0.45]}
  (_, line) = sweeps.table(
    {"x": by_gamma}, {"x": 1.0}, columns=("a", "s"), name=str, cell=str, scale=100
  )[-2:]
  assert "minus γ = 16 (the nearest mean)" in line and "nan" not in line
  assert "diverged (a non-finite score) at γ = 4" in line


@pytest.mark.parametrize(
  "spec, expected",
  [
    ("fourier", (0.25, 1.0, 4.0)),
    ("fourier(gamma=16.0)", (4.0, 16.0, 64.0)),
    ("mlp", (0.25, 1.0, 4.0)),
    ("sine_2d", (2500.0, 10000.0, 40000.0)),
    ("embed_2d(init_std=0.2)", (0.05, 0.2, 0.8)),
    ("rope_mixed", (2.5, 10.0, 40.0)),
    ("none", ()),
  ],
)
def test_every_arm_gets_the_same_grid_around_its_own_knob(spec, expected):
  np.testing.assert_allclose(sweeps.grid(spec), expected)


def test_a_knob_sweep_key_reads_back_by_arm_and_value():
  results = {
    sweeps.run_key("heldout/sine_2d", "sine_2d", value, seed): {"ap": value / 1e4 + seed}
    for value in (2500.0, 10000.0)
    for seed in (0, 1)
  }
  assert list(results)[0] == "sweep/heldout/sine_2d/temperature=2500/0"
  assert sweeps.scores(results, lambda e: e["ap"]) == {
    "heldout/sine_2d": {2500.0: [0.25, 1.25], 10000.0: [1.0, 2.0]}
  }


def test_arm_runs_carry_the_seed_of_their_key_in_seed_order_of_keys():
  results = {"all/mlp/10": {"eval": 1}, "all/mlp/2": {"eval": 2}, "all/mlp/3": {"seed": 7}}
  assert [r["seed"] for r in sweeps.arm_runs(results, "all/mlp")] == [10, 2, 7]


def test_unfitted_drops_the_record_seeds_a_sweep_begun_at_zero_trained():
  results = {
    "provenance": {},
    "sweep/a/theta=1.0/0": {},
    "sweep/a/theta=1.0/1": {},
    "recipe/lr=0.001/a/0": {},
    "length/a/0": {},
    "a/0": {},
    "a/1": {},
    "a/2": {},
    "a/theta=4.0/1": {},
    "a/theta=4.0/3": {},
    "all/a/2": {},
  }
  assert sweeps.shared_seeds(results) == 2
  kept = sweeps.unfitted(results, 2)
  assert set(results) - set(kept) == {"a/0", "a/1", "a/theta=4.0/1"}
  apart = {"sweep/a/theta=1.0/100": {}, "sweep/a/theta=1.0/101": {}, "a/0": {}}
  assert sweeps.shared_seeds(apart) == 0 and sweeps.shared_seeds({"a/0": {}}) == 0


def test_run_passes_a_finished_or_adopted_sweep_through_train_once():
  """A sweep already in `results` (a resumed record, or runs adopted from an earlier edition)
  still goes through `train` once, where `runs.execute` checks each run against its config
  (`runs.check_encodings`); a finished plan is not trained again."""
  results = {f"sweep/x/gamma={g}/0": {"v": 1.0 - g} for g in (0.25, 1.0, 4.0)}
  seen = []
  plan_now = lambda: sweeps.plan(
    _make, {"x": (0.25, 1.0, 4.0)}, results, lambda e: e["v"], seeds=1, higher_is_better=True
  )  # 0.25 leads: the grid widens to 0.0625, already in results too
  results["sweep/x/gamma=0.0625/0"] = {"v": 0.0}
  final = sweeps.run(plan_now, lambda planned: seen.append([r.key for r in planned]), results)
  assert seen == [[r.key for r in final]] and len(final) == 4
