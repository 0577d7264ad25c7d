"""The whole position study in `--quick` mode: every part runs and writes its tables and figures.

This is CI's test of the pipeline (data builders -> vmapped seeds -> probes -> report);
the recorded numbers come from the full run (experiments/position_study/README.md).
"""

import json
import os
import pathlib

import numpy as np
import pytest

from experiments import provenance
from experiments.position_study import parts, plan, run
from experiments.provenance import FIELDS
from experiments.stats import check_claim
from lfpe.errors import ConfigError


@pytest.mark.slow  # 2-6 min: every part of the study at tiny sizes
def test_quick_study_runs_every_part(tmp_path):
  out, data_dir = str(tmp_path / "out"), str(tmp_path / "tfds")
  results = run.main(["--quick", f"--out={out}", f"--data_dir={data_dir}"])

  with open(os.path.join(out, "results.json")) as f:
    assert json.load(f)["timing"].keys() >= set(run.RUNNERS)
  seeds = plan.QUICK.seeds
  tables = results["tables"]
  assert len(tables) == len(plan.table_configs(plan.QUICK))
  for key, entry in tables.items():
    assert len(entry["test"]) == seeds, key
    low = -np.inf if key.startswith("distance") else 0.0
    assert all(low <= v <= 1.0 for v in entry["test"]), key
  # Probes and maps exist where the plan says, with one value per seed.
  probed = tables["direction/embed_1d"]["probes"]["after"]["left_right"]
  assert set(probed) == {"positions", "pairs"} and len(probed["positions"]) == seeds
  assert np.asarray(tables["color_shift/embed_1d"]["maps"]["before"]).shape == (8, 8)
  # A smooth Fourier table is solved by every probe at any stage (003 Table 2's pattern).
  pre = results["pretrain"]["probes"]["after"]
  assert min(pre["left_right"]["positions"]) > 0.95
  assert set(results["speed"]) == {"vmap", "loop"}
  assert (
    results["gabor_refit"]["embed_1d"]["params"] > results["gabor_refit"]["gabor_edge"]["params"]
  )

  markdown = open(os.path.join(out, "tables.md")).read()
  for title in (
    "Table 1",
    "Table 2",
    "Table 3",
    "Table 4",
    "004 Table 8",
    "000 Table 1",
    "000 Table 5",
    "Fig. 11",
    "Runtime per part",
  ):
    assert title in markdown, title
  for name in (
    "fig3_learning_curves.png",
    "fig5_similarity_color_shift.png",
    "fig11_concat_channels.png",
  ):
    assert os.path.getsize(os.path.join(out, name)) > 1000, name
  for entry in json.load(open(os.path.join(out, "claims.json"))):
    check_claim(entry)
  assert set(results["provenance"]) >= set(FIELDS) and results["mode"] == "quick"
  # Every configuration's own provenance, in results.json and in its workdir.
  trained = {str(p.parent) for p in pathlib.Path(out, "runs").glob("**/summary.json")}
  workdir = parts.Study(plan.QUICK, out, data_dir).workdir
  stamped = {workdir(key): stamp for key, stamp in results["run_provenance"].items()}
  assert set(stamped) == trained and trained
  for path, stamp in stamped.items():
    assert {"commit", "command", "date"} <= set(stamp) and "read_back" not in stamp, path
    assert json.loads(pathlib.Path(path, provenance.RUN_STAMP).read_text()) == stamp, path

  # --status reads the record without training; a re-run trains nothing new.
  counts = run.status(results, plan.QUICK, list(run.RUNNERS))
  assert all(done == planned for done, planned in counts.values()), counts
  again = run.main(["--quick", f"--out={out}", f"--data_dir={data_dir}"])
  assert again["tables"] == tables
  with pytest.raises(ConfigError, match="--quick study"):  # one line, exit 2 (experiments.cli)
    run.main([f"--out={out}", f"--data_dir={data_dir}", "--parts=speed"])
