"""Every committed claims.json: each verdict is the one its interval gives, and the record
beside it says where it comes from (commit, command, machine, libraries, date)."""

import json
import pathlib

import pytest

from experiments.provenance import FIELDS
from experiments.stats import check_claim

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[2] / "experiments"
CLAIMS = sorted(EXPERIMENTS.glob("**/claims.json"))  # archived records' too
IDS = [str(p.parent.relative_to(EXPERIMENTS)) for p in CLAIMS]


@pytest.mark.parametrize("path", CLAIMS, ids=IDS)
def test_every_verdict_follows_its_interval(path):
  entries = json.loads(path.read_text())
  assert entries, f"{path} holds no claim"
  for entry in entries:
    check_claim(entry)


@pytest.mark.parametrize("path", CLAIMS, ids=IDS)
def test_the_record_beside_the_claims_has_provenance(path):
  results = json.loads((path.parent / "results.json").read_text())
  records = results["settings"].values() if "settings" in results else [results]
  for record in records:
    assert set(FIELDS) <= set(record.get("provenance", {})), f"{path.parent}: no provenance"
