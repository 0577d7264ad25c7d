"""`python -m experiments.detection.run --quick`: the whole detection pipeline, tiny sizes."""

import json
import shutil

import pytest
from sweep_checks import widened_keys

from experiments.detection import picture, report, run
from experiments.provenance import FIELDS
from experiments.stats import check_claim


@pytest.mark.slow
def test_quick_detection_experiment_chooses_a_rate_sweeps_gamma_then_runs_every_protocol(
  tmp_path, capsys, monkeypatch
):
  drawn = []  # predictions.png's scenes, by row
  real_draw = picture.draw
  monkeypatch.setattr(
    picture, "draw", lambda rows, path: drawn.append(rows) or real_draw(rows, path)
  )
  results = run.main(["--quick", f"--out={tmp_path}"])
  assert set(results.pop("provenance")) >= set(FIELDS)
  rated = sorted(k for k in results if k.startswith("recipe/"))
  lr = report.DEFAULT_LR  # two rates for Fourier under `all`: neither the config's, so that a
  # sweep or record run left at the config's rate fails the check below
  assert rated == [f"recipe/lr={r:g}/all/fourier/200" for r in (lr / 2, 2 * lr)]
  swept = [k for k in results if k.startswith("sweep/")]
  widened = lambda p: widened_keys(
    results, f"{p}/fourier", (0.5, 2.0), report.validation_ap, higher_is_better=True,
    knob=lambda g: f"gamma={g:g}",
  )  # fmt: skip
  assert sorted(swept) == sorted([*widened("all"), *widened("heldout")])
  tuned = [k for k in results if "=" in k and not k.startswith(("sweep/", "recipe/"))]
  assert sorted(k.split("/")[1] for k in tuned) == ["fourier", "fourier"]  # never the default
  expected = len(rated) + len(swept) + len(run.PROTOCOLS) * len(run.QUICK_ENCODINGS) + len(tuned)
  assert len(results) == expected
  for entry in json.loads((tmp_path / "claims.json").read_text()):
    check_claim(entry)
  chosen_lr = report.learning_rate(results)
  assert chosen_lr in (lr / 2, 2 * lr)
  for key, value in results.items():
    assert 0.0 <= value["eval"]["AP"] <= 1.0, key
    assert key in swept + rated or (value["by_size"] and value["curve"][-1][0] == 4), key
    pictured = key.split("/")[1] == run.PICTURED and key not in swept + rated
    kept = value.get("predictions", [])  # predictions.png's, kept as the run was scored
    assert len(kept) == (picture.COUNT if pictured else 0), key
    assert all(0 < len(p["scores"]) == len(p["boxes"]) <= picture.BOXES for p in kept), key
    assert all(p["scores"] == sorted(p["scores"], reverse=True) for p in kept), key
    if key not in rated:  # the sweep and the record train at the chosen rate
      assert value["lr"] == pytest.approx(chosen_lr), key
  tables = (tmp_path / "tables.md").read_text()
  assert "002 Table 1" in tables and "No position" in tables and "knob sweep" in tables
  assert "| mean over arms |" in tables and "gained over the last" in tables
  assert (tmp_path / "ap_by_size.png").stat().st_size > 0
  assert (tmp_path / "predictions.png").stat().st_size > 0
  capsys.readouterr()
  run.main(["--quick", f"--out={tmp_path}", "--status"])
  status = capsys.readouterr().out
  assert f"{expected} of {expected} runs done" in status
  assert "The rate choice so far" in status and "| **yes** |" in status  # the rule's table
  longer = tmp_path / "longer"  # a longer edition adopting this one's choices: only its
  run.main(["--quick", f"--out={longer}", "--steps=6", f"--choices-from={tmp_path}", "--status"])
  status = capsys.readouterr().out  # record runs are left to train
  adopted = len(rated) + len(swept)
  assert f"{adopted} rate-choice and sweep runs adopted from {tmp_path}" in status
  assert f"{adopted} of {expected} runs done" in status and not longer.exists()
  # predictions.png shows each protocol's tuned Fourier run (seed 0) as results.json keeps it
  pictured = {f"{key.split('/')[0]} (seed 0)": results[key]["predictions"] for key in tuned}
  scores = lambda rows: {
    row: [s["scores"].tolist() for s in scenes] for row, scenes in rows.items()
  }
  assert scores(drawn[-1]) == {row: [p["scores"] for p in kept] for row, kept in pictured.items()}
  for workdir in (tmp_path / "runs").glob("*/fourier/**/checkpoints"):
    shutil.rmtree(workdir)  # pruned: the picture is drawn again from results.json alone
  again = run.main(["--quick", f"--out={tmp_path}"])  # resumes: nothing is retrained
  assert len(drawn) == 2 and scores(drawn[1]) == scores(drawn[0])
  again.pop("provenance")
  # Compared as JSON text: AP at an absent size is NaN, and NaN != NaN.
  assert json.dumps(again, sort_keys=True) == json.dumps(results, sort_keys=True)
