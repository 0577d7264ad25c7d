"""Every committed claims.json: each verdict is the one its interval gives, and the record
beside it says where it comes from (commit, command, machine, libraries, date)."""

import json
import pathlib
import shutil

import pytest

from experiments import editions, refresh, stats
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


CURRENT = sorted(EXPERIMENTS.glob("*/claims.json"))  # the records' own (not archived ones)


@pytest.mark.parametrize("path", CURRENT, ids=[p.parent.name for p in CURRENT])
def test_every_claim_says_its_source_tuning_and_family_adjusted_verdict(path):
  """Each claim of a current record says whether the paper states it or lfpe reads it from a
  table, how its arms were tuned, the paper's own a − b (null where it gives none) and the
  ratio to it, its Holm verdict within the record, recomputed here, and (an equivalence
  claim) a margin by the one rule."""
  entries = json.loads(path.read_text())
  for entry in entries:
    assert entry["source"] in stats.SOURCES and entry["tuned"], entry["claim"]
    stats.check_margin(entry)
    stats.check_paper_ratio(entry)
  assert [e["holm_verdict"] for e in entries] == stats.holm(entries)


@pytest.mark.parametrize("name", refresh.names())
def test_the_committed_reports_are_what_the_results_give(name, tmp_path):
  """`python -m experiments.refresh NAME` on a copy of the record rewrites nothing: its
  claims.json, tables and README are exactly what the current report code makes of its
  committed results (a report changed without its record, or a hand edit, fails here)."""
  out = tmp_path / name
  shutil.copytree(EXPERIMENTS / name, out, ignore=shutil.ignore_patterns("runs", "*.png"))
  refresh.RECORDS[editions.family(name)](out)
  for made in sorted(out.glob("*.md")) + [out / "claims.json"]:
    assert made.read_text() == (EXPERIMENTS / name / made.name).read_text(), made.name
