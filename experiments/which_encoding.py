"""docs/which_encoding.md and its forest plot: each encoding against Sine-2D, task by task.

  python -m experiments.which_encoding      # (also run by `python -m experiments.refresh`)

For each task family with a committed record, every encoding's effect against the family's
sinusoidal reference (Sine-2D; DETR's Sine-2D in detection, Sine-4D for boxes), paired by
seed (seed s of every arm shares its data order and init stream), with its 95 % interval,
on the record's metric signed so that positive is better. Each row says whether its arm was
tuned (from the record's own sweep) or ran at defaults, and a family's recommendation is
written only where the intervals support it, between arms tuned alike: an effect of a tuned
arm against an untuned reference is shown, never recommended on.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable

import numpy as np

from experiments import editions, stats, sweeps
from lfpe import encodings

ROOT = pathlib.Path(__file__).resolve().parent
PAGE = ROOT.parent / "docs" / "which_encoding.md"
FIGURE = ROOT.parent / "docs" / "which_encoding.png"


@dataclasses.dataclass(frozen=True)
class Family:
  """One task family's comparison, read from one record's results.json.

  `scores(results)` -> {arm: {seed: score}} at defaults; `tuned_scores(results)` -> the
  same with each swept arm at the value its sweep chose, and `swept(results)` the arms swept
  (for records keyed by knob, `sweeps.record_key`); `sign` +1 where higher is better (-1: bits/dim);
  `label(arm)`: the arm's display name."""

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
    return {name: dict(enumerate(values)) for name, values in group[part].items()}

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
  """Accuracy at `size` px (2x the training size) of each arm of the second edition under its
  first policy (extrapolation, or the table's PyTorch-bicubic resize), at "defaults" or
  "tuned" (`resolution.report.cells`)."""

  def scores(results: dict) -> dict:
    from experiments.resolution import plan, report  # noqa: PLC0415

    rows = report.cells(results, at)
    out = {}
    for arm in plan.arms():
      row = (arm.name, next(iter(arm.policies)))
      if rows.get(row, {}).get(size):
        out[_resolution_label(arm)] = rows[row][size]
    return out

  return scores


def _resolution_label(arm) -> str:
  """A second-edition arm's row on the page: `<arm> / <its first policy>`."""
  return f"{arm.name} / {next(iter(arm.policies))}"


def _resolution_swept(results: dict) -> set[str]:
  from experiments.resolution import plan, report  # noqa: PLC0415

  picks = report.chosen(results)
  return {_resolution_label(a) for a in plan.arms() if a.slug in picks}


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
    label=str,
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


def effects(family: Family) -> list[dict]:
  """Each arm against the reference: the paired difference (sign-adjusted, scaled) with its
  95 % interval and seeds, at defaults and, where the record swept either side, as tuned;
  `tuning` says which sides were tuned and `fair` whether both were tuned alike."""
  results = json.loads((ROOT / family.record / "results.json").read_text())
  rows = _rows(family, family.scores(results), set(), at_defaults=True)
  if family.tuned_scores is not None:
    swept = family.swept(results)
    rows += _rows(family, family.tuned_scores(results), swept, at_defaults=False)
  return sorted(rows, key=lambda r: -r["difference"])


def _rows(family: Family, scores: dict, tuned: set[str], at_defaults: bool) -> list[dict]:
  reference = scores.get(family.reference, {})
  rows = []
  for arm, by_seed in scores.items():
    seeds = sorted(set(by_seed) & set(reference))
    sides = (arm in tuned, family.reference in tuned)
    if arm == family.reference or len(seeds) < 2 or (not at_defaults and not any(sides)):
      continue
    a = [family.sign * by_seed[s] for s in seeds]
    b = [family.sign * reference[s] for s in seeds]
    diff, half = stats.paired_difference(a, b, scale=family.scale)
    tuning = {
      (False, False): "defaults",
      (True, True): "both tuned",
      (True, False): "tuned (reference at defaults)",
      (False, True): "defaults (reference tuned)",
    }[sides]
    rows.append(
      {
        "arm": family.label(arm),
        "difference": diff,
        "low": diff - half,
        "high": diff + half,
        "n": len(seeds),
        "tuning": tuning,
        "fair": sides[0] == sides[1],
        "tuned": sides[0],
      }
    )
  return rows


def recommendation(family: Family, rows: list[dict]) -> str:
  """Plain words, only where the intervals support them, among comparisons where both sides
  had the same budget (both at defaults, or both tuned): an effect is resolved where its
  interval excludes 0 and it survives Holm's adjustment over that budget's rows of the family
  (`_holm_survivors`); one that excludes 0 only on its own is named apart."""
  ref = family.label(family.reference)
  words = []
  for tuning, what in (("defaults", "at defaults"), ("both tuned", "each tuned")):
    group = [r for r in rows if r["tuning"] == tuning]
    if not group:
      continue
    kept = _holm_survivors(group)
    better = [r["arm"] for r in kept if r["low"] > 0]
    worse = [r["arm"] for r in kept if r["high"] < 0]
    alone = [r["arm"] for r in group if (r["low"] > 0 or r["high"] < 0) and r not in kept]
    if better:
      words.append(f"{what}, {', '.join(better)} resolved better than {ref}")
    else:
      words.append(f"{what}, nothing is resolved better than {ref}")
    if worse:
      words.append(f"{', '.join(worse)} resolved worse")
    if alone:
      by = "its interval" if len(alone) == 1 else "their intervals"
      words.append(
        f"{', '.join(alone)} apart from {ref} by {by} alone, not after Holm's adjustment over "
        f"the {len(group)} rows {what}"
      )
  unfair = [r for r in rows if not r["fair"]]
  kept = _holm_survivors(unfair)
  ahead = [r["arm"] for r in kept if r["tuned"] and r["low"] > 0]
  behind = [r["arm"] for r in kept if r["tuned"] and r["high"] < 0]
  if ahead:
    words.append(
      f"{', '.join(ahead)} ahead only with its knob tuned and {ref} at defaults "
      "(not an equal budget: no recommendation)"
    )
  if behind:
    words.append(f"{', '.join(behind)} resolved worse even with its knob tuned")
  return "; ".join(words) + "."


def _holm_survivors(group: list[dict]) -> list[dict]:
  """The rows of `group` whose effect differs from 0 at a family-wise 5 % over the group
  (`stats.holm` on each row's paired t test, read back from its interval and seeds)."""
  tests = [
    {"p_value": stats.p_value((r["low"] + r["high"]) / 2, (r["high"] - r["low"]) / 2, r["n"] - 1),
     "verdict": "reproduced"}
    for r in group
  ]  # fmt: skip
  return [r for r, verdict in zip(group, stats.holm(tests), strict=True) if verdict != "unresolved"]


def markdown(results: list[tuple[Family, list[dict]]]) -> str:
  lines = [
    "# Which encoding? Every record's encodings against Sine-2D",
    "",
    "Generated by `python -m experiments.which_encoding` from the committed records (do not "
    "edit). Each row: the arm's effect against the family's sinusoidal reference, paired by "
    "seed, mean and 95 % interval, signed so that **positive is better**. *tuning*: "
    "`defaults`, both arms at their defaults; `both tuned`, each arm's scale knob chosen on "
    "validation data by the same sweep and rule (an equal budget); `tuned (reference at "
    "defaults)` or the reverse, only one arm's knob chosen (a first edition that swept only "
    "Learnable-Fourier's γ, as detection's did): not an equal-budget comparison, "
    "and the page recommends nothing on it. A reading calls an effect resolved where its "
    "interval excludes 0 and it survives Holm's adjustment over the family's rows at the same "
    "budget (at defaults, or each tuned); one that excludes 0 only on its own is named apart. "
    "The records are CPU-scale reproductions "
    "(each README says how they differ from the papers'); an effect here is evidence about "
    "that task at that scale, not a law.",
    "",
    "![forest plot](which_encoding.png)",
  ]
  for family, rows in results:
    own = (ROOT / family.record / "README.md").exists()  # an edition with its own README
    readme = family.record if own else editions.family(family.record)
    lines += [
      "",
      f"## {family.name}",
      "",
      f"Reference: {family.label(family.reference)}; metric: {family.metric}; record: "
      f"[experiments/{family.record}](../experiments/{readme}/README.md).",
      "",
      "| encoding | effect vs reference (95 % CI) | seeds | tuning |",
      "|---|---|---|---|",
      *(
        f"| {r['arm']} | {stats.signed_interval(r['difference'], r['low'], r['high'])} | {r['n']} "
        f"| {r['tuning']} |"
        for r in rows
      ),
      "",
      f"**Reading**: {recommendation(family, rows)}",
    ]
  return "\n".join(lines) + "\n"


def plot(results: list[tuple[Family, list[dict]]], path: pathlib.Path) -> None:
  """One panel per family: each arm's effect and interval, tuned arms hollow."""
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  heights = [max(len(rows), 1) for _, rows in results]
  fig, axes = plt.subplots(
    len(results), 1, figsize=(7, 0.32 * sum(heights) + 1.2 * len(results)),
    gridspec_kw={"height_ratios": heights},
  )  # fmt: skip
  for ax, (family, rows) in zip(np.atleast_1d(axes), results, strict=True):
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
      face = "C0" if r["tuning"] == "defaults" else "white"
      ax.plot([r["low"], r["high"]], [yi, yi], color="C0")
      ax.plot(r["difference"], yi, "o", color="C0", markerfacecolor=face)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, [f"{r['arm']} ({r['tuning']})" for r in rows], fontsize=6)
    ax.set_title(f"{family.name}: vs {family.label(family.reference)}", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
  fig.supxlabel("effect against the reference, positive = better (hollow: a side tuned)", size=8)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write(page: pathlib.Path = PAGE, figure: pathlib.Path = FIGURE) -> None:
  """The page and its plot, from each family's newest finished record (`experiments.editions`:
  its claims.json written; a record under way, with a partial live results.json, is left
  out) with at least one arm paired with the reference on two seeds."""
  newest = [dataclasses.replace(f, record=editions.newest(ROOT, f.record)) for f in FAMILIES]
  every = [(f, effects(f)) for f in newest if (ROOT / f.record / "claims.json").exists()]
  results = [(family, rows) for family, rows in every if rows]
  page.write_text(markdown(results))
  plot(results, figure)


if __name__ == "__main__":
  write()
  print(f"wrote {PAGE} and {FIGURE}")
