"""The README's results table, built from every experiment's claims.json.

  python -m experiments.summary            # prints the table
  python -m experiments.summary --write    # replaces the README block between its markers

One row per experiment: how many of the papers' claims it tests, how many reproduce, are
contradicted or stay unresolved (how many of those with both arms at the metric's ceiling),
how many stay resolved (either way) under Holm's correction within the record, how many
resolved verdicts compare an arm that failed the record's length rule (read before it
settled, `claims.mark_settling`; "not checked" where the record checks no length), how many
resolved directional verdicts lie wholly inside the record's about-equal margin (a tenth of
its control gap, `stats.claim`'s `inside_margin`: small beside what position buys; "–" where
no directional claim is sized against a control), and whether its no-position controls pass;
a record with a later finished edition
(`experiments.editions`: `generation_v2` re-records `generation`) is replaced by it. A second
table counts 002's claims by how fairly their arms were tuned (at defaults, only some arms
tuned, each arm tuned by the same rule), each reading from the newest edition that has it
(the first editions hold the Fourier-only readings), and lists the verdicts that change
between a claim's less and more fair readings, across editions.
tests/experiments/test_summary.py checks that the README's blocks are these tables, so the
front page cannot drift from the records.
"""

from __future__ import annotations

import argparse
import json
import pathlib

from experiments import claims as claims_table
from experiments import editions

ROOT = pathlib.Path(__file__).resolve().parent
README = ROOT.parent / "README.md"
START, END = "<!-- claims-summary:start -->", "<!-- claims-summary:end -->"
FAIR = "fair-tuning"  # the README block of the before/after-fair-tuning table
CONTROL = "control"  # the no-position checks: item "control", or (older records) named so
TUNINGS = ("defaults", "some tuned", "each tuned")
RESOLVED = ("reproduced", "contradicted")


def _claims(name: str) -> list[dict]:
  return json.loads((ROOT / name / "claims.json").read_text())


def _records() -> list[tuple[str, list[dict]]]:
  """(experiment, its claims.json entries) of every current record (each record's newest
  finished edition), by name."""
  return [(found[-1], _claims(found[-1])) for found in editions.finished(ROOT).values()]


def is_control(entry: dict) -> bool:
  """Whether a claim is a no-position check: its item says so (detection, generation, layout,
  resolution), or its text does (digits, the position study)."""
  return entry.get("item") == CONTROL or CONTROL in entry["claim"]


def holm_verdict(entry: dict) -> str | None:
  """A claim's verdict after Holm's adjustment, a kept plain one ("... (not adjusted)":
  equivalence claims, a failing arm at the ceiling) counted as it reads."""
  verdict = entry.get("holm_verdict")
  return verdict.split(" (")[0] if verdict else verdict


def rows() -> list[dict]:
  """Per current record: its counts of claims by verdict and its controls."""
  out = []
  for name, entries in _records():
    verdicts = [e["verdict"] for e in entries]
    controls = [e for e in entries if is_control(e)]
    out.append(
      {
        "experiment": name,
        "claims": len(entries),
        "reproduced": verdicts.count("reproduced"),
        "contradicted": verdicts.count("contradicted"),
        "unresolved": verdicts.count("unresolved"),
        "holm": sum(holm_verdict(e) in RESOLVED for e in entries),
        "at_ceiling": sum(
          bool(e.get("at_ceiling")) for e in entries if e["verdict"] == "unresolved"
        ),
        "before_settling": sum(e["verdict"] in RESOLVED and e["settled"] is False for e in entries)
        if entries and all("settled" in e for e in entries)
        else "not checked",
        "inside_margin": sum(e["verdict"] in RESOLVED and e["inside_margin"] for e in sized)
        if (sized := [e for e in entries if "inside_margin" in e])
        else "–",
        "controls": f"{sum(e['verdict'] == 'reproduced' for e in controls)} of {len(controls)}"
        if controls
        else "none (no task)",
      }
    )
  return out


def markdown() -> str:
  lines = [
    "| experiment | claims tested | reproduced | contradicted | unresolved (at ceiling) "
    "| resolved after Holm | resolved before settling | resolved inside the margin "
    "| controls pass | verdicts |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows():
    link = f"[claims.json](experiments/{r['experiment']}/claims.json)"
    lines.append(
      f"| {r['experiment']} | {r['claims']} | {r['reproduced']} | {r['contradicted']} "
      f"| {r['unresolved']} ({r['at_ceiling']}) | {r['holm']} | {r['before_settling']} "
      f"| {r['inside_margin']} | {r['controls']} | {link} |"
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
  contradicted, and the two after Holm's adjustment) each, from the newest edition with
  claims read that way; and the changed verdicts: a claim (same item, arms and metric) read
  less fairly (some tuned, else defaults) and with each arm tuned, the two readings possibly
  from different editions."""
  rows, changes = [], []
  for found in editions.finished(ROOT).values():
    by_kind: dict[str, tuple[str, list[dict]]] = {}
    for name in found:  # oldest first: a later edition's reading replaces an earlier one's
      claims = [e for e in _claims(name) if e["paper"] == "002" and not is_control(e)]
      for kind in TUNINGS:
        if any(tuning(e) == kind for e in claims):
          by_kind[kind] = (name, [e for e in claims if tuning(e) == kind])
    if not by_kind:
      continue
    used = sorted({name for name, _ in by_kind.values()}, key=editions.number)
    row = {"experiment": ", ".join(used)}
    readings: dict[tuple, dict[str, tuple[str, dict]]] = {}
    for kind in TUNINGS:
      name, claims = by_kind.get(kind, ("", []))
      plain = [e["verdict"] for e in claims]
      holm = [holm_verdict(e) for e in claims]
      row[kind] = (len(plain), *(v.count(s) for v in (plain, holm) for s in RESOLVED))
      for e in claims:
        readings.setdefault((e["item"], e["a"], e["b"], e["metric"]), {})[kind] = (name, e)
    rows.append(row)
    for found_readings in readings.values():
      before = found_readings.get("some tuned") or found_readings.get("defaults")
      after = found_readings.get("each tuned")
      if before and after and before[1]["verdict"] != after[1]["verdict"]:
        (was, b), (now, a) = before, after
        where = "" if was == now else f", {was}"
        changes.append(
          f"- {now}: {a['claim']}: {b['verdict']} ({tuning(b)}{where}) → "
          f"{a['verdict']} (each tuned; {claims_table.interval(a)})"
        )
  return rows, changes


def fair_markdown() -> str:
  """The before/after-fair-tuning table and its list of changed verdicts."""
  cell = lambda n, r, c, hr, hc: f"{r} / {c} of {n} (Holm: {hr} / {hc})" if n else "–"
  lines = [
    "| experiment | at defaults | some arms tuned (Fourier only) | each arm tuned |",
    "|---|---|---|---|",
  ]
  rows, changes = fair_rows()
  for r in rows:
    lines.append(f"| {r['experiment']} | " + " | ".join(cell(*r[k]) for k in TUNINGS) + " |")
  lines += [
    "",
    "Each cell: 002 claims reproduced / contradicted of those tested that way, and in "
    "parentheses the same after Holm's adjustment over the record's claims (`holm_verdict`; "
    "equivalence claims and those a failing arm at the ceiling decides keep their plain "
    "verdict), from the newest edition of the record that tests them so (a record's editions "
    "are named in its row).",
  ]
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
