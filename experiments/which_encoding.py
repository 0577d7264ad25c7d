"""docs/which_encoding.md and its forest plot: each encoding against Sine-2D, task by task.

  python -m experiments.which_encoding      # (also run by `python -m experiments.refresh`)

For each task family with a committed record, every encoding's effect against the family's
sinusoidal reference (Sine-2D; DETR's Sine-2D in detection, Sine-4D for boxes), paired by
seed (seed s of every arm shares its data order and init stream), with its 95 % interval,
on the record's metric signed so that positive is better. Each row says whether its arm was
tuned (from the record's own sweep) or ran at defaults, and a family's recommendation is
written only where the intervals support it, between arms tuned alike: an effect of a tuned
arm against an untuned reference is shown, never recommended on. A row (and a reading's
name) whose arm or reference failed the record's length rule is marked † and footnoted: the
effect is read before that arm settled; a row whose whole interval lies inside a tenth of the
family's control gap (`margin`, the records' one equivalence rule) is marked ≈: resolved or
not, the difference is small beside what position itself buys.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np

from experiments import editions, stats
from experiments.encoding_families import FAMILIES, Family

ROOT = pathlib.Path(__file__).resolve().parent
PAGE = ROOT.parent / "docs" / "which_encoding.md"
FIGURE = ROOT.parent / "docs" / "which_encoding.png"
LATE = " †"  # a row comparing an arm that failed its record's length rule
SMALL = " ≈"  # a row whose interval lies inside the family's margin


def effects(family: Family) -> list[dict]:
  """Each arm against the reference: the paired difference (sign-adjusted, scaled) with its
  95 % interval and seeds, at defaults and, where the record swept either side, as tuned;
  `tuning` says which sides were tuned, `fair` whether both were tuned alike, and `settled`
  whether both arms passed the record's length rule; `inside_margin` whether its interval lies
  inside ±`margin` (the family's, `margin`; None without a control run)."""
  results = json.loads((ROOT / family.record / "results.json").read_text())
  defaults = family.scores(results)
  rows = _rows(family, defaults, set(), at_defaults=True)
  if family.tuned_scores is not None:
    swept = family.swept(results)
    rows += _rows(family, family.tuned_scores(results), swept, at_defaults=False)
  late = {tuned: family.unsettled(results, tuned) for tuned in (False, True)}
  small = margin(family, defaults)
  for r in rows:
    r["settled"] = not {r["key"], family.reference} & late[r["tuning"] != "defaults"]
    r["margin"] = small
    r["inside_margin"] = bool(small is not None and -small < r["low"] and r["high"] < small)
  return sorted(rows, key=lambda r: -r["difference"])


def margin(family: Family, scores: dict) -> float | None:
  """A tenth of the family's control gap (`stats.equivalence_margin`, the records' rule for
  every "about equal" claim): the best arm's mean at defaults minus the control's, on the
  page's metric and scale; None where the control did not run."""
  if family.control not in scores:
    return None
  mean = lambda by_seed: family.sign * family.scale * np.mean(list(by_seed.values()))
  best = max(mean(by_seed) for arm, by_seed in scores.items() if arm != family.control)
  return stats.equivalence_margin(best - mean(scores[family.control]))


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
        "key": arm,
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


BUDGETS = (("defaults", "at defaults"), ("both tuned", "each tuned"))  # equal budgets only


def _resolved(group: list[dict]) -> tuple[list[str], list[str], list[str]]:
  """(better, worse, alone) of a budget's rows: the arms resolved better and worse than the
  reference after Holm's adjustment over `group`, and those apart by their interval alone."""
  kept = _holm_survivors(group)
  better = [_name(r) for r in kept if r["low"] > 0]
  worse = [_name(r) for r in kept if r["high"] < 0]
  alone = [_name(r) for r in group if (r["low"] > 0 or r["high"] < 0) and r not in kept]
  return better, worse, alone


def recommendation(family: Family, rows: list[dict]) -> str:
  """Plain words, only where the intervals support them, among comparisons where both sides
  had the same budget (both at defaults, or both tuned): an effect is resolved where its
  interval excludes 0 and it survives Holm's adjustment over that budget's rows of the family
  (`_holm_survivors`); one that excludes 0 only on its own is named apart."""
  ref = family.label(family.reference)
  words = []
  for tuning, what in BUDGETS:
    group = [r for r in rows if r["tuning"] == tuning]
    if not group:
      continue
    better, worse, alone = _resolved(group)
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
  ahead = [_name(r) for r in kept if r["tuned"] and r["low"] > 0]
  behind = [_name(r) for r in kept if r["tuned"] and r["high"] < 0]
  if ahead:
    words.append(
      f"{', '.join(ahead)} ahead only with its knob tuned and {ref} at defaults "
      "(not an equal budget: no recommendation)"
    )
  if behind:
    words.append(f"{', '.join(behind)} resolved worse even with its knob tuned")
  return "; ".join(words) + "."


def in_short(results: list[tuple[Family, list[dict]]]) -> list[str]:
  """The page's answer first: per family and equal budget, the arms resolved better and worse
  than its reference (after Holm, as the readings), one sentence on whether any arm beats
  the reference anywhere, and one on how many of the resolved effects between two encodings
  (the control aside) lie inside their family's margin; every word from the tables below."""
  heads = [f"{side} ({what})" for _, what in BUDGETS for side in ("better", "worse")]
  lines = [
    "## In short",
    "",
    "Arms resolved better or worse than each family's reference, at an equal budget (both at "
    "defaults, or each tuned), after Holm's adjustment (the readings below; – where the "
    "record tuned nothing):",
    "",
    "| task family | reference | " + " | ".join(heads) + " |",
    "|---|---|" + "---|" * len(heads),
  ]
  winners, encoded = [], []
  for family, rows in results:
    ref, cells, ahead = family.label(family.reference), [], []
    for tuning, what in BUDGETS:
      group = [r for r in rows if r["tuning"] == tuning]
      encoded += [r for r in _holm_survivors(group) if r["key"] != family.control]
      better, worse, _ = _resolved(group) if group else (None, None, None)
      cells += ["–" if names is None else ", ".join(names) or "none" for names in (better, worse)]
      ahead += [f"{what}, {_few(better)}"] if better else []
    lines.append(f"| {family.name} | {ref} | " + " | ".join(cells) + " |")
    winners += [f"in {family.name}, against {ref}: {'; '.join(ahead)}"] if ahead else []
  lines.append("")
  if winners:
    rest = " In the other families, none." if len(winners) < len(results) else ""
    lines.append(
      "Resolved better than the family's reference, at an equal budget: "
      f"{'. Then '.join(winners)}.{rest}"
    )
  else:
    lines.append(
      f"In none of the {len(results)} families is any encoding resolved better than the "
      "family's sinusoidal reference at an equal budget: on this evidence, the fixed "
      "sinusoids are the encoding to start from, and another one needs its own test on the "
      "task at hand."
    )
  if encoded:
    inside = sum(r["inside_margin"] for r in encoded)
    lines += [
      "",
      f"Of the {len(encoded)} effects between two encodings resolved here (the no-position "
      f"control aside), {inside} lie wholly inside their family's margin (≈): a tenth of what "
      "position itself buys there.",
    ]
  return lines


def _few(names: list[str]) -> str:
  """Up to three names, else their count (the table above lists them)."""
  return ", ".join(names) if len(names) <= 3 else f"{len(names)} arms (named in the table)"


def _name(row: dict) -> str:
  """A row's arm as a reading names it: marked where the row read an arm before it settled,
  and where its interval lies inside the family's margin."""
  return (
    row["arm"] + LATE * (not row.get("settled", True)) + SMALL * row.get("inside_margin", False)
  )


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
    "A row marked ≈ lies wholly inside a tenth of its family's control gap (grey in the plot), "
    'the margin within which every record\'s "about equal" claims call two encodings equal: '
    "resolved or not, its difference is small beside what position itself buys. "
    "The records are CPU-scale reproductions "
    "(each README says how they differ from the papers'); an effect here is evidence about "
    "that task at that scale, not a law.",
    "",
    *in_short(results),
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
        f"| {_name(r)} "
        f"| {stats.signed_interval(r['difference'], r['low'], r['high'])} | {r['n']} "
        f"| {r['tuning']} |"
        for r in rows
      ),
      "",
      f"**Reading**: {recommendation(family, rows)}",
      *_length_note(family, rows),
      *_margin_note(family, rows),
    ]
  return "\n".join(lines) + "\n"


def _length_note(family: Family, rows: list[dict]) -> list[str]:
  """Where an arm (or the reference) failed the record's length rule: which rows that marks."""
  if all(r["settled"] for r in rows):
    return []
  return [
    "",
    f"{LATE.strip()} An arm of this row had not settled at the record's length by its declared "
    "length rule (its metric was still improving over the last stretch; the record's "
    "README): the effect is read at that length, and longer training could change it.",
  ]


def _margin_note(family: Family, rows: list[dict]) -> list[str]:
  """Where a row lies inside the family's margin: the margin and where it comes from."""
  if not any(r["inside_margin"] for r in rows):
    return []
  small = rows[0]["margin"]
  return [
    "",
    f"{SMALL.strip()} The row's whole interval lies inside ±{small:.3g}, a tenth of the control "
    f"gap {small / stats.EQUIVALENCE_SHARE:.3g} (the best arm at defaults against "
    f"{family.label(family.control)} on this metric), the margin within which every record's "
    '"about equal" claims call two encodings equal: resolved or not, the difference is small '
    "beside what position itself buys here (it may still matter for a given use).",
  ]


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
    if rows and rows[0]["margin"] is not None:
      ax.axvspan(-rows[0]["margin"], rows[0]["margin"], color="grey", alpha=0.15, lw=0)
    labels = [f"{_name(r)}: {r['tuning']}" for r in rows]
    ax.set_yticks(y, labels, fontsize=6)
    ax.set_title(f"{family.name}: vs {family.label(family.reference)}", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
  fig.supxlabel(
    "effect against the reference, positive = better (hollow: a side tuned; grey: the "
    "family's margin, a tenth of its control gap)",
    size=8,
  )
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
