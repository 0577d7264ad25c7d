"""The layout record's report on made-up results: the control claim and the control's rows."""

from experiments.layout import report


def _run(row, seed, cider, bleu1=50.0):
  scores = {"BLEU-1": bleu1, "BLEU-2": 40.0, "ROUGE-L": 45.0, "CIDEr": cider}
  scores.update(CIDEr_seen=cider + 5, CIDEr_unseen=cider - 5, count=100, count_unseen=40)
  return {"row": row, "seed": seed, "eval": scores}


def test_control_claim_pits_the_best_row_against_no_position():
  ciders = {"Embed-4D": (80, 84, 82), "Sine-4D": (90, 91, 92), "No-position": (20, 22, 21)}
  results = {f"{r}/{s}": _run(r, s, c) for r, cs in ciders.items() for s, c in enumerate(cs)}
  claims = report.claims(results)
  assert claims[0]["item"] == "control" and "control" in claims[0]["claim"]
  assert (claims[0]["a"], claims[0]["b"], claims[0]["paper"]) == ("Sine-4D", "No-position", "lfpe")
  assert claims[0]["verdict"] == "reproduced" and claims[0]["difference"] == 70.0
  assert claims[0]["paired"] and claims[0]["n"] == 3
  table3 = "\n".join(report.table3(results))
  assert "| No-position | 3 | 50.0 ± 0.0 (–) |" in table3
  assert "| No-position | 3 |" in "\n".join(report.table4(results))


def test_fixed_fourier_findings_compare_the_right_rows():
  """002 Sec. 4.4: Fixed-Fourier+MLP-2/2 best of the fixed group (on CIDEr), and learnable
  Fourier features above the fixed ones at each grouping (on BLEU-1; same seeds: paired)."""
  ciders = {
    "Fixed-Fourier+MLP-1/4": (80, 81, 82),
    "Fixed-Fourier+MLP-2/2": (90, 92, 91),
    "Fixed-Fourier+MLP-4/1": (85, 85, 86),
    "Learnable-Fourier+MLP-1/4": (80, 81, 82),  # equal to fixed: unresolved
    "Learnable-Fourier+MLP-2/2": (95, 96, 96),
    "Learnable-Fourier+MLP-4/1": (80, 79, 81),  # below fixed: contradicted
  }
  results = {
    f"{r}/{s}": _run(r, s, c, bleu1=c / 2) for r, cs in ciders.items() for s, c in enumerate(cs)
  }
  found = {(c["a"], c["b"]): c for c in report.claims(results)}
  assert {found[(f"Learnable-Fourier+MLP-{g}", f"Fixed-Fourier+MLP-{g}")]["metric"]
          for g in ("1/4", "2/2", "4/1")} == {"BLEU-1"}  # fmt: skip
  assert found[("Fixed-Fourier+MLP-2/2", "Fixed-Fourier+MLP-1/4")]["paper_value"] == 4.8  # 002
  fixed = "Fixed-Fourier+MLP-2/2"
  assert found[(fixed, "Fixed-Fourier+MLP-4/1")]["verdict"] == "reproduced"
  assert found[(fixed, "Fixed-Fourier+MLP-1/4")]["difference"] == 10.0
  verdicts = {
    g: found[(f"Learnable-Fourier+MLP-{g}", f"Fixed-Fourier+MLP-{g}")]
    for g in ("1/4", "2/2", "4/1")
  }
  assert {g: c["verdict"] for g, c in verdicts.items()} == {
    "1/4": "unresolved",
    "2/2": "reproduced",
    "4/1": "contradicted",
  }
  assert all(c["paired"] and c["n"] == 3 for c in verdicts.values())
