"""Editions of a record: `X` is the first, `X_v2`, `X_v3`, ... the later ones.

A record re-run under a new recipe (issue 38's equal tuning budget: detection_v2,
generation_v2) keeps the earlier edition beside it, so that a verdict can be read before and
after the change. An edition is *finished* when its report has written claims.json (every
report writes it once its record is done), so a later edition under way, whose live
results.json is partial, never replaces a finished one.
"""

from __future__ import annotations

import json
import pathlib
import re
from collections import Counter

from lfpe.errors import ConfigError

_SUFFIX = re.compile(r"_v(\d+)$")


def family(name: str) -> str:
  """The record an edition belongs to: `generation_v2` -> `generation`."""
  return _SUFFIX.sub("", name)


def number(name: str) -> int:
  """The edition's number: 1 for `X`, N for `X_vN`."""
  found = _SUFFIX.search(name)
  return int(found.group(1)) if found else 1


def finished(root: pathlib.Path) -> dict[str, list[str]]:
  """{family: its finished editions, oldest first} of the record folders under `root`."""
  out: dict[str, list[str]] = {}
  for path in sorted(root.glob("*/claims.json")):
    out.setdefault(family(path.parent.name), []).append(path.parent.name)
  return {name: sorted(found, key=number) for name, found in out.items()}


def newest(root: pathlib.Path, name: str) -> str:
  """The newest finished edition of `name`'s record (`name` itself where none is finished)."""
  return finished(root).get(family(name), [name])[-1]


def refuse_unstamped(out: str, results: dict, newer: str) -> None:
  """Stops before training into `out` where its runs carry no provenance of their own: an
  edition recorded before per-run provenance (a first edition), under a recipe the runs about
  to train would not share; `newer` is the `--out` to give instead."""
  old = [k for k, e in results.items() if k != "provenance" and "provenance" not in e]
  if old:
    raise ConfigError(
      f"--out={out} holds {len(old)} runs with no provenance of their own (an earlier "
      f"edition, e.g. {old[0]}), trained under another recipe: give this edition its own "
      f"--out, e.g. --out={newer}."
    )


ADOPTED = "adopted_from"  # a results entry copied from an earlier edition: which one


def adopt(results: dict, earlier: str, prefixes: tuple[str, ...]) -> list[str]:
  """Copies into `results` the runs of the edition at `earlier` (its folder) whose keys start
  with `prefixes` and that `results` lacks, each marked `adopted_from` and keeping its own
  provenance; returns their keys. For an edition that changes only what its choices do not
  depend on (detection's third edition: the record's length, while the rate choice and the
  sweep train a fixed length): its choices are then the earlier edition's, not retrained.
  `runs.check_encodings` still stops the record on any whose encoding, length or rate its
  own configs do not give."""
  path = pathlib.Path(earlier) / "results.json"
  if not path.exists():
    raise ConfigError(f"--choices-from={earlier} holds no results.json to adopt runs from.")
  source = json.loads(path.read_text())
  keys = [k for k in source if k.startswith(prefixes) and k not in results]
  for key in keys:
    results[key] = {**source[key], ADOPTED: str(earlier)}
  return keys


def adopted_markdown(results: dict) -> list[str]:
  """One sentence per earlier edition that `results` adopted runs from (`adopt`), or none."""
  sources = Counter(e[ADOPTED] for e in results.values() if isinstance(e, dict) and ADOPTED in e)
  return [
    f"{n} runs were adopted from `{source}` (`--choices-from`), trained there with the "
    "configs this edition gives them; each keeps its own provenance.\n"
    for source, n in sorted(sources.items())
  ]
