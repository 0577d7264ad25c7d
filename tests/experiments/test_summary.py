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
