"""docs/which_encoding.md: built from the committed records, and its reading says only what the
intervals and the tuning support."""

from experiments import which_encoding
from experiments.resolution import plan


def test_the_page_is_what_the_committed_records_give(tmp_path):
  which_encoding.write(tmp_path / "page.md", tmp_path / "plot.png")
  assert (tmp_path / "page.md").read_text() == which_encoding.PAGE.read_text(), (
    "run `python -m experiments.which_encoding`"
  )
  assert (tmp_path / "plot.png").stat().st_size > 10_000


def _row(arm, low, high, tuned=False, reference_tuned=False, inside=False):
  tuning = {
    (False, False): "defaults",
    (True, True): "both tuned",
    (True, False): "tuned (reference at defaults)",
    (False, True): "defaults (reference tuned)",
  }[(tuned, reference_tuned)]
  return {"arm": arm, "key": arm, "difference": (low + high) / 2, "low": low, "high": high,
          "n": 5, "tuned": tuned, "tuning": tuning, "fair": tuned == reference_tuned,
          "inside_margin": inside}  # fmt: skip


def test_a_tuned_arm_ahead_of_an_untuned_reference_is_never_recommended():
  family = which_encoding.FAMILIES[1]  # detection, reference DETR's Sine-2D
  rows = [_row("A", 1.0, 3.0, tuned=True), _row("B", 0.5, 2.0), _row("C", -3.0, -1.0),
          _row("D", -1.0, 1.0), _row("E", -4.0, -2.0, tuned=True)]  # fmt: skip
  reading = which_encoding.recommendation(family, rows)
  assert reading.startswith("at defaults, B resolved better than Sine-2D (DETR)")
  assert "C resolved worse" in reading and "D resolved" not in reading and "D," not in reading
  assert "A ahead only with its knob tuned" in reading and "no recommendation" in reading
  assert "E resolved worse even with its knob tuned" in reading
  both = which_encoding.recommendation(family, [_row("F", 0.5, 1.5, True, True)])
  assert "each tuned, F resolved better than Sine-2D (DETR)" in both


def test_in_short_lists_each_familys_resolved_arms_per_equal_budget_and_names_any_winner():
  detection, heldout = which_encoding.FAMILIES[1], which_encoding.FAMILIES[2]
  rows = [_row("A", 1.0, 3.0, tuned=True), _row("B", 0.01, 2.0), _row("C", -3.0, -1.0),
          _row("D", 0.01, 2.0), _row("E", 1.0, 2.0, True, True)]  # fmt: skip
  lines = which_encoding.in_short([(detection, rows), (heldout, [_row("C", -3.0, -1.0)])])
  table = [line for line in lines if line.startswith("| detection")]
  assert table[0].endswith("| Sine-2D (DETR) | none | C | E | none |")  # A: not an equal budget
  assert table[1].endswith("| none | C | – | – |")  # nothing tuned
  assert lines[-3] == (
    "Resolved better than the family's reference, at an equal budget: in "
    f"{detection.name}, against Sine-2D (DETR): each tuned, E. In the other families, none."
  )
  both = which_encoding.in_short([(detection, rows), (heldout, [_row("C", 1.0, 2.0)])])
  assert both[-3].endswith(f"E. Then in {heldout.name}, against Sine-2D (DETR): at defaults, C.")
  assert lines[-1].startswith("Of the 3 effects between two encodings resolved here")  # C, C, E
  assert "), 0 lie wholly inside" in lines[-1]
  control = [_row("C", -3.0, -1.0, inside=True), _row("none", -60.0, -50.0)]
  assert "Of the 1 effects" in which_encoding.in_short([(heldout, control)])[-1]
  assert "), 1 lie wholly inside" in which_encoding.in_short([(heldout, control)])[-1]
  quiet = which_encoding.in_short([(heldout, [_row("C", -3.0, -1.0)])])
  assert quiet[-3].startswith("In none of the 1 families is any encoding resolved better")


def test_a_reading_resolves_only_what_survives_holm_over_its_budget():
  """Three rows at defaults: one clear effect, two whose intervals barely exclude 0 (p just
  under 0.05 each, above Holm's 0.05/2 once the clear one is out)."""
  family = which_encoding.FAMILIES[1]
  rows = [_row("A", 5.0, 6.0), _row("B", 0.01, 2.0), _row("C", -2.0, -0.01)]
  reading = which_encoding.recommendation(family, rows)
  assert reading.startswith("at defaults, A resolved better than Sine-2D (DETR)"), reading
  assert "resolved worse" not in reading and "B, C apart from" in reading, reading
  assert "not after Holm's adjustment over the 3 rows at defaults" in reading, reading
  alone = which_encoding.recommendation(family, [_row("B", 0.01, 2.0)])
  assert alone.startswith("at defaults, B resolved better"), alone  # m = 1: Holm is the test


def test_effects_pair_seeds_and_sign_lower_is_better_metrics():
  family = which_encoding.Family(
    "toy", "generation", "bpd", "ref", lambda r: {"ref": {0: 1.0, 1: 1.2, 2: 1.1},
    "x": {0: 0.9, 1: 1.0, 2: 1.0, 3: 0.1}}, sign=-1, label=str
  )  # fmt: skip
  (row,) = which_encoding.effects(family)
  assert row["arm"] == "x" and row["n"] == 3  # seed 3 has no reference: not paired
  assert abs(row["difference"] - (0.1 + 0.2 + 0.1) / 3) < 1e-12  # lower bpd: positive


def test_layout_reads_record_runs_at_defaults_and_as_tuned_never_the_sweep():
  """A layout sweep run (validation CIDEr, seed 0) must not stand in for a defaults run; a
  tuned run is read only as tuned."""
  family = next(f for f in which_encoding.FAMILIES if f.record == "layout")
  entry = lambda seed, cider, posemb: {"row": "MLP", "seed": seed, "eval": {"CIDEr": cider},
                                       "posemb": posemb}  # fmt: skip
  results = {
    "mlp/0": entry(0, 10.0, "mlp"),
    "mlp/1": entry(1, 11.0, "mlp"),
    "sweep/mlp/input_scale=4/0": {**entry(0, 99.0, "mlp(input_scale=4.0)"), "validation": True},
    "sweep/mlp/input_scale=1/0": {**entry(0, 50.0, "mlp"), "validation": True},
    "mlp/input_scale=4/0": entry(0, 20.0, "mlp(input_scale=4.0)"),
    "mlp/input_scale=4/1": entry(1, 21.0, "mlp(input_scale=4.0)"),
  }
  assert family.scores(results) == {"MLP": {0: 10.0, 1: 11.0}}
  assert family.tuned_scores(results) == {"MLP": {0: 20.0, 1: 21.0}}
  assert family.swept(results) == {"MLP"}


def test_resolution_reads_every_policy_of_each_arm_at_twice_the_training_size():
  family = next(f for f in which_encoding.FAMILIES if f.record == "resolution")
  scores = lambda policy, acc: {policy: {"64": 0.99, "128": acc}, "pi": {"128": 0.0}}
  results = {
    "rope_mixed/0": {"seed": 0, "scores": scores("extrapolate", 0.7)},
    "rope_mixed/1": {"seed": 1, "scores": scores("extrapolate", 0.8)},
    "embed_1d/0": {"seed": 0, "scores": {"bicubic_pytorch": {"128": 0.5}, "bilinear": {}}},
    "sweep/rope_mixed/theta=40/0": {"validation": 0.9, "posemb": "rope_mixed(theta=40.0)"},
    "sweep/rope_mixed/theta=10/0": {"validation": 0.8, "posemb": "rope_mixed"},
    "rope_mixed/theta=40/0": {"seed": 0, "scores": scores("extrapolate", 0.9)},
  }
  assert family.scores(results) == {
    "rope_mixed / extrapolate": {0: 0.7, 1: 0.8},
    "rope_mixed / pi": {0: 0.0, 1: 0.0},  # a policy's row, even at zero accuracy
    "embed_1d / bicubic_pytorch": {0: 0.5},  # bilinear has no 128 px score: no row
  }
  assert family.tuned_scores(results)["rope_mixed / extrapolate"] == {0: 0.9}
  assert family.swept(results) == {"rope_mixed / extrapolate", "rope_mixed / pi"}
  sine = plan.by_slug()["sine_2d"]  # the reference names a real arm and its first policy
  assert family.reference == f"{sine.name} / {next(iter(sine.policies))}"


def test_a_family_reads_its_newest_finished_edition(tmp_path, monkeypatch):
  import json  # noqa: PLC0415

  scores = lambda r: r["scores"]
  family = which_encoding.Family("toy", "toy", "points", "ref", scores, label=str)
  for name, gain, finished in (("toy", 1.0, True), ("toy_v2", 5.0, True), ("toy_v3", 9.0, False)):
    (tmp_path / name).mkdir()
    arms = {"ref": {0: 0.0, 1: 0.0}, "x": {0: gain, 1: gain + 0.5}}
    (tmp_path / name / "results.json").write_text(json.dumps({"scores": arms}))
    if finished:
      (tmp_path / name / "claims.json").write_text("[]")
  monkeypatch.setattr(which_encoding, "ROOT", tmp_path)
  monkeypatch.setattr(which_encoding, "FAMILIES", (family,))
  monkeypatch.setattr(which_encoding, "plot", lambda results, figure: None)
  which_encoding.write(tmp_path / "page.md", tmp_path / "plot.png")
  page = (tmp_path / "page.md").read_text()
  assert "[experiments/toy_v2](../experiments/toy/README.md)" in page  # v3 is under way
  assert "+5.25" in page and "+9.25" not in page and "+1.25" not in page


def test_a_row_on_an_arm_that_failed_its_length_rule_is_marked_on_the_page(tmp_path, monkeypatch):
  import json  # noqa: PLC0415

  scores = lambda r: r["scores"]
  (tmp_path / "toy").mkdir()
  arms = {"ref": {0: 0.0, 1: 0.1}, "x": {0: 1.0, 1: 1.5}, "y": {0: 2.0, 1: 2.2}}
  (tmp_path / "toy" / "results.json").write_text(json.dumps({"scores": arms}))
  (tmp_path / "toy" / "claims.json").write_text("[]")
  monkeypatch.setattr(which_encoding, "ROOT", tmp_path)
  monkeypatch.setattr(which_encoding, "plot", lambda results, figure: None)
  for late, marked in (({"x"}, ["x"]), ({"ref"}, ["x", "y"]), (set(), [])):
    family = which_encoding.Family(
      "toy", "toy", "points", "ref", scores, label=str, unsettled=lambda r, t, late=late: late
    )
    monkeypatch.setattr(which_encoding, "FAMILIES", (family,))
    which_encoding.write(tmp_path / "page.md", tmp_path / "plot.png")
    page = (tmp_path / "page.md").read_text()
    assert sorted(a for a in "xy" if f"| {a} † |" in page) == marked
    assert ("† An arm of this row had not settled" in page) == bool(marked)


def test_detection_families_read_their_own_protocols_unsettled_arms(monkeypatch):
  from experiments.detection import report  # noqa: PLC0415

  checked = {"heldout/fourier": False, "all/mlp": False, "all/fourier": None, "all/none": True}
  monkeypatch.setattr(report, "length_check", lambda results: checked)
  everywhere, heldout = which_encoding.FAMILIES[1], which_encoding.FAMILIES[2]
  assert everywhere.unsettled({}, False) == {"mlp"} and heldout.unsettled({}, False) == {"fourier"}
  assert heldout.unsettled({}, True) == {"fourier"}  # no tuned readings checked: the defaults'
  checked.update({"heldout/fourier (tuned)": True, "all/mlp (tuned)": False})
  assert heldout.unsettled({}, True) == set() and everywhere.unsettled({}, True) == {"mlp"}
  assert heldout.unsettled({}, False) == {"fourier"}
  monkeypatch.setattr(report, "length_check", lambda results: None)  # no curves: nothing checked
  assert heldout.unsettled({}, False) == heldout.unsettled({}, True) == set()


def test_a_tuned_row_takes_its_tuned_readings_length_verdict(tmp_path, monkeypatch):
  import json  # noqa: PLC0415

  (tmp_path / "toy").mkdir()
  arms = {"ref": {0: 0.0, 1: 0.1}, "x": {0: 1.0, 1: 1.5}}
  tuned = {**arms, "x": {0: 2.0, 1: 2.5}}
  (tmp_path / "toy" / "results.json").write_text(json.dumps({"d": arms, "t": tuned}))
  monkeypatch.setattr(which_encoding, "ROOT", tmp_path)
  family = which_encoding.Family(
    "toy", "toy", "points", "ref", lambda r: r["d"], label=str, tuned_scores=lambda r: r["t"],
    swept=lambda r: {"x"}, unsettled=lambda r, tuned: {"x"} if tuned else set(),
  )  # fmt: skip
  rows = {r["tuning"]: r["settled"] for r in which_encoding.effects(family)}
  assert rows == {"defaults": True, "tuned (reference at defaults)": False}


def test_a_row_inside_a_tenth_of_the_control_gap_is_marked_with_its_margin(tmp_path, monkeypatch):
  """The best arm (y, mean 20.5) beats the control (none, 0.5) by 20: the margin is ±2; x's
  effect on ref, +1.2 [+0.56, +1.84] from seeds (+1, +1.1, +1.5), lies inside it, y's does not.
  Lower-is-better metrics flip the sign first, so the gap is never negative."""
  import json  # noqa: PLC0415

  scores = lambda r: r["scores"]
  (tmp_path / "toy").mkdir()
  arms = {
    "ref": {0: 10.0, 1: 10.0, 2: 10.0},
    "x": {0: 11.0, 1: 11.1, 2: 11.5},
    "y": {0: 20.0, 1: 20.5, 2: 21.0},
    "none": {0: 0.0, 1: 0.5, 2: 1.0},
  }
  (tmp_path / "toy" / "results.json").write_text(json.dumps({"scores": arms}))
  (tmp_path / "toy" / "claims.json").write_text("[]")
  monkeypatch.setattr(which_encoding, "ROOT", tmp_path)
  family = which_encoding.Family("toy", "toy", "points", "ref", scores, label=str)
  rows = {r["arm"]: r for r in which_encoding.effects(family)}
  assert rows["x"]["margin"] == 2.0 and rows["x"]["inside_margin"]
  assert not rows["y"]["inside_margin"] and not rows["none"]["inside_margin"]
  monkeypatch.setattr(which_encoding, "FAMILIES", (family,))
  monkeypatch.setattr(which_encoding, "plot", lambda results, figure: None)
  which_encoding.write(tmp_path / "page.md", tmp_path / "plot.png")
  page = (tmp_path / "page.md").read_text()
  assert "| x ≈ |" in page and "| y |" in page
  assert "≈ The row's whole interval lies inside ±2, a tenth of the control gap 20" in page
  flipped = which_encoding.Family("toy", "toy", "bpd", "ref", scores, sign=-1, label=str)
  assert which_encoding.margin(flipped, {"a": {0: 1.0}, "none": {0: 3.0}}) == 0.2
  no_control = which_encoding.Family("toy", "toy", "points", "ref", scores, label=str, control="-")
  assert all(r["margin"] is None for r in which_encoding.effects(no_control))
