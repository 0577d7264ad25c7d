"""The README's results table, built from every experiment's claims.json.

  python -m experiments.summary            # prints the table
  python -m experiments.summary --write    # replaces the README block between its markers

One row per experiment: how many of the papers' claims it tests, how many reproduce, are
contradicted or stay unresolved (how many of those with both arms at the metric's ceiling),
how many stay resolved (either way) under Holm's correction within the record, and whether
its no-position controls pass. tests/experiments/test_summary.py checks that the
README's block is this table, so the front page cannot drift from the records.
"""

from __future__ import annotations

import argparse
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent
README = ROOT.parent / "README.md"
START, END = "<!-- claims-summary:start -->", "<!-- claims-summary:end -->"
CONTROL = "control"  # claims whose text names the control are the no-position checks


def rows() -> list[dict]:
  """Per experiment with a claims.json: its counts of claims by verdict and its controls."""
  out = []
  for path in sorted(ROOT.glob("*/claims.json")):
    entries = json.loads(path.read_text())
    verdicts = [e["verdict"] for e in entries]
    controls = [e for e in entries if CONTROL in e["claim"]]
    out.append(
      {
        "experiment": path.parent.name,
        "claims": len(entries),
        "reproduced": verdicts.count("reproduced"),
        "contradicted": verdicts.count("contradicted"),
        "unresolved": verdicts.count("unresolved"),
        "holm": sum(e.get("holm_verdict") in ("reproduced", "contradicted") for e in entries),
        "at_ceiling": sum(bool(e.get("at_ceiling")) for e in entries),
        "controls": f"{sum(e['verdict'] == 'reproduced' for e in controls)} of {len(controls)}"
        if controls
        else "none (no task)",
      }
    )
  return out


def markdown() -> str:
  lines = [
    "| experiment | claims tested | reproduced | contradicted | unresolved (at ceiling) "
    "| resolved after Holm | controls pass | verdicts |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for r in rows():
    link = f"[claims.json](experiments/{r['experiment']}/claims.json)"
    lines.append(
      f"| {r['experiment']} | {r['claims']} | {r['reproduced']} | {r['contradicted']} "
      f"| {r['unresolved']} ({r['at_ceiling']}) | {r['holm']} | {r['controls']} | {link} |"
    )
  return "\n".join(lines) + "\n"


def with_table(doc: str) -> str:
  """`doc` (the README) with its summary block replaced by today's table."""
  head, rest = doc.split(START, 1)
  return f"{head}{START}\n{markdown()}{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--write", action="store_true", help="update README.md's block")
  args = parser.parse_args(argv)
  if args.write:
    README.write_text(with_table(README.read_text()))
  print(markdown(), end="")


if __name__ == "__main__":
  main()
