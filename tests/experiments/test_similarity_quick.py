"""`python -m experiments.similarity.run --quick`: the maps measured, claims, figure."""

import json

import numpy as np
import pytest

from experiments.provenance import FIELDS
from experiments.similarity import run
from experiments.stats import check_claim


def test_measure_by_construction():
  """The kernel itself: RMS 0 and isotropic; a map that favours the axes: anisotropy > 0."""
  kernel = run.gaussian_kernel()
  assert run.measure(kernel) == {"kernel_rms": 0.0, "anisotropy": 0.0}
  c = np.array(run.SHAPE) // 2
  axis_heavy = kernel.copy()
  for offset in run.AXIS:
    axis_heavy[tuple(c + offset)] += 0.05  # the centre holds 0.5
  assert run.measure(axis_heavy)["anisotropy"] == pytest.approx(0.1)
  assert all(np.hypot(*o) == 5 for o in run.AXIS + run.DIAGONAL) and len(set(run.DIAGONAL)) == 8


def test_quick_similarity_record(tmp_path):
  results = run.main(["--quick", f"--out={tmp_path}"])
  assert [len(results["fourier"][str(d)]) for d in run.DIMS] == [3, 3]
  assert set(results["provenance"]) >= set(FIELDS)
  claims = json.loads((tmp_path / "claims.json").read_text())
  for entry in claims:
    check_claim(entry)
  assert [c["item"] for c in claims] == ["Fig. 2b", "Fig. 2a-b"]
  assert (tmp_path / "fig2_similarity.png").stat().st_size > 10_000
