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
  ]
  (folder / "claims.json").write_text(json.dumps(entries))
  monkeypatch.setattr(summary, "ROOT", tmp_path)
  (row,) = summary.rows()
  assert row == {
    "experiment": "toy",
    "claims": 4,
    "reproduced": 2,
    "contradicted": 1,
    "unresolved": 1,
    "at_ceiling": 1,
    "holm": 1,
    "controls": "1 of 1",
  }


def test_fair_rows_count_by_tuning_and_list_changed_verdicts(tmp_path, monkeypatch):
  folder = tmp_path / "toy"
  folder.mkdir()
  entry = lambda tuned, verdict, a="fourier", paper="002": {
    "paper": paper,
    "item": "Table 1",
    "claim": f"{a} beats b ({tuned})",
    "a": a,
    "b": "b",
    "metric": "AP",
    "tuned": tuned,
    "verdict": verdict,
    "difference": 1.0,
    "ci_low": 0.5,
    "ci_high": 1.5,
  }
  some = "Learnable-Fourier+MLP: γ over 3 values x 2 seeds, best; Embed-2D at defaults"
  each = "Learnable-Fourier+MLP, Embed-2D: each one's knob over 3 values x 2 seeds, best"
  entries = [
    entry("none: every arm at its defaults", "unresolved"),
    entry(some, "reproduced"),
    entry(each, "unresolved"),  # the Fourier-only win does not survive a fair budget
    entry("none: every arm at its defaults", "contradicted", a="mlp"),
    entry(each, "contradicted", a="mlp"),  # unchanged: not listed
    entry("none: every arm at its defaults", "reproduced", paper="003"),  # not 002's
  ]
  (folder / "claims.json").write_text(json.dumps(entries))
  monkeypatch.setattr(summary, "ROOT", tmp_path)
  (row,), changes = summary.fair_rows()
  assert row == {
    "experiment": "toy",
    "defaults": (2, 0, 1),
    "some tuned": (1, 1, 0),
    "each tuned": (2, 0, 1),
  }
  assert changes == [
    "- toy: fourier beats b (" + each + "): reproduced (some tuned) → unresolved "
    "(each tuned; +1 [+0.5, +1.5])"
  ]
