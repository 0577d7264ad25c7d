"""The intervals every experiment reports (experiments/stats.py)."""

import numpy as np
import pytest
from scipy import stats

from experiments import stats as stats_lib
from experiments.stats import AT_DEFAULTS, difference, fmt, interval


def test_intervals_are_student_t_over_seeds():
  mean, half = interval([0.90, 0.92, 0.94], scale=100)
  assert mean == pytest.approx(92.0)
  assert half == pytest.approx(stats.t.ppf(0.975, 2) * 2.0 / np.sqrt(3))
  _, one_run = interval([0.90, 0.92, 0.94], scale=100, one_run=True)  # where a 4th run lands
  assert one_run == pytest.approx(stats.t.ppf(0.975, 2) * 2.0 * np.sqrt(4 / 3))
  assert np.isnan(interval([0.5])[1])


def test_difference_is_welch():
  a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0, 8.0])
  mean, half = difference(a, b)
  va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 4
  dof = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
  assert mean == pytest.approx(-3.0)
  assert half == pytest.approx(stats.t.ppf(0.975, dof) * np.sqrt(va + vb))
  assert fmt([1.0, 2.0, 3.0], digits=2).startswith("2.00 ± ")


def test_verdict_needs_the_interval_to_exclude_zero_on_the_papers_side():
  from experiments.stats import verdict  # noqa: PLC0415

  assert verdict(0.5, 2.0) == "reproduced" and verdict(-2.0, -0.5) == "contradicted"
  assert verdict(-2.0, -0.5, direction=-1) == "reproduced"
  assert verdict(-0.1, 2.0) == "unresolved" and verdict(float("nan"), 1.0) == "unresolved"


def test_claim_paired_and_welch():
  from experiments.stats import check_claim, claim  # noqa: PLC0415

  a, b = [0.95, 0.96, 0.94, 0.97], [0.90, 0.92, 0.91, 0.91]
  paired = claim(
    paper="002",
    item="x",
    text="a beats b",
    metric="acc",
    a="a",
    b="b",
    a_values=a,
    b_values=b,
    paired=True,
    scale=100,
    tuned=AT_DEFAULTS,
    paper_value=2.0,
  )
  d = 100 * (np.asarray(a) - np.asarray(b))
  half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
  assert paired["difference"] == pytest.approx(d.mean())
  assert paired["ci_low"] == pytest.approx(d.mean() - half) and paired["n"] == 4
  assert paired["verdict"] == "reproduced"
  # The smallest true difference found 80 % of the time: k * SE, where a t test on 3 dof has
  # power 0.8 at noncentrality k (scipy's noncentral t), above the shortcut t_.975 + t_.8.
  se = d.std(ddof=1) / 2
  k = paired["minimum_detectable"] / se
  t = stats.t.ppf(0.975, 3)
  assert stats.nct.sf(t, 3, k) + stats.nct.cdf(-t, 3, k) == pytest.approx(0.8, abs=1e-9)
  assert k > stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)
  assert paired["ratio_to_paper"] == pytest.approx(d.mean() / 2.0)
  assert paired["p_value"] == pytest.approx(2 * stats.t.sf(d.mean() / se, 3))
  welch = claim(
    paper="002", item="x", text="b beats a", metric="acc", a="b", b="a", a_values=b, b_values=a,
    tuned=AT_DEFAULTS,
  )  # fmt: skip
  assert welch["verdict"] == "contradicted" and welch["n"] == [4, 4] and not welch["paired"]
  check_claim(paired)
  with pytest.raises(ValueError, match="gives 'reproduced'"):
    check_claim({**paired, "verdict": "unresolved"})
  assert welch["paper_value"] is None and welch["ratio_to_paper"] is None  # said, as null
  stats_lib.check_paper_ratio(paired)
  stats_lib.check_paper_ratio(welch)
  with pytest.raises(ValueError, match="difference / paper_value"):
    stats_lib.check_paper_ratio({**paired, "ratio_to_paper": 1.0})
  with pytest.raises(ValueError, match="lacks paper_value"):
    stats_lib.check_paper_ratio({k: v for k, v in welch.items() if k != "paper_value"})


def test_equivalence_claims_need_the_interval_inside_the_margin():
  from experiments.stats import check_claim, check_margin, claim, verdict  # noqa: PLC0415

  assert verdict(-0.1, 0.2, direction=0, margin=0.5) == "reproduced"
  assert verdict(-0.1, 0.6, direction=0, margin=0.5) == "unresolved"
  assert verdict(0.1, 0.6, direction=0, margin=0.5) == "unresolved"  # may or may not exceed it
  assert verdict(0.6, 0.9, direction=0, margin=0.5) == "contradicted"  # known to exceed it
  assert verdict(-0.9, -0.6, direction=0, margin=0.5) == "contradicted"
  assert verdict(0.1, 0.2, direction=0, margin=0.5) == "reproduced"  # excludes 0, too small
  assert verdict(-0.1, 0.2, direction=0) == "unresolved"  # no margin: nothing shown
  assert verdict(0.1, 0.2, direction=0) == "contradicted"  # no margin: any difference
  entry = claim(
    paper="002",
    item="Fig. 3a",
    text="a ~ b",
    metric="bpd",
    a="a",
    b="b",
    a_values=[1.0, 1.1, 1.2],
    b_values=[1.0, 1.1, 1.21],
    direction=0,
    control_gap=-5.0,  # a tenth of |gap|: the margin is 0.5 whichever side none is on
    paired=True,
    tuned=AT_DEFAULTS,
  )
  assert entry["verdict"] == "reproduced" and entry["margin"] == 0.5
  assert entry["control_gap"] == 5.0
  check_claim(entry)
  check_margin(entry)
  with pytest.raises(ValueError, match="a margin is"):
    check_margin({**entry, "margin": 0.02})  # a hand-picked margin is refused
  common = dict(paper="002", item="-", text="t", metric="m", a="a", b="b", tuned=AT_DEFAULTS)
  with pytest.raises(ValueError, match="control_gap"):
    claim(**common, a_values=[1, 2], b_values=[1, 2], direction=0)


def test_a_directional_claim_inside_the_control_margin_is_marked_inside_it():
  """Given its record's control gap, a directional claim carries the equivalence margin and
  says whether its whole interval lies inside it; the verdict still reads the interval alone."""
  from experiments.stats import check_claim, check_margin, claim  # noqa: PLC0415

  common = dict(paper="002", item="-", text="t", metric="m", a="a", b="b", tuned=AT_DEFAULTS)
  a = [1.30, 1.42, 1.51, 1.60]
  small = claim(**common, a_values=a, b_values=[x - 0.3 for x in a], paired=True, control_gap=-5)
  assert small["verdict"] == "reproduced" and small["inside_margin"] is True  # +0.3 inside ±0.5
  assert small["margin"] == 0.5 and small["control_gap"] == 5.0
  large = claim(**common, a_values=a, b_values=[x - 0.7 for x in a], paired=True, control_gap=5)
  assert large["verdict"] == "reproduced" and large["inside_margin"] is False  # +0.7 beyond it
  wide = claim(**common, a_values=[1, 2, 3], b_values=[1.5, 1.5, 1.5], paired=True, control_gap=5)
  assert wide["verdict"] == "unresolved" and wide["inside_margin"] is False  # may exceed ±0.5
  near = claim(**common, a_values=a, b_values=[x + 0.1 for x in a], paired=True, control_gap=5)
  assert near["verdict"] == "contradicted" and near["inside_margin"] is True  # against, but tiny
  assert "inside_margin" not in claim(**common, a_values=a, b_values=[x - 0.3 for x in a])
  for entry in (small, large, wide, near):
    check_claim(entry)
    check_margin(entry)
  with pytest.raises(ValueError, match="inside_margin is False"):
    check_margin({**small, "inside_margin": False})
  with pytest.raises(ValueError, match="a margin is"):
    check_margin({**large, "margin": 1.0})


def test_holm_adjusts_directional_claims_step_down_and_leaves_equivalence_alone():
  from experiments.stats import holm  # noqa: PLC0415

  entry = lambda p, verdict, direction=1: {"p_value": p, "verdict": verdict, "direction": direction}
  entries = [
    entry(0.001, "reproduced"),  # 0.001 <= 0.05 / 4: rejected
    entry(0.015, "contradicted"),  # 0.015 <= 0.05 / 3: rejected, keeps its side
    entry(0.03, "reproduced"),  # 0.03 > 0.05 / 2: stops here
    entry(0.01, "reproduced", direction=0),  # equivalence: not in the family's steps
    entry(0.2, "unresolved"),
  ]
  assert holm(entries) == [
    "reproduced",
    "contradicted",
    "unresolved",
    "reproduced (not adjusted)",
    "unresolved",
  ]


def test_welch_without_spread_has_the_pooled_dof_and_a_p_like_the_paired_path():
  from experiments.stats import claim, holm  # noqa: PLC0415

  kw = dict(paper="x", item="x", text="a beats b", metric="acc", a="a", b="b", tuned=AT_DEFAULTS)
  welch = claim(a_values=[1.0, 1.0, 1.0], b_values=[0.5, 0.5, 0.5], **kw)
  paired = claim(a_values=[1.0, 1.0, 1.0], b_values=[0.5, 0.5, 0.5], paired=True, **kw)
  assert welch["dof"] == 4 and welch["p_value"] == paired["p_value"] == 0.0
  assert welch["verdict"] == "reproduced" and holm([welch]) == ["reproduced"]


def test_a_failing_arm_at_the_ceiling_is_contradicted_unadjusted_and_checked():
  from experiments.stats import check_claim, claim, holm  # noqa: PLC0415

  kw = dict(paper="003", item="x", text="b fails", metric="acc", a="a", b="b", scale=100,
            ceiling=100.0, tuned=AT_DEFAULTS, b_fails=True)  # fmt: skip
  top = claim(a_values=[1.0, 1.0, 1.0], b_values=[1.0, 0.999, 1.0], **kw)
  assert top["failing_arm_at_ceiling"] and top["verdict"] == "contradicted"
  check_claim(top)
  with pytest.raises(ValueError, match="gives 'contradicted'"):
    check_claim({**top, "verdict": "unresolved"})
  assert holm([top]) == ["contradicted (not adjusted)"]
  low = claim(a_values=[1.0, 1.0, 1.0], b_values=[0.5, 0.6, 0.55], **kw)
  assert not low["failing_arm_at_ceiling"] and low["verdict"] == "reproduced"
  assert holm([low]) == ["reproduced"]
  with pytest.raises(ValueError, match="b_fails needs the metric's ceiling"):
    claim(a_values=[1.0], b_values=[1.0], **{**kw, "ceiling": None})


def test_seeds_needed_is_the_first_n_whose_test_has_the_power():
  from experiments.stats import power, seeds_needed  # noqa: PLC0415

  n = seeds_needed(paired_sd=3.0, difference=2.0)
  power_at = lambda k: power(2.0 * np.sqrt(k) / 3.0, k - 1)
  assert power_at(n) >= 0.8 > power_at(n - 1)
  # the normal approximation (z_0.975 + z_0.8)² sd² / d² = 17.7 is a lower bound
  assert 18 <= n <= 22
  # where the shortcut (t_0.975 + t_0.8)·sd/√n said 3 seeds (sd 1, difference 3.115), the
  # test has power 0.770 at 3: 4 are needed
  assert seeds_needed(paired_sd=1.0, difference=3.115) == 4
  assert seeds_needed(paired_sd=0.0, difference=1.0) == 2
  with pytest.raises(ValueError, match="the task must change"):
    seeds_needed(paired_sd=30.0, difference=0.1, most=50)


@pytest.mark.parametrize("dof, noncentrality", [(2, 3.0), (4, 2.5), (9.3, 2.9), (542, 2.8)])
def test_power_is_the_noncentral_t_tests(dof, noncentrality):
  from experiments.stats import power  # noqa: PLC0415

  t = stats.t.ppf(0.975, dof)
  expected = stats.nct.sf(t, dof, noncentrality) + stats.nct.cdf(-t, dof, noncentrality)
  assert power(noncentrality, dof) == pytest.approx(expected, abs=1e-9)
  assert power(0.0, dof) == pytest.approx(0.05, abs=1e-9)  # no difference: the test's level


def test_power_at_one_dof_matches_a_simulation():
  """1 dof (two seeds), where scipy's noncentral t gives NaN at large noncentrality: the
  exact multiplier for 80 % is 16.33 (the shortcut's 14.08 has power 0.73)."""
  from experiments.stats import minimum_detectable, power  # noqa: PLC0415

  rng = np.random.default_rng(0)
  z, v = rng.normal(size=400_000), rng.chisquare(1, size=400_000)
  simulated = np.mean(np.abs((z + 16.33) / np.sqrt(v)) > stats.t.ppf(0.975, 1))
  assert power(16.33, 1) == pytest.approx(simulated, abs=0.003)
  assert minimum_detectable(stats.t.ppf(0.975, 1), 1) == pytest.approx(16.334, abs=1e-3)
  assert power(14.08, 1) == pytest.approx(0.731, abs=1e-3)


def test_seed_paired_pairs_common_seeds_else_every_run_unpaired():
  from experiments.stats import seed_paired  # noqa: PLC0415

  assert seed_paired({0: 1.0, 1: 2.0, 3: 5.0}, {2: 9.0, 1: 4.0, 0: 3.0}) == (
    [1.0, 2.0],
    [3.0, 4.0],
    True,
  )
  assert seed_paired({0: 1.0, 5: 2.0}, {0: 3.0, 1: 4.0}) == ([1.0, 2.0], [3.0, 4.0], False)


def test_holm_counts_a_test_repeated_on_the_same_runs_once():
  from experiments.stats import holm  # noqa: PLC0415

  def entry(p, a, text=""):
    numbers = dict(difference=1.0, ci_low=0.5, ci_high=1.5, n=5, metric="m", b="ref")
    return {"p_value": p, "verdict": "reproduced", "direction": 1, "a": a, "claim": text, **numbers}

  # Three distinct tests: 0.03 > 0.05 / 2 after the first, so only the smallest p survives.
  three = [entry(0.001, "x"), entry(0.03, "y"), entry(0.03, "z")]
  assert holm(three) == ["reproduced", "unresolved", "unresolved"]
  # The same two rows of "y" (its defaults and its each-tuned reading, same runs): m is 2, so
  # 0.03 <= 0.05 / 1 after the first rejection, and both rows of the one test are rejected.
  repeated = [entry(0.001, "x"), entry(0.03, "y", "at defaults"), entry(0.03, "y", "each tuned")]
  assert holm(repeated) == ["reproduced", "reproduced", "reproduced"]


def test_a_paired_claims_sd_is_read_back_from_its_interval():
  """`paired_sd` inverts the claim's interval: the sd of the per-seed differences itself."""
  a, b = [0.80, 0.91, 0.77, 0.86], [0.75, 0.80, 0.78, 0.79]
  entry = stats_lib.claim(
    paper="002", item="t", text="a above b", metric="m", a="a", b="b", a_values=a,
    b_values=b, paired=True, tuned=AT_DEFAULTS,
  )  # fmt: skip
  assert stats_lib.paired_sd(entry) == pytest.approx(np.std(np.subtract(a, b), ddof=1))


def test_the_power_table_targets_a_tenth_of_each_metrics_control_gap():
  """Per control row, the paired directional claims on its metric, each with the seeds that
  find a tenth of the control gap; equivalence, unpaired and control-less claims are left out."""
  from experiments import claims  # noqa: PLC0415

  base = dict(paper="002", a="a", b="b", tuned=AT_DEFAULTS, paired=True)
  a, b = [1.0, 1.3, 0.9, 1.2], [0.9, 1.0, 1.0, 0.95]
  control = stats_lib.claim(
    item="control", text="position", metric="m", a_values=[9.0, 9.5, 8.8, 9.2],
    b_values=[1.0, 1.1, 0.9, 1.0], **base,
  )  # fmt: skip
  directional = stats_lib.claim(
    item="t", text="a above b", metric="m", a_values=a, b_values=b, **base
  )
  elsewhere = stats_lib.claim(item="t", text="on m2", metric="m2", a_values=a, b_values=b, **base)
  equal = stats_lib.claim(
    item="t", text="a like b", metric="m", a_values=a, b_values=b, direction=0, control_gap=5.0,
    **base,
  )  # fmt: skip
  welch = stats_lib.claim(
    item="t", text="unpaired", metric="m", a_values=a, b_values=b, **{**base, "paired": False}
  )
  second = {**control, "difference": 1.0}  # another reading's control on m: the first rules
  text = claims.power_markdown([control, directional, elsewhere, equal, welch, second])
  assert text.count("On m:") == 1
  target = stats_lib.equivalence_margin(control["difference"])
  assert f"On m: seeds for a true difference of {target:.3g}" in text
  [row] = [line for line in text.splitlines() if line.startswith("| a ") or "| on m2" in line]
  sd = np.std(np.subtract(a, b), ddof=1)
  assert row.split(" | ")[:5] == ["| a above b", "4", f"{sd:.3g}",
                                  f"{directional['minimum_detectable']:.3g}",
                                  str(stats_lib.seeds_needed(sd, target))]  # fmt: skip
  assert claims.power_markdown([directional, equal]) == ""  # no control: no target
  assert stats_lib.seeds_text(0.0, 1.0) == "2" and stats_lib.seeds_text(30.0, 0.01) == "> 1000"


def test_signed_interval_keeps_three_significant_figures_and_trailing_zeros():
  assert stats_lib.signed_interval(-1.0, -1.72, -0.285) == "-1.00 [-1.72, -0.285]"
  assert stats_lib.signed_interval(100.0, 0.44, -56.83) == "+100 [+0.440, -56.8]"
