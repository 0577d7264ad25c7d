"""claims.json of a record and its verdict table in the record's README (one writer for all).

`write(entries, out)` saves `out/claims.json` and, when `out/README.md` has the markers
`<!-- claims:start -->` and `<!-- claims:end -->`, replaces what lies between them with
`markdown(entries)`: the README's verdict sentences are generated, never typed.
"""

from __future__ import annotations

import json
import os


def markdown(entries: list[dict]) -> str:
  """The verdict table of claims.json."""
  lines = [
    "| paper | item | claim | a − b (95 % CI) | n | verdict | min. detectable |",
    "|---|---|---|---|---|---|---|",
  ]
  for c in entries:
    lines.append(
      f"| {c['paper']} | {c['item']} | {c['claim']} | {c['difference']:+.3g} "
      f"[{c['ci_low']:+.3g}, {c['ci_high']:+.3g}] {'paired' if c['paired'] else 'Welch'} "
      f"| {c['n']} | **{c['verdict']}**{' (both at ceiling)' * c.get('at_ceiling', False)} "
      f"| {'n/a' if c['minimum_detectable'] is None else format(c['minimum_detectable'], '.3g')} |"
    )
  return "\n".join(lines)


def replace_block(doc: str, name: str, text: str) -> str:
  """`doc` with the block between `<!-- name:start -->` and `<!-- name:end -->` set to text."""
  start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
  if start not in doc or end not in doc:
    return doc
  head, rest = doc.split(start, 1)
  return f"{head}{start}\n{text}{end}{rest.split(end, 1)[1]}"


def update_readme(out: str, blocks: dict[str, str]) -> None:
  """Replaces each named block of `out/README.md` (if the README and its markers exist)."""
  readme = os.path.join(out, "README.md")
  if not os.path.exists(readme):
    return
  with open(readme) as f:
    doc = f.read()
  for name, text in blocks.items():
    doc = replace_block(doc, name, text)
  with open(readme, "w") as f:
    f.write(doc)


def write(entries: list[dict], out: str) -> None:
  """`out/claims.json`, and the README's `claims` block generated from it."""
  with open(os.path.join(out, "claims.json"), "w") as f:
    json.dump(entries, f, indent=1)
  update_readme(out, {"claims": markdown(entries) + "\n"})
