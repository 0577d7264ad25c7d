"""`python -m experiments.generation.run --quick`: the whole generation pipeline, tiny sizes."""

import json
import shutil

import pytest
from sweep_checks import widened_keys

from experiments.generation import report, run
from experiments.provenance import FIELDS
from experiments.stats import check_claim


@pytest.mark.slow
def test_quick_generation_experiment_runs_every_encoding_and_the_control(tmp_path, capsys):
  results = run.main(["--quick", f"--out={tmp_path}"])
  assert set(results.pop("provenance")) >= set(FIELDS)
  swept = sorted(k for k in results if k.startswith("sweep/"))
  expected = [  # each encoding's own knob, two values around the config's, one widening
    *widened_keys(results, "lsh/fourier", (0.5, 2.0), report.validation_bpd, False,
                  knob=lambda g: f"gamma={g:g}"),
    *widened_keys(results, "lsh/sine_2d", (5000.0, 20000.0), report.validation_bpd, False,
                  knob=lambda g: f"temperature={g:g}"),
  ]  # fmt: skip
  assert swept == sorted(expected)
  for key in swept:
    assert 0.0 < results.pop(key)["final"] < 3.0, key
  tuned = sorted(k for k in results if "=" in k)  # the choice is never the default here
  assert [k.split("/")[1] for k in tuned] == ["fourier"] * 2 + ["sine_2d"] * 2
  assert len(results) == 2 * len(run.ENCODINGS) + len(tuned)  # 2 seeds, LSH attention
  entries = json.loads((tmp_path / "claims.json").read_text())
  for entry in entries:
    check_claim(entry)
  controls = [e for e in entries if e["item"] == "control"]
  assert len(controls) == 1 and controls[0]["b"] == "lsh/none"
  assert {e["item"] for e in entries} == {"control", "Fig. 3a", "Fig. 3b"}
  for key, value in results.items():
    assert 0.0 < value["final"] < 3.0, key  # below uniform over 8 grey levels
    assert [step for step, _ in value["curve"]] == [3, 6], key
  fourier = results["lsh/fourier/0"]
  assert fourier["zero_attention"] > fourier["final"]  # the model uses its attention
  assert 0.0 < fourier["strict"] < 3.0 and "strict" not in results["lsh/embed_2d/0"]
  tables = (tmp_path / "tables.md").read_text()
  assert "Learnable-Fourier+MLP ends lower than Embed-2D" in tables and "knob sweep" in tables
  assert any(e["claim"].endswith("as tuned]") for e in entries)
  assert "Is the LSH likelihood causal?" in tables
  for name in ("fig3a.png", "fig3b.png", "samples.png"):
    assert (tmp_path / name).stat().st_size > 0
  again = run.main(["--quick", f"--out={tmp_path}"])  # resumes: nothing is retrained
  again.pop("provenance")
  for key in swept:
    again.pop(key)
  assert json.dumps(again, sort_keys=True) == json.dumps(results, sort_keys=True)
  # Checkpoints pruned to save disk: the re-score names the run and skips it, and the samples
  # come from the next seed's model.
  shutil.rmtree(tmp_path / "runs" / "lsh" / "fourier" / "0" / "checkpoints")
  (tmp_path / "samples.png").unlink()
  saved = json.loads((tmp_path / "results.json").read_text())
  del saved["lsh/fourier/0"]["strict"]
  (tmp_path / "results.json").write_text(json.dumps(saved))
  pruned = run.main(["--quick", f"--out={tmp_path}"])
  assert "strict" not in pruned["lsh/fourier/0"] and "strict" in pruned["lsh/fourier/1"]
  assert "lsh/fourier/0: no checkpoint left" in capsys.readouterr().out
  assert (tmp_path / "samples.png").stat().st_size > 0
