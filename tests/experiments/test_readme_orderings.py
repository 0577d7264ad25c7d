"""Every ordering a README states has an interval, a verdict or its source behind it.

A sentence that orders encodings ("A beats B", "ends best", "ends above B", "A > B", ...) in the
project's README, the docs (docs/*.md) or an experiment's README must carry its evidence in the
same sentence: a 95 % interval ([lo, hi], ±, or "lo to hi"), a verdict (reproduced,
contradicted, (un)resolved), a pointer to its rows (claims.json, or a link to a record's
claims), or the paper it quotes (000-004, "the paper", "the thesis"); words such as "claims" or
"reproduces" alone are not evidence. Generated blocks (claims tables) and code blocks are built
from claims.json and are skipped. Prose that orders arms with none of these is what issue 38
removed.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [
  ROOT / "README.md",
  *sorted(ROOT.glob("docs/*.md")),
  *sorted(ROOT.glob("experiments/*/README.md")),
]
ORDERING = re.compile(
  r"\b(beats?|beaten|outperforms?|better than|worse than|ahead(?![- ]of[- ]time)|behind|trails?"
  r"|(?:higher|lower|larger|smaller|greater) than|removes? most|rescues?"
  r"|(?:is|are|ends?|was) (?:the )?(?:best|last|worst|lowest|highest)|second best"
  r"|(?:gains?|helps?|loses?|drops?|falls?) (?:the )?(?:most|least)|outscores?"
  r"|(?:ends?|scores?|sits?|ranks?)(?: \w+)? (?:above|below)(?! (?:its|the|their) ceiling))\b"
  r"|(?<=[\w)]) [<>] (?=[A-Z])",
  re.IGNORECASE,
)
EVIDENCE = re.compile(
  r"\[[−+-]?\d[\d.,]*\s*[,;]\s*[−+-]?\d|[+−-]\d[\d.]* to [+−-]?\d|±"
  r"|\b(?:reproduced|contradicted|unresolved|resolved)\b|claims\.json|\]\([^)]*claims"
  r"|(?<![\d,.])\b00[0-4]\b|\bpaper|\bthesis",
  re.IGNORECASE,
)


def sentences(text: str):
  """The prose sentences of a markdown document (table cells and bullets apart), without
  generated blocks and code."""
  text = re.sub(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", "", text, flags=re.S)
  text = re.sub(r"```.*?```", "", text, flags=re.S)
  for block in re.split(r"\n\s*\n|\n(?=\s*[-*] )|\n(?=\|)", text):
    cells = block.split(" | ") if block.lstrip().startswith("|") else [block]
    for cell in cells:
      yield from re.split(r"(?<=\.)\s+(?=[A-Z*(])", " ".join(cell.split()))


def unsupported(text: str) -> list[str]:
  """The sentences of `text` that order arms with no interval, verdict or source."""
  return [s for s in sentences(text) if ORDERING.search(s) and not EVIDENCE.search(s)]


def test_the_rule_finds_an_ordering_with_nothing_behind_it():
  assert unsupported("Here 4/1 is the best grouping. Sine-2D beats Embed-2D.") == [
    "Here 4/1 is the best grouping.",
    "Sine-2D beats Embed-2D.",
  ]
  assert unsupported("Tuned, Embed-1D gains most.") == ["Tuned, Embed-1D gains most."]
  assert not unsupported("Sine-2D beats Embed-2D by +4.3 [+2.0, +6.6].")
  assert not unsupported("Sine-2D beats Embed-2D (unresolved).")
  assert not unsupported("002: Embed-2D is second, ahead of the sinusoids.")
  assert not unsupported("<!-- claims:start -->\nA beats B.\n<!-- claims:end -->")
  assert not unsupported("The step is checked ahead of time, small < 3.2².")
  assert unsupported("At 3,000 steps A trails B.")  # a step count is not a paper
  assert unsupported("Mixed-resolution training removes most of it.")
  assert unsupported("A is second, ahead of every table, and the claims reproduce.")
  assert unsupported("Fourier's gap to Embed-2D is larger than MLP's.")
  assert unsupported("Tuned, Sine-2D ends above MLP.") and unsupported("A scores well below B.")
  assert not unsupported("AP sits far below its ceiling of 100.")
  assert not unsupported("A is ahead of B (claims.json).")
  assert not unsupported("A trails B ([claims](experiments/x/claims.json)).")


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_ordering_has_its_interval(doc):
  bad = unsupported(doc.read_text())
  assert not bad, f"{doc.relative_to(ROOT)} orders arms with no interval behind: {bad}"
