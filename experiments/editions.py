"""Editions of a record: `X` is the first, `X_v2`, `X_v3`, ... the later ones.

A record re-run under a new recipe (issue 38's equal tuning budget: detection_v2,
generation_v2) keeps the earlier edition beside it, so that a verdict can be read before and
after the change. An edition is *finished* when its report has written claims.json (every
report writes it once its record is done), so a later edition under way, whose live
results.json is partial, never replaces a finished one.
"""

from __future__ import annotations

import pathlib
import re

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
