"""`python -m experiments.layout.run --quick`: the whole widget-captioning pipeline, tiny sizes."""

import json
import math
import shutil

import pytest

from experiments import recipe, sweeps
from experiments.layout import report, run
from experiments.provenance import FIELDS
from experiments.stats import check_claim
from lfpe import encodings

METRICS = ("BLEU-1", "BLEU-2", "ROUGE-L", "CIDEr", "CIDEr_seen", "CIDEr_unseen")


@pytest.mark.slow
def test_quick_layout_experiment_runs_every_table3_row(tmp_path):
  out = run.main(["--quick", "--tune", "--length", f"--out={tmp_path}"])
  runs = {k: v for k, v in out["runs"].items() if k != "provenance"}
  assert set(out["runs"]["provenance"]) >= set(FIELDS)
  for entry in json.loads((tmp_path / "claims.json").read_text()):
    check_claim(entry)
  defaults = {k: v for k, v in runs.items() if k.count("/") == 1}
  # --length: two rows' test curves at the record's recipe, evaluated every 2 of 4 steps
  length = {k: v for k, v in runs.items() if k.startswith(recipe.LENGTH)}
  assert {v["row"] for v in length.values()} == {report.BEST, "Sine-4D"}
  # and, both seeds, each row at its sweep's choice where that is not its default
  is_record = lambda k: sweeps.is_tuned_key(k) and not k.startswith(recipe.LENGTH)
  tuned = sorted(v["posemb"] for k, v in runs.items() if is_record(k))  # one seed
  tuned_length = sorted(v["posemb"] for k, v in length.items() if sweeps.is_tuned_key(k))
  assert tuned_length == sorted(tuned * 2) and len(length) == 4 + len(tuned_length)
  assert all([p[0] for p in v["curve"]] == [2, 4] for v in length.values())
  assert "## The length rule" in (tmp_path / "tables.md").read_text()
  assert sorted(r["row"] for r in defaults.values()) == sorted(run.ROWS)
  # --tune: the two quick rows' knobs swept on validation screens, each trained at its choice
  swept = {k.split("/")[1] for k in runs if k.startswith("sweep/")}
  assert swept == {"learnable-fourier-mlp-4-1", "sine-4d"}
  assert all(len(grid) >= 3 for grid in report.sweep(out["runs"]).values())
  for arm, value in report.chosen(out["runs"]).items():
    (tuned,) = sweeps.arm_runs(out["runs"], arm, value)
    assert encodings.knob(tuned["posemb"])[1] == pytest.approx(value)
  assert "Each row tuned" in (tmp_path / "tables.md").read_text()
  for key, value in defaults.items():  # (sweep runs score validation screens: none unseen)
    for metric in METRICS:
      assert math.isfinite(value["eval"][metric]), (key, metric)
  assert out["checks"]["embed_4d_held_out"]["passed"]
  assert out["checks"]["fourier_wr"]["max_change"] > 0  # W_r is trained
  assert len(out["checks"]["example"]["references"]) == 4
  tables = (tmp_path / "tables.md").read_text()
  assert "Table 3" in tables and "Table 4" in tables and "Learnable-Fourier+MLP-4/1" in tables
  assert "| No-position | 1 |" in tables  # the control row
  assert (tmp_path / "screen.png").stat().st_size > 0
  again = run.main(["--quick", "--tune", "--length", f"--out={tmp_path}"])  # nothing retrains
  # Compared as JSON text: a metric may be NaN, and NaN != NaN.
  assert json.dumps(again, sort_keys=True) == json.dumps(out, sort_keys=True)
  # A record kept without its workdirs (the first edition's, trained elsewhere): the checks'
  # seed-0 runs train again from their configs, and check the same.
  shutil.rmtree(tmp_path / "runs" / report.slug("Embed-4D") / "0")
  third = run.main(["--quick", "--tune", "--length", f"--out={tmp_path}"])
  assert third["checks"]["embed_4d_held_out"] == out["checks"]["embed_4d_held_out"]
  assert (tmp_path / "runs" / report.slug("Embed-4D") / "0" / "summary.json").exists()
