"""The README's results summary is the table built from every committed claims.json."""

import json

from experiments import summary


def test_readme_block_is_built_from_the_claims():
  doc = summary.README.read_text()
  assert summary.START in doc and summary.END in doc
  assert summary.with_table(doc) == doc, "run `python -m experiments.summary --write`"


def test_rows_count_verdicts_and_controls(tmp_path, monkeypatch):
  folder = tmp_path / "toy"
  folder.mkdir()
  entries = [
    {"claim": "a beats b", "verdict": "reproduced", "holm_verdict": "unresolved"},
    {
      "claim": "position matters (the control)",
      "verdict": "reproduced",
      "holm_verdict": "reproduced",
    },
    {"claim": "c beats d", "verdict": "unresolved", "at_ceiling": True},
    {"claim": "e beats f", "verdict": "contradicted"},
    {"claim": "g like h", "verdict": "reproduced", "holm_verdict": "reproduced (not adjusted)"},
    # resolution's control: its item says so, its text does not
    {"item": "control", "claim": "the best arm beats `none`", "verdict": "unresolved"},
  ]
  (folder / "claims.json").write_text(json.dumps(entries))
  monkeypatch.setattr(summary, "ROOT", tmp_path)
  (row,) = summary.rows()
  assert row == {
    "experiment": "toy",
    "claims": 6,
    "reproduced": 3,
    "contradicted": 1,
    "unresolved": 2,
    "at_ceiling": 1,
    "holm": 2,  # an equivalence claim keeps its plain verdict: counted as it reads
    "before_settling": "not checked",  # no entry says whether its arms settled
    "inside_margin": "–",  # no directional claim sized against a control
    "controls": "1 of 2",
  }
  settled = [True, None, False, False, False, None]  # unresolved: not counted; None: not checked
  marked = [{**e, "settled": s} for e, s in zip(entries, settled, strict=True)]
  (folder / "claims.json").write_text(json.dumps(marked))
  (row,) = summary.rows()
  assert row["before_settling"] == 2  # resolved verdicts (either way) read before settling,
  # not the control, whose arm went unchecked (settled None)
  inside = [True, False, True, True, None, False]  # unresolved, or an equivalence: not counted
  sized = [
    e if i is None else {**e, "inside_margin": i} for e, i in zip(entries, inside, strict=True)
  ]
  (folder / "claims.json").write_text(json.dumps(sized))
  (row,) = summary.rows()
  assert row["inside_margin"] == 2  # "a beats b" and "e beats f": resolved, inside the margin


def test_fair_rows_count_by_tuning_and_list_changed_verdicts(tmp_path, monkeypatch):
  folder = tmp_path / "toy"
  folder.mkdir()
  entry = lambda tuned, verdict, a="fourier", paper="002", holm=None: {
    "paper": paper,
    "item": "Table 1",
    "claim": f"{a} beats b ({tuned})",
    "a": a,
    "b": "b",
    "metric": "AP",
    "tuned": tuned,
    "verdict": verdict,
    "holm_verdict": holm or verdict,
    "difference": 1.0,
    "ci_low": 0.5,
    "ci_high": 1.5,
  }
  some = "Learnable-Fourier+MLP: γ over 3 values x 2 seeds, best; Embed-2D at defaults"
  each = "Learnable-Fourier+MLP, Embed-2D: each one's knob over 3 values x 2 seeds, best"
  entries = [
    entry("none: every arm at its defaults", "unresolved"),
    entry(some, "reproduced", holm="unresolved"),  # not after Holm
    entry(each, "unresolved"),  # the Fourier-only win does not survive a fair budget
    entry("none: every arm at its defaults", "contradicted", a="mlp"),
    entry(each, "contradicted", a="mlp", holm="contradicted (not adjusted)"),  # unchanged
    entry("none: every arm at its defaults", "reproduced", paper="003"),  # not 002's
    {**entry("none: every arm at its defaults", "reproduced"), "item": "control"},  # a control
  ]
  (folder / "claims.json").write_text(json.dumps(entries))
  monkeypatch.setattr(summary, "ROOT", tmp_path)
  (row,), changes = summary.fair_rows()
  assert row == {
    "experiment": "toy",
    "defaults": (2, 0, 1, 0, 1),  # (tested, reproduced, contradicted, the two after Holm)
    "some tuned": (1, 1, 0, 0, 0),
    "each tuned": (2, 0, 1, 0, 1),
  }
  assert changes == [
    "- toy: fourier beats b (" + each + "): reproduced (some tuned) → unresolved "
    "(each tuned; +1.00 [+0.500, +1.50])"
  ]


def test_a_later_edition_replaces_the_record_and_pairs_its_readings_with_the_first(
  tmp_path, monkeypatch
):
  entry = lambda tuned, verdict: {
    "paper": "002",
    "item": "Fig. 3",
    "claim": "fourier beats b",
    "a": "fourier",
    "b": "b",
    "metric": "bits/dim",
    "tuned": tuned,
    "verdict": verdict,
    "holm_verdict": verdict,
    "difference": -1.0,
    "ci_low": -2.0,
    "ci_high": 0.5,
  }
  some = "Learnable-Fourier+MLP: γ over 3 values x 2 seeds, best; b at defaults"
  each = "Learnable-Fourier+MLP, b: each one's knob over 3 values x 2 seeds, best"
  editions = {
    "toy": [entry("none: every arm at its defaults", "contradicted"), entry(some, "reproduced")],
    "toy_v2": [entry("none: every arm at its defaults", "unresolved"), entry(each, "unresolved")],
  }
  for name, entries in editions.items():
    (tmp_path / name).mkdir()
    (tmp_path / name / "claims.json").write_text(json.dumps(entries))
  (tmp_path / "toy_v3").mkdir()  # under way: a live results.json, no claims.json yet
  (tmp_path / "toy_v3" / "results.json").write_text("{}")
  monkeypatch.setattr(summary, "ROOT", tmp_path)
  assert [r["experiment"] for r in summary.rows()] == ["toy_v2"]
  (row,), changes = summary.fair_rows()
  assert row == {
    "experiment": "toy, toy_v2",
    "defaults": (1, 0, 0, 0, 0),  # the second edition's reading replaces the first's
    "some tuned": (1, 1, 0, 1, 0),
    "each tuned": (1, 0, 0, 0, 0),
  }
  assert changes == [
    "- toy_v2: fourier beats b: reproduced (some tuned, toy) → unresolved (each tuned; -1.00 "
    "[-2.00, +0.500])"
  ]


def test_editions_are_named_numbered_and_finished_by_their_claims(tmp_path):
  from experiments import editions  # noqa: PLC0415

  assert editions.family("detection_v2") == "detection" == editions.family("detection")
  assert (editions.number("detection"), editions.number("generation_v12")) == (1, 12)
  for name in ("gen", "gen_v2", "gen_v10"):
    (tmp_path / name).mkdir()
    (tmp_path / name / "claims.json").write_text("[]")
  (tmp_path / "gen_v11").mkdir()  # not finished
  assert editions.finished(tmp_path) == {"gen": ["gen", "gen_v2", "gen_v10"]}
  assert editions.newest(tmp_path, "gen") == "gen_v10" == editions.newest(tmp_path, "gen_v2")
  assert editions.newest(tmp_path, "resolution") == "resolution"  # none finished: itself
