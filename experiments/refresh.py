"""Every record's reports rewritten from its committed results, with nothing trained.

  python -m experiments.refresh                      # every record, then the summaries
  python -m experiments.refresh detection layout     # some (an edition: generation_v2)
  python -m experiments.refresh detection_v3         # an edition's first report, from the
                                                     # results.json its worktree finished

Each record's `report.write` reads only its results.json (and layout's checks.json): its
tables, claims.json (with the family's Holm verdicts), the README blocks generated from them
and the figures drawn from results. Figures that need trained workdirs (generation's samples,
layout's screen) are left as they are. Then the README's claims summary
(`experiments.summary`) and docs/which_encoding.md with its forest plot
(`experiments.which_encoding`) are rebuilt. Run it after a change to how a
record reports (a claim's fields, a table's layout); a changed number is a changed record.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Callable

from experiments import editions, summary, which_encoding

ROOT = pathlib.Path(__file__).resolve().parent


def _load(out: pathlib.Path, name: str = "results.json") -> dict:
  return json.loads((out / name).read_text())


def _detection(out: pathlib.Path) -> None:
  from experiments.detection import report  # noqa: PLC0415

  report.write(_load(out), str(out))


def _generation(out: pathlib.Path) -> None:
  from experiments.generation import report  # noqa: PLC0415

  report.write(_load(out), str(out))


def _layout(out: pathlib.Path) -> None:
  from experiments.layout import report  # noqa: PLC0415

  report.write(_load(out), _load(out, "checks.json"), str(out))


def _position_study(out: pathlib.Path) -> None:
  from experiments.position_study import report  # noqa: PLC0415

  report.write(_load(out), str(out))


def _resolution(out: pathlib.Path) -> None:
  from experiments.resolution import report  # noqa: PLC0415

  report.write(_load(out), str(out))


def _resolution_redgreen(out: pathlib.Path) -> None:
  from experiments.resolution_redgreen import report  # noqa: PLC0415

  report.write(_load(out), str(out))


def _digits_demo(out: pathlib.Path) -> None:
  from experiments.digits_demo import report  # noqa: PLC0415

  results = _load(out)
  report.write(results, str(out), report.newest(results))


def _similarity(out: pathlib.Path) -> None:
  from experiments.similarity import report, run  # noqa: PLC0415

  report.write(_load(out), run.figure_maps(), str(out))


RECORDS: dict[str, Callable[[pathlib.Path], None]] = {
  "detection": _detection,
  "digits_demo": _digits_demo,
  "generation": _generation,
  "layout": _layout,
  "position_study": _position_study,
  "resolution": _resolution,
  "resolution_redgreen": _resolution_redgreen,
  "similarity": _similarity,
}


def names() -> list[str]:
  """Every record folder refresh rewrites: each finished edition (one with claims.json) of each
  of `RECORDS` (`experiments.editions`: `generation` and `generation_v2`; `resolution` once its
  record finishes, to rewrite the report its pinned worktree wrote with this tree's code)."""
  found = editions.finished(ROOT)
  return [edition for name in RECORDS for edition in found.get(name, [])]


def unreported() -> list[str]:
  """Record folders of `RECORDS`' families holding results.json but no claims.json yet: an
  edition finished in a pinned worktree whose results.json was copied into the checkout, to be
  reported here by the checkout's code (named on the command line, never chosen by default)."""
  found = (p.parent for p in sorted(ROOT.glob("*/results.json")))
  return [
    p.name for p in found if editions.family(p.name) in RECORDS and not (p / "claims.json").exists()
  ]


def main(argv: list[str] | None = None) -> None:
  every, named_only = names(), unreported()
  chosen = (sys.argv[1:] if argv is None else argv) or every
  unknown = sorted(set(chosen) - set(every) - set(named_only))
  if unknown:
    sys.exit(f"unknown records {unknown}; the records: {', '.join(every + named_only)}")
  for name in chosen:
    RECORDS[editions.family(name)](ROOT / name)
    print(f"rewrote experiments/{name}'s reports from its results")
  summary.main(["--write"])
  which_encoding.write()


if __name__ == "__main__":
  main()
