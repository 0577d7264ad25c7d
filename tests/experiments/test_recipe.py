"""The recipe rules: one learning rate for every arm, and the length check on every curve."""

import ml_collections
import pytest

from experiments import recipe, runs, sweeps


def _rate_results(aps: dict) -> dict:
  """Rate-run entries from {(rate, arm): [AP per seed]}."""
  return {
    recipe.run_key(rate, arm, seed): {"eval": {"AP": ap}}
    for (rate, arm), values in aps.items()
    for seed, ap in enumerate(values, start=200)
  }


def test_rates_halve_and_double_the_configs():
  assert recipe.rates(2e-3) == pytest.approx((1e-3, 2e-3, 4e-3))


def test_the_rate_rule_weighs_every_arm_the_same_whatever_its_seeds():
  results = _rate_results({
    (1e-3, "all/a"): [0.50], (1e-3, "all/b"): [0.10, 0.10, 0.10],
    (2e-3, "all/a"): [0.20], (2e-3, "all/b"): [0.30, 0.30, 0.30],
  })  # fmt: skip
  results["all/a/0"] = {"eval": {"AP": 0.9}}  # a record run is no rate run
  by_rate = recipe.scores(results, lambda e: e["eval"]["AP"])
  assert by_rate == {
    1e-3: {"all/a": [0.5], "all/b": [0.1] * 3},
    2e-3: {"all/a": [0.2], "all/b": [0.3] * 3},
  }
  # Per arm, then over arms: 0.30 against 0.25 (pooling the runs would give 0.20 vs 0.275).
  assert recipe.choose(by_rate, higher_is_better=True) == 1e-3
  assert recipe.choose(by_rate, higher_is_better=False) == 2e-3


def test_the_rate_is_the_one_the_run_recorded_not_its_keys_rounding():
  results = {recipe.run_key(1 / 3 * 1e-3, "all/a", 200): {"eval": {"AP": 0.5}, "lr": 1 / 3 * 1e-3}}
  assert list(recipe.scores(results, lambda e: e["eval"]["AP"])) == [1 / 3 * 1e-3]


def test_a_diverged_or_incomplete_rate_ranks_last_and_ties_go_to_the_smaller():
  diverged = {1e-3: {"x": [0.1]}, 4e-3: {"x": [float("nan")]}}
  assert recipe.choose(diverged, higher_is_better=True) == 1e-3
  partial = {1e-3: {"a": [0.2], "b": [0.3]}, 2e-3: {"a": [0.26]}}  # 2e-3 lacks arm b
  assert recipe.choose(partial, higher_is_better=True) == 1e-3
  tied = {1e-3: {"x": [0.0]}, 2e-3: {"x": [0.0]}, 4e-3: {"x": [0.0]}}
  assert recipe.choose(tied, higher_is_better=True) == 1e-3
  table = "\n".join(recipe.table(tied, 1e-3, name=str, cell=lambda v: f"{v[0]:.1f}"))
  assert "| 0.001 | 0.0 | 0.0 | **yes** |" in table


def test_the_rates_widen_once_past_a_winning_edge_after_every_base_rate_is_scored():
  make = lambda rates: [runs.Run(recipe.run_key(r, "all/a", 200), None, "") for r in rates]
  score = lambda e: e["eval"]["AP"]
  entry = lambda ap: {"eval": {"AP": ap}}
  base = (1e-3, 2e-3, 4e-3)
  plan = lambda results: [
    r.key.split("/")[1] for r in recipe.plan(make, base, results, score, higher_is_better=True)
  ]
  scored = lambda aps: {
    recipe.run_key(r, "all/a", 200): entry(ap) for r, ap in zip(base, aps, strict=True)
  }
  assert plan({}) == ["lr=0.001", "lr=0.002", "lr=0.004"]  # nothing scored: the base rates
  results = scored((0.1, 0.2, 0.3))
  assert plan(results) == ["lr=0.001", "lr=0.002", "lr=0.004", "lr=0.008"]  # 4e-3 leads
  results[recipe.run_key(8e-3, "all/a", 200)] = entry(0.4)  # leads again: no second widening
  assert plan(results) == ["lr=0.001", "lr=0.002", "lr=0.004", "lr=0.008"]
  assert plan(scored((0.1, 0.3, 0.2))) == ["lr=0.001", "lr=0.002", "lr=0.004"]  # inside
  assert plan(scored((0.3, 0.2, 0.1)))[0] == "lr=0.0005"


def test_gains_are_read_window_steps_before_the_end():
  curve = [[1000, 0.1], [2000, 0.4], [3000, 0.6], [4000, 0.65]]
  assert recipe.gains([curve], 1000) == pytest.approx([0.05])
  assert recipe.gains([curve], 2000) == pytest.approx([0.25])
  with pytest.raises(ValueError, match="no step 3500"):
    recipe.gains([curve], 500)


def test_the_length_rule_marks_an_arm_still_improving_in_the_metrics_better_direction():
  flat = [[[1000, 0.1], [2000, 0.4], [3000, 0.6], [4000, 0.62]]] * 2
  rising = [[[1000, 0.1], [2000, 0.2], [3000, 0.3], [4000, 0.4 + d]] for d in (0.0, 0.02)]
  rule = recipe.LengthRule(window=1000, tolerance=5.0, higher_is_better=True, scale=100)
  lines = rule.table({"flat": flat, "rising": rising}, name=str)
  assert lines[2] == "| flat | 2.0 ± 0.0 | 20.0 ± 0.0 | yes |"
  assert lines[3].startswith("| rising | 11.0 ± ") and lines[3].endswith("| **no** |")
  assert rule.check({"flat": flat, "rising": rising}) == {"flat": True, "rising": False}
  falling_loss = [[[250, 2.0], [500, 1.5], [750, 1.49]]]  # bits/dim: lower is better
  loss_rule = recipe.LengthRule(window=250, tolerance=0.01, higher_is_better=False)
  lines = loss_rule.table({"g": falling_loss}, name=str, digits=3)
  assert lines[2] == "| g | 0.010 | 0.500 | **no** |"  # a gain of 0.01 is not below 0.01
  assert loss_rule.check({"g": falling_loss}) == {"g": False}
  rising_loss = [[[250, 2.0], [500, 1.5], [750, 1.6]]]  # worse at the end: settled, not gaining
  assert loss_rule.check({"g": rising_loss}) == {"g": True}
  odd = {"q": [[[4, 0.0]]], "r": [None, flat[0]], "s": [[[500, 0.1], [1500, 0.2]]]}
  short = rule.table(odd, name=str)
  assert short[2] == "| q | – | – | n/a (evaluated at too few steps) |"
  assert short[3] == "| r | – | 20.0 | n/a (evaluated at too few steps) |"  # a run without one
  assert short[4] == "| s | 10.0 | – | **no** |"  # too short only for the window before
  assert rule.check(odd) == {"q": None, "r": None, "s": False}  # None: too short to read
  nan = [[[1000, 0.1], [2000, float("nan")]]]
  assert (
    rule.check({"nan": nan}) == {"nan": False} and "**no**" in rule.table({"nan": nan}, name=str)[2]
  )
  assert rule.check({}) is None  # no curves: no length was checked


def test_length_curves_read_tuned_runs_apart_only_where_they_are_other_runs():
  curve = lambda end: [[0, 0.0], [1, end]]
  runs = {
    ("a", "defaults"): [{"curve": curve(1.0)}], ("a", "tuned"): [{"curve": curve(2.0)}],
    ("b", "defaults"): [{"curve": curve(3.0)}], ("b", "tuned"): [{"curve": curve(3.0)}],
    ("c", "defaults"): [], ("c", "tuned"): [{"curve": curve(4.0)}],  # an older record's
    ("d", "defaults"): [{}], ("d", "tuned"): [{}],  # no curves kept: not checked
    ("e", "defaults"): [{"curve": curve(9.0)}], ("e", "tuned"): [{"seed": 0}],  # tuned: none
  }  # fmt: skip
  found = recipe.length_curves("abcde", lambda arm, at: runs[arm, at])
  assert found == {
    "a": [curve(1.0)], "a (tuned)": [curve(2.0)], "b": [curve(3.0)], "c": [curve(4.0)],
    "e": [curve(9.0)], "e (tuned)": [None],
  }  # fmt: skip
  checked = recipe.LengthRule(window=1, tolerance=5.0, higher_is_better=True).check(found)
  assert checked["e"] is False and checked["e (tuned)"] is None  # unchecked, not the defaults'
  assert checked["b (tuned)"] is True  # its tuned runs are its defaults runs: their verdict


def test_a_reading_takes_tuned_verdicts_only_where_read_tuned_and_checked():
  checked = {"a": True, "b": False, "a (tuned)": False, "b (tuned)": True}
  assert recipe.reading(checked, tuned=True) == ({"a": False, "b": True}, " (tuned)")
  assert recipe.reading(checked, tuned=False) == ({"a": True, "b": False}, "")
  defaults_only = {"a": True, "b": None}  # no tuned reading checked: the defaults' for both
  assert recipe.reading(defaults_only, tuned=True) == (defaults_only, "")


def test_length_runs_add_each_arms_choice_where_it_is_not_its_default(tmp_path):
  config = lambda arm, value, seed: ml_collections.ConfigDict(
    {"model": {"posemb": sweeps.at("fourier" if arm == "a" else "sine_2d", value)}, "seed": seed}
  )
  planned = runs.length_runs("ab", config, 50, str(tmp_path), {"a": 4.0, "b": None})
  assert [r.key for r in planned] == [
    "length/a/100", "length/a/gamma=4/100", "length/a/101", "length/a/gamma=4/101",
    "length/b/100", "length/b/101",
  ]  # fmt: skip
  assert {r.config.eval_every for r in planned} == {50}
  assert [r.key for r in runs.length_runs("b", config, 50, str(tmp_path))] == [
    "length/b/100", "length/b/101"
  ]  # fmt: skip


def test_recipe_runs_are_seed_major_and_keyed_by_rate(tmp_path):
  made = []
  make = lambda arm, rate, seed: made.append((arm, rate, seed)) or {"arm": arm}
  planned = runs.recipe_runs((1e-3, 2e-3), ("all/a", "all/b"), (200, 201), make, str(tmp_path))
  assert [r.key for r in planned[:4]] == [
    "recipe/lr=0.001/all/a/200", "recipe/lr=0.001/all/b/200",
    "recipe/lr=0.002/all/a/200", "recipe/lr=0.002/all/b/200",
  ]  # fmt: skip
  assert len(planned) == 8 and made[-1] == ("all/b", 2e-3, 201)
  assert planned[0].workdir == str(tmp_path / "runs" / "recipe/lr=0.001/all/a/200")
