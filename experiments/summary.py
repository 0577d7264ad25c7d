"""The README's results table, built from every experiment's claims.json.

  python -m experiments.summary            # prints the table
  python -m experiments.summary --write    # replaces the README block between its markers

One row per experiment: how many of the papers' claims it tests, how many reproduce, are
contradicted or stay unresolved (how many of those with both arms at the metric's ceiling),
how many stay resolved (either way) under Holm's correction within the record, and whether
its no-position controls pass. A second table counts 002's claims by how fairly their
arms were tuned (at defaults, only some arms tuned, each arm tuned by the same rule) and
lists the verdicts that change between a claim's less and more fair readings.
tests/experiments/test_summary.py checks that the README's blocks are these tables, so the
front page cannot drift from the records.
"""

from __future__ import annotations

import argparse
import json
import pathlib

from experiments import claims as claims_table

ROOT = pathlib.Path(__file__).resolve().parent
README = ROOT.parent / "README.md"
START, END = "<!-- claims-summary:start -->", "<!-- claims-summary:end -->"
FAIR = "fair-tuning"  # the README block of the before/after-fair-tuning table
CONTROL = "control"  # claims whose text names the control are the no-position checks
TUNINGS = ("defaults", "some tuned", "each tuned")


def _records() -> list[tuple[str, list[dict]]]:
  """(experiment, its claims.json entries) of every current record, by name."""
  return [(p.parent.name, json.loads(p.read_text())) for p in sorted(ROOT.glob("*/claims.json"))]


def rows() -> list[dict]:
  """Per experiment with a claims.json: its counts of claims by verdict and its controls."""
  out = []
  for name, entries in _records():
    verdicts = [e["verdict"] for e in entries]
    controls = [e for e in entries if CONTROL in e["claim"]]
    out.append(
      {
        "experiment": name,
        "claims": len(entries),
        "reproduced": verdicts.count("reproduced"),
        "contradicted": verdicts.count("contradicted"),
        "unresolved": verdicts.count("unresolved"),
        "holm": sum(e.get("holm_verdict") in ("reproduced", "contradicted") for e in entries),
        "at_ceiling": sum(
          bool(e.get("at_ceiling")) for e in entries if e["verdict"] == "unresolved"
        ),
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


def tuning(entry: dict) -> str:
  """How fair a claim's comparison is, read from its `tuned` note (`sweeps.tuned_note`'s
  form): 'defaults' (no arm tuned), 'some tuned' (an arm swept while another ran at its
  defaults: the first editions' Fourier-only budget) or 'each tuned' (every arm by one rule)."""
  note = entry["tuned"]
  if note.startswith("none"):
    return "defaults"
  return "some tuned" if " at defaults" in note else "each tuned"


def fair_rows() -> tuple[list[dict], list[str]]:
  """Per record, 002's claims (controls aside) counted by `tuning`: (tested, reproduced,
  contradicted) each; and the changed verdicts: a claim (same item, arms and metric) read
  less fairly (some tuned, else defaults) and with each arm tuned."""
  rows, changes = [], []
  for name, entries in _records():
    claims = [e for e in entries if e["paper"] == "002" and CONTROL not in e["claim"]]
    if not claims:
      continue
    row = {"experiment": name}
    for kind in TUNINGS:
      verdicts = [e["verdict"] for e in claims if tuning(e) == kind]
      row[kind] = (len(verdicts), verdicts.count("reproduced"), verdicts.count("contradicted"))
    rows.append(row)
    readings: dict[tuple, dict[str, dict]] = {}
    for e in claims:
      readings.setdefault((e["item"], e["a"], e["b"], e["metric"]), {})[tuning(e)] = e
    for found in readings.values():
      before = found.get("some tuned") or found.get("defaults")
      after = found.get("each tuned")
      if before and after and before["verdict"] != after["verdict"]:
        changes.append(
          f"- {name}: {after['claim']}: {before['verdict']} ({tuning(before)}) → "
          f"{after['verdict']} (each tuned; {after['difference']:+.3g} "
          f"[{after['ci_low']:+.3g}, {after['ci_high']:+.3g}])"
        )
  return rows, changes


def fair_markdown() -> str:
  """The before/after-fair-tuning table and its list of changed verdicts."""
  cell = lambda n, r, c: f"{r} / {c} of {n}" if n else "–"
  lines = [
    "| experiment | at defaults | some arms tuned (Fourier only) | each arm tuned |",
    "|---|---|---|---|",
  ]
  rows, changes = fair_rows()
  for r in rows:
    lines.append(f"| {r['experiment']} | " + " | ".join(cell(*r[k]) for k in TUNINGS) + " |")
  lines += ["", "Each cell: 002 claims reproduced / contradicted of those tested that way."]
  lines += ["", "Verdicts that change when each arm is tuned:", ""]
  lines += changes or ["- none yet (no claim has both readings with different verdicts)"]
  return "\n".join(lines) + "\n"


def with_table(doc: str) -> str:
  """`doc` (the README) with its summary blocks replaced by today's tables."""
  head, rest = doc.split(START, 1)
  doc = f"{head}{START}\n{markdown()}{END}{rest.split(END, 1)[1]}"
  return claims_table.replace_block(doc, FAIR, fair_markdown())


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--write", action="store_true", help="update README.md's block")
  args = parser.parse_args(argv)
  if args.write:
    README.write_text(with_table(README.read_text()))
  print(markdown(), end="")


if __name__ == "__main__":
  main()
