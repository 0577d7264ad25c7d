"""The task families of docs/which_encoding.md: for each, the record it reads, its metric and
reference arm, and how each arm's per-seed scores (at defaults and tuned) and the set of
swept arms are read from that record's results.json (`experiments.which_encoding` builds
the page from them).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

from experiments import sweeps
from experiments.recipe import reading
from lfpe import encodings


@dataclasses.dataclass(frozen=True)
class Family:
  """One task family's comparison, read from one record's results.json.

  `scores(results)` -> {arm: {seed: score}} at defaults; `tuned_scores(results)` -> the
  same with each swept arm at the value its sweep chose, and `swept(results)` the arms swept
  (for records keyed by knob, `sweeps.record_key`); `sign` +1 where higher is better (-1: bits/dim);
  `label(arm)`: the arm's display name; `unsettled(results, tuned)`: the arms that failed the
  record's length rule, at defaults or as tuned (their effects are read before they settled);
  `control`: the no-position arm's key (the family's control gap, `which_encoding.margin`)."""

  name: str
  record: str
  metric: str
  reference: str
  scores: Callable[[dict], dict[str, dict[int, float]]]
  sign: int = 1
  scale: float = 1.0
  label: Callable[[str], str] = encodings.display_name
  tuned_scores: Callable[[dict], dict[str, dict[int, float]]] | None = None
  swept: Callable[[dict], set[str]] = lambda results: set()
  unsettled: Callable[[dict, bool], set[str]] = lambda results, tuned: set()
  control: str = "none"


def _knob_keyed(prefix: str, value: Callable[[dict], float], score: Callable[[dict], float],
                higher_is_better: bool):  # fmt: skip
  """(scores, tuned_scores, swept) of a record keyed `prefix/posemb[/knob=v]/seed` whose
  sweep keys are `sweep/prefix/posemb/knob=v/seed` (`score`: a sweep run's validation score)."""

  def picks(results: dict) -> dict[str, float]:
    found = sweeps.choose(sweeps.scores(results, score), higher_is_better=higher_is_better)
    return {arm: value for arm, value in found.items() if arm.startswith(f"{prefix}/")}

  def arms(results: dict) -> set[str]:
    return {k.split("/")[1] for k in results if k.startswith(f"{prefix}/")}

  def collect(results: dict, tuned: bool) -> dict:
    chosen = picks(results) if tuned else {}
    out = {}
    for posemb in arms(results):
      runs = sweeps.arm_runs(results, f"{prefix}/{posemb}", chosen.get(f"{prefix}/{posemb}"))
      if runs:
        out[posemb] = {r["seed"]: value(r) for r in runs}
    return out

  swept = lambda results: {arm.split("/")[1] for arm in picks(results)}
  return (lambda r: collect(r, False)), (lambda r: collect(r, True)), swept


def _unsettled(record: str, prefix: str = "") -> Callable[[dict, bool], set[str]]:
  """The arms that failed the length rule of `record`'s report (`report.length_check`), those
  keyed `prefix/arm` (a protocol, an attention) without the prefix: as `tuned` by the check
  of the tuned readings (`recipe.TUNED` keys) where the report checks those, else by the
  defaults' check."""

  def arms(results: dict, tuned: bool) -> set[str]:
    report = importlib.import_module(f"experiments.{record}.report")
    checked = report.length_check(results) or {}
    read, _ = reading(checked, tuned)
    late = [arm for arm, ok in read.items() if ok is False]
    return {a.removeprefix(f"{prefix}/") for a in late if not prefix or a.startswith(f"{prefix}/")}

  return arms


def _layout(at: str) -> Callable[[dict], dict]:
  """Test CIDEr per row and seed of the record runs `at` "defaults" or "tuned" (each row at
  its sweep's choice, `sweeps.runs_at`); sweep runs, scored on validation, are never read."""

  def scores(results: dict) -> dict:
    from experiments.layout import report  # noqa: PLC0415

    chosen = report.chosen(results)
    rows = {e["row"] for k, e in results.items() if k != "provenance" and "eval" in e}
    runs = lambda row: sweeps.runs_at(results, report.slug(row), chosen, at)
    return {row: {r["seed"]: r["eval"]["CIDEr"] for r in runs(row)} for row in rows}

  return scores


def _layout_swept(results: dict) -> set[str]:
  from experiments.layout import report  # noqa: PLC0415

  chosen = report.chosen(results)
  return {e["row"] for k, e in results.items() if "row" in e and report.slug(e["row"]) in chosen}


def _digits(part: str) -> Callable[[dict], dict]:
  """The newest setting's accuracies at defaults (`part` "accuracy") or as tuned ("tuned")."""

  def scores(results: dict) -> dict:
    from experiments.digits_demo import report  # noqa: PLC0415

    group = report.groups(results)[report.newest(results)]
    return group[part]  # {encoding: {seed: accuracy}}

  return scores


def _digits_swept(results: dict) -> set[str]:
  from experiments.digits_demo import report  # noqa: PLC0415

  return set(report.groups(results)[report.newest(results)]["sweep"])


def _resolution(size: str) -> Callable[[dict], dict]:
  """Accuracy at `size` px on `direction` under each arm's first (default) policy."""

  def scores(results: dict) -> dict:
    out: dict = {}
    for entry in results["runs"].values():
      if entry["task"] == "direction":
        first = next(iter(entry["scores"].values()))
        out.setdefault(entry["arm"], {})[entry["seed"]] = first[size]
    return out

  return scores


def _resolution_v2(at: str, size: str = "128") -> Callable[[dict], dict]:
  """Accuracy at `size` px (2x the training size) of each arm of the second edition under
  each of its policies that applies there (a user changing resolution chooses an encoding and
  its policy together: RoPE-Axial extrapolated and with PI are two rows), at "defaults" or
  "tuned" (`resolution.report.cells`)."""

  def scores(results: dict) -> dict:
    from experiments.resolution import plan, report  # noqa: PLC0415

    rows = report.cells(results, at)
    return {
      _resolution_label(arm.name, policy): rows[(arm.name, policy)][size]
      for arm in plan.arms()
      for policy in arm.policies
      if rows.get((arm.name, policy), {}).get(size)
    }

  return scores


def _resolution_label(arm: str, policy: str) -> str:
  """A second-edition row's key on the page: `<arm> / <policy>`."""
  return f"{arm} / {policy}"


def _resolution_display(key: str) -> str:
  """A second-edition row's key (`_resolution_label`) in words (`plan.label`)."""
  from experiments.resolution import plan  # noqa: PLC0415

  return plan.label(*key.split(" / "))


def _resolution_swept(results: dict) -> set[str]:
  from experiments.resolution import plan, report  # noqa: PLC0415

  picks = report.chosen(results)
  return {_resolution_label(a.name, p) for a in plan.arms() if a.slug in picks for p in a.policies}


_AP = lambda e: e["eval"]["AP"]


def _keyed(name, record, metric, reference, prefix, value, *, higher_is_better, **kw) -> Family:
  """The family of a record keyed by knob (`_knob_keyed`), its sweep scored by `value`."""
  scores, tuned, swept = _knob_keyed(prefix, value, value, higher_is_better)
  return Family(name, record, metric, reference, scores, tuned_scores=tuned, swept=swept, **kw)


FAMILIES = (
  Family(
    "classification (ViT on digits)",
    "digits_demo",
    "test accuracy (points)",
    "sine_2d",
    _digits("accuracy"),
    scale=100,
    tuned_scores=_digits("tuned"),
    swept=_digits_swept,
    unsettled=_unsettled("digits_demo"),
  ),
  _keyed(
    "detection (DETR-lite, protocol all)",
    "detection",
    "COCO AP (points)",
    "detr_sine",
    "all",
    _AP,
    higher_is_better=True,
    scale=100,
    unsettled=_unsettled("detection", "all"),
  ),
  _keyed(
    "detection at unseen sizes (protocol heldout)",
    "detection",
    "COCO AP (points)",
    "detr_sine",
    "heldout",
    _AP,
    higher_is_better=True,
    scale=100,
    unsettled=_unsettled("detection", "heldout"),
  ),
  _keyed(
    "generation (Reformer-style, LSH)",
    "generation",
    "held-out bits/dim, lower is better (shown negated)",
    "sine_2d",
    "lsh",
    lambda e: e["final"],
    higher_is_better=False,
    sign=-1,
    unsettled=_unsettled("generation", "lsh"),
  ),
  Family(
    "captioning (layout, 4-D boxes)",
    "layout",
    "CIDEr",
    "Sine-4D",
    _layout("defaults"),
    tuned_scores=_layout("tuned"),
    swept=_layout_swept,
    label=str,
    unsettled=_unsettled("layout"),
    control="No-position",
  ),
  Family(
    "change of resolution (second edition, shapes: trained 64 px, tested 128 px)",
    "resolution",
    "accuracy at 128 px (2x; points)",
    "sine_2d / extrapolate",
    _resolution_v2("defaults"),
    scale=100,
    tuned_scores=_resolution_v2("tuned"),
    swept=_resolution_swept,
    label=_resolution_display,
    control="none / extrapolate",
  ),
  Family(
    "change of resolution (first edition, red-green squares: trained 32 px, tested 64 px)",
    "resolution_redgreen",
    "accuracy at 64 px (points), `direction`",
    "sine_2d unit",
    _resolution("64"),
    scale=100,
    label=str,
  ),
)
