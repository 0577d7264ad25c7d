"""The resolution benchmark's report (experiments/resolution/report.py): its leaderboard,
recipe check, power table and claims, on hand-made results (nothing trained)."""

import pytest

from experiments import stats
from experiments.resolution import plan, report


def _entry(arm: str, seed: int, scores: dict) -> dict:
  return {"arm": arm, "seed": seed, "scores": scores}


def test_power_table_reads_the_paired_sd_and_the_seeds_a_two_point_difference_needs():
  """Per-seed differences PI - extrapolate of 4, 8, 12 points: sd 4, so 2 points need
  `stats.seeds_needed(4, 2)` seeds; the table says so beside the current seeds."""
  results = {
    f"rope_axial/{seed}": {
      "arm": "rope_axial",
      "seed": seed,
      "scores": {"extrapolate": {"128": 0.5}, "pi": {"128": 0.5 + d}},
    }
    for seed, d in enumerate((0.04, 0.08, 0.12))
  }
  table = report.power_table(results)
  row = next(line for line in table.splitlines() if "position interpolation" in line)
  assert "| 128 px | 3 | 4.0 | " in row and row.endswith(f"| {stats.seeds_needed(4.0, 2.0)} |")


@pytest.mark.parametrize(
  ("accuracies", "verdict"), [((0.84, 0.86), "holds"), ((1.0, 0.99), "**does not hold**")]
)
def test_recipe_check_reads_the_best_arm_at_defaults_at_the_training_size(accuracies, verdict):
  """The length rule: the best arm at defaults (never the control) inside 80-90 % at 64 px."""
  results = {}
  for arm, policy, accs in (
    ("none", "extrapolate", (0.99, 0.99)),  # the control is not an arm of the rule
    ("sine_2d", "extrapolate", (0.5, 0.6)),
    ("rope_axial", "extrapolate", accuracies),
  ):
    for seed, acc in enumerate(accs):
      results[f"{arm}/{seed}"] = {"arm": arm, "seed": seed, "scores": {policy: {"64": acc}}}
  line = report.recipe_check(results)
  assert "the best is rope_axial at " in line and line.rstrip().endswith(f"{verdict}.")
  # a sweep that chose another θ: the tuned best is reported beside the rule (not judged)
  results |= {f"sweep/rope_axial/theta={t}/0": {"validation": v} for t, v in ((25.0, 0.9),
              (100.0, 0.5), (400.0, 0.4))}  # fmt: skip
  for seed in (0, 1):
    results[f"rope_axial/theta=25.0/{seed}"] = {
      "arm": "rope_axial", "seed": seed, "scores": {"extrapolate": {"64": 0.93}},
    }  # fmt: skip
  line = report.recipe_check(results)
  assert (
    f"seeds: {verdict}. Each arm tuned (among arms with two tuned seeds or more), the best is "
    "rope_axial at 93.0" in line
  )
  assert report.recipe_check({}) == ""


def test_claims_pair_arms_on_the_seeds_both_ran():
  """A record part-way: RoPE-Axial ran seeds 0, 1, 3 and the 2-D table 0, 1, 2; the claim at
  2x pairs seeds 0 and 1 (never seed 3 with seed 2)."""
  entry = lambda arm, seed, acc: {"arm": arm, "seed": seed, "scores": {"128": acc}}
  results = {}
  for seed, acc in ((0, 0.6), (1, 0.7), (3, 0.9)):
    results[f"rope_axial/{seed}"] = {**entry("rope_axial", seed, acc), "scores": {}}
    results[f"rope_axial/{seed}"]["scores"]["extrapolate"] = {"128": acc}
  for seed, acc in ((0, 0.5), (1, 0.55), (2, 0.1)):
    results[f"embed_1d/{seed}"] = {"arm": "embed_1d", "seed": seed, "scores": {}}
    results[f"embed_1d/{seed}"]["scores"]["bicubic_pytorch"] = {"128": acc}
  rows = report.cells(results, "defaults")
  claim = report.accuracy_claim(
    "x", "x", "a beats b", rows, ("rope_axial", "extrapolate"), ("embed_1d", "bicubic_pytorch"),
    "128", tuned=stats.AT_DEFAULTS,
  )  # fmt: skip
  assert claim["paired"] and claim["n"] == 2
  assert claim["difference"] == pytest.approx(100 * ((0.6 - 0.5) + (0.7 - 0.55)) / 2)


def test_the_control_claim_takes_the_best_arm_with_two_seeds():
  """A one-seed arm ahead at 64 px (a record part-way) does not take the control's place: the
  best arm with an interval is tested against `none`."""
  results = {}
  for arm, accs in (("none", (0.25, 0.26)), ("sine_2d", (0.8, 0.85)), ("rope_axial", (0.95,))):
    for seed, acc in enumerate(accs):
      results[f"{arm}/{seed}"] = {"arm": arm, "seed": seed, "scores": {"extrapolate": {"64": acc}}}
  control = [c for c in report.claims(results) if c["item"] == "control"]
  assert len(control) == 1 and control[0]["a"] == "sine_2d / extrapolate"
  assert control[0]["verdict"] == "reproduced"


def test_claims_need_two_seeds_both_arms_ran():
  """Two seeds each but one in common (a record part-way, seeds out of order): no claim, where
  `stats.seed_paired` would have compared them unpaired, over runs of different seeds."""
  results = {}
  for arm, policy, seeds in (
    ("rope_axial", "extrapolate", (0, 1)),
    ("embed_1d", "bicubic_pytorch", (1, 2)),
    ("none", "extrapolate", (0, 1)),
  ):
    for seed in seeds:
      scores = {policy: {"64": 0.3 + 0.1 * seed, "128": 0.5 + 0.1 * seed}}
      results[f"{arm}/{seed}"] = _entry(arm, seed, scores)
  texts = [c["claim"] for c in report.claims(results)]
  control = [c for c in report.claims(results) if c["item"] == "control"]
  assert control[0]["a"] == "rope_axial / extrapolate"  # embed_1d shares one seed with `none`
  assert not any("interpolated 2-D table" in t for t in texts), texts
  results["embed_1d/0"] = _entry("embed_1d", 0, {"bicubic_pytorch": {"128": 0.4}})
  texts = [c["claim"] for c in report.claims(results)]
  assert "RoPE-Axial extrapolated beats the interpolated 2-D table (APE, PyTorch bicubic) at 2x" \
    " (128 px)" in texts  # fmt: skip


def test_leaderboard_gives_each_rows_seeds_and_marks_sizes_a_mixed_arm_trained_at():
  results = {
    "rope_axial/0": _entry("rope_axial", 0, {"extrapolate": {"64": 0.9, "96": 0.8}}),
    "rope_axial/1": _entry("rope_axial", 1, {"extrapolate": {"64": 0.92, "96": 0.82}}),
    "rope_mixed-mixed-res/0": _entry(
      "rope_mixed mixed-res", 0, {"extrapolate": {"64": 0.9, "96": 0.9}}
    ),
  }
  board = report.leaderboard(results)
  assert "| rope_axial | extrapolate | 2 | " in board
  assert "| rope_mixed mixed-res | extrapolate | 1 | " in board
  unaligned = board[board.index("unaligned sizes") :]
  assert "| rope_mixed mixed-res | extrapolate | 1 | 90.0 (trained) |" in unaligned
  assert "| rope_axial | extrapolate | 2 | 81.0 ± 12.7 |" in unaligned
  assert board.rstrip().endswith(report.legend({"rope_axial", "rope_mixed mixed-res"}))
  assert "normalise" not in board  # neither arm is on normalised coordinates


def test_the_legend_names_the_shown_arms_on_normalised_coordinates_and_only_those():
  every = {a.name for a in plan.arms()}
  named = "`fourier unit`, `rope_axial dinov3`, `rope_axial dinov3-coords` normalise"
  assert named in report.legend(every) and "`-`: the policy does not apply" in report.legend(every)
  assert "; `fourier unit` normalise" in report.legend({"fourier unit", "fourier"})


def test_a_tuned_claims_note_gives_its_own_arms_budget():
  """Another arm's widened grid (here `sine_2d`'s 5 values) is not a claim's budget: RoPE-Axial
  against the 2-D table (3 values each) says 3."""
  results = {}
  for slug, values in (
    ("rope_axial", (6.25, 25.0, 100.0)),
    ("embed_1d", (0.005, 0.02, 0.08)),
    ("sine_2d", (625.0, 2500.0, 10000.0, 40000.0, 160000.0)),
  ):
    for value in values:
      for seed in (0, 1):
        best = value == values[0]
        results[f"sweep/{slug}/k={value}/{seed}"] = {"validation": 0.9 if best else 0.5}
  scores = {"extrapolate": {"64": 0.9, "128": 0.8}, "bicubic_pytorch": {"64": 0.8, "128": 0.7}}
  for slug, value in (("rope_axial", 6.25), ("embed_1d", 0.005), ("none", None)):
    for seed in (0, 1):
      key = f"{slug}/{seed}" if value is None else f"{slug}/k={value}/{seed}"
      arm = slug
      policy = "bicubic_pytorch" if slug == "embed_1d" else "extrapolate"
      results[key] = _entry(arm, seed, {policy: scores[policy]})
  claims = report.claims(results)
  [note] = {c["tuned"] for c in claims if "2-D table" in c["claim"] and "tuned" in c["claim"]}
  assert "over 3 values x 2 seeds" in note, note


def test_the_figure_rings_the_sizes_a_mixed_resolution_arm_trained_at():
  """48 and 96 px are training sizes of `rope_mixed mixed-res`, not unseen: open circles
  there, and on no other curve."""
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  from experiments.resolution import figure  # noqa: PLC0415

  scores = {str(s): {0: 0.8, 1: 0.9} for s in (48, 64, 96, 128)}
  rows = {("rope_mixed mixed-res", "pi"): scores, ("rope_axial", "pi"): scores}
  _, ax = plt.subplots()
  trained = {"rope_mixed mixed-res": {48, 96}, "rope_axial": set()}
  figure.draw_curves(
    ax, rows, ("rope",), solid=("pi",), train_size=64, ticks={64: "64"}, title="", xlabel="",
    trained=trained,
  )  # fmt: skip
  rings = [line for line in ax.lines if line.get_marker() == "o"]
  assert [list(line.get_xdata()) for line in rings] == [[48, 96]]
  plt.close("all")


def test_each_claims_margin_is_a_tenth_of_the_control_gap_at_its_own_size():
  """At 64 px the best arm beats `none` by 70 points, at 128 px by 20: a claim at 128 px is
  sized by the 20 (margin 2), so RoPE-Axial's +1.5 over the 2-D table lies inside it."""
  results = {}
  for arm, policy, at_64, at_128 in (
    ("none", "extrapolate", 0.25, 0.25),
    ("rope_axial", "extrapolate", 0.95, 0.45),
    ("embed_1d", "bicubic_pytorch", 0.90, 0.435),  # the full 2-D table (APE)
  ):
    for seed, jitter in enumerate((0.0, 0.001, 0.002)):
      scores = {policy: {"64": at_64 + jitter, "128": at_128 + jitter * (arm == "none")}}
      results[f"{arm}/{seed}"] = _entry(arm, seed, scores)
  rows = report.cells(results, "defaults")
  assert report.control_gap(rows, "64") == pytest.approx(0.70)
  assert report.control_gap(rows, "128") == pytest.approx(0.199)
  assert report.control_gap(rows, "192") is None  # the control never ran there
  (claim,) = [
    c for c in report.claims(results)
    if c["a"] == "rope_axial / extrapolate" and c["b"] == "embed_1d / bicubic_pytorch"
    and c["metric"].endswith("128 px (points)")
  ]  # fmt: skip
  assert claim["margin"] == pytest.approx(1.99) and claim["control_gap"] == pytest.approx(19.9)
  assert claim["verdict"] == "reproduced" and claim["inside_margin"]
