"""The layout record's report on made-up results: the control claim and the control's rows."""

from experiments.layout import report


def _run(row, seed, cider):
  scores = {"BLEU-1": 50.0, "BLEU-2": 40.0, "ROUGE-L": 45.0, "CIDEr": cider}
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
