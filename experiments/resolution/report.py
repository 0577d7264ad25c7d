"""The resolution benchmark's leaderboard, sweep, plot and claims.json, from results.json.

Cells are test accuracy (%) as mean ± 95 % Student-t interval over seeds, read two ways:
every arm at its defaults, and every arm at the knob value its sweep chose (`run.py`: the
same budget and rule for each). Claims compare accuracy at 2x and 3x the training size,
paired by seed (seed s of every arm trains on the same data order), and the control
compares the best arm with `none` at the training size.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable

import numpy as np

from experiments import claims as claims_table
from experiments import stats, sweeps
from experiments.resolution import plan
from experiments.resolution.comparisons import PUBLISHED, READ_OFF
from experiments.resolution.figure import draw_curves
from lfpe import encodings

RULE = "the best mean validation accuracy at 64 px (the first 2,000 training scenes)"
# Coordinate modes that span one range at every grid size (the leaderboard's legend).
NORMALISED = ("unit", "centered", "dinov3")
READINGS = {"defaults": "every arm at its defaults", "tuned": "every arm at its chosen knob"}


def validation_accuracy(entry: dict) -> float:
  return entry["validation"]


def sweep(results: dict) -> dict[str, dict[float, list[float]]]:
  """{arm slug: {knob value: [validation accuracy per seed]}}."""
  return sweeps.scores(results, validation_accuracy)


def chosen(results: dict) -> dict[str, float]:
  """The shared rule, per arm swept: the knob value with the best mean validation accuracy."""
  return sweeps.choose(sweep(results), higher_is_better=True)


def cells(results: dict, at: str) -> dict:
  """`{(arm, policy): {size: {seed: accuracy}}}` (seeds ascending) of the runs `at`
  "defaults" or "tuned" (`sweeps.runs_at`)."""
  picks = chosen(results)
  out = collections.defaultdict(lambda: collections.defaultdict(dict))
  for arm in plan.arms():
    for entry in sweeps.runs_at(results, arm.slug, picks, at):
      for policy, by_size in entry["scores"].items():
        for size, acc in by_size.items():
          out[(arm.name, policy)][size][entry["seed"]] = acc
  return {
    row: {size: dict(sorted(s.items())) for size, s in by_size.items()}
    for row, by_size in out.items()
  }


def leaderboard(results: dict) -> str:
  """Markdown: per reading, aligned and unaligned sizes apart; one row per (arm, policy), with
  its seeds (a record part-way has fewer for some arms), and a mixed-resolution arm's cells at
  a size it trained on marked so (not an unseen size)."""
  parts, shown, trained = [], set(), trained_elsewhere()
  for at, reading in READINGS.items():
    rows = cells(results, at)
    if not rows:
      continue
    shown |= {arm for arm, _ in rows}
    present = {int(size) for by_size in rows.values() for size in by_size}
    for kind, every in (("aligned", plan.ALIGNED), ("unaligned", plan.UNALIGNED)):
      sizes = [s for s in every if s in present]
      if not sizes:
        continue
      lines = [
        f"### {reading}, {kind} sizes (test accuracy %, mean ± 95 % CI over the row's seeds; "
        f"trained at {plan.TRAIN_SIZE} px)",
        "",
        "| arm | policy | seeds | " + " | ".join(f"{s} px" for s in sizes) + " |",
        "|---|---|---|" + "---|" * len(sizes),
      ]
      for (arm, policy), by_size in rows.items():
        counts = sorted({len(by_size[str(s)]) for s in sizes if str(s) in by_size})
        seeds = "-".join(str(n) for n in dict.fromkeys((counts[0], counts[-1]))) if counts else "0"
        values = [
          stats.fmt(list(by_size[str(s)].values()), scale=100) + " (trained)" * (s in trained[arm])
          if str(s) in by_size
          else "-"
          for s in sizes
        ]
        lines.append(f"| {arm} | {policy} | {seeds} | " + " | ".join(values) + " |")
      parts.append("\n".join(lines))
  return "\n\n".join([*parts, legend(shown)]) + "\n" if parts else "\n"


def trained_elsewhere() -> dict[str, set[int]]:
  """Each arm's training sizes besides `plan.TRAIN_SIZE` (a mixed-resolution arm's): at
  those a test size is not unseen."""
  return {a.name: set(a.train_sizes) - {plan.TRAIN_SIZE} for a in plan.arms()}


def legend(shown: set[str]) -> str:
  """What the leaderboard's policy names and marks mean, naming the `shown` arms whose
  coordinates are normalised (a reader took their `extrapolate` for positions past the
  trained ones)."""
  normalised = [
    f"`{a.name}`"
    for a in plan.arms()
    if a.name in shown and a.options.get("coords_mode") in NORMALISED
  ]
  kept = (
    f"; {', '.join(normalised)} normalise each image's coordinates, so theirs stay in the "
    "trained range at every size"
  )
  return (
    "`extrapolate`: the encoding meets the new grid as it is, past the trained positions for "
    "arms on index coordinates"
    + (kept if normalised else "")
    + ". `-`: the policy does not apply at that size (PI, NTK and YaRN only stretch positions "
    "to a grid larger than the training one). (trained): a size a mixed-resolution arm "
    "trained on."
  )


def sweep_table(results: dict) -> str:
  """The sweep: validation accuracy per knob value, the choice marked (empty without one)."""
  by_arm = sweep(results)
  if not by_arm:
    return ""
  spec = lambda slug: next(
    e["posemb"] for k, e in results.items() if k.startswith(f"sweep/{slug}/")
  )
  names = {a.slug: a.name for a in plan.arms()}
  lines = sweeps.table(
    by_arm,
    chosen(results),
    columns=("arm (knob)", "validation accuracy (%)"),
    name=lambda slug: f"{names[slug]} ({encodings.knob(spec(slug))[0]})",
    cell=lambda v: stats.fmt(v, scale=100),
    scale=100,
    knob="knob",
  )
  return f"### The sweep ({RULE})\n\n" + "\n".join(lines) + "\n"


POWER_TARGET = 2.0  # points: the difference the issue asks the record to be able to detect


def _two_seeds(rows: dict, arms: tuple, size: str) -> bool:
  """Whether the `(arm, policy)`s of `arms` share two seeds or more at `size` in `rows`
  (`cells`): a cell not run yet, or of one seed, gives no interval, and arms that share fewer
  would be compared unpaired (`stats.seed_paired`), over runs of different seeds."""
  seeds = [set(rows.get(arm, {}).get(size, {})) for arm in arms]
  return len(set.intersection(*seeds)) >= 2


def _best_arm(rows: dict) -> tuple | None:
  """The `(arm, policy)` of `rows` (`cells`), the control aside, with the highest mean test
  accuracy at the training size among those that share two seeds there with the control (an
  interval): an arm ahead by chance on seeds the control has not run would leave the control
  claim untested. None before any does."""
  train, control = str(plan.TRAIN_SIZE), ("none", "extrapolate")
  scored = [r for r in rows if r[0] != "none" and _two_seeds(rows, (r, control), train)]
  return max(scored, key=lambda r: np.mean(list(rows[r][train].values())), default=None)


def recipe_check(results: dict) -> str:
  """Markdown: the recipe's length rule (README, "Recipe") on the record's own runs: the best
  arm at defaults (by mean test accuracy at the training size, the control aside) inside
  `plan.RECIPE_BAND`; empty before any arm has two seeds there."""
  train, (low, high) = str(plan.TRAIN_SIZE), plan.RECIPE_BAND
  rows = cells(results, "defaults")
  best = _best_arm(rows)
  if best is None:
    return ""
  values = list(rows[best][train].values())
  holds = low <= np.mean(values) <= high
  line = (
    f"**The recipe's length rule** (the best arm at defaults at "
    f"{100 * low:.0f}-{100 * high:.0f} % at {train} px): the best is {best[0]} at "
    f"{stats.fmt(values, scale=100)} % over "
    f"{len(values)} seeds: {'holds' if holds else '**does not hold**'}."
  )
  tuned = cells(results, "tuned") if chosen(results) else {}
  best_tuned = _best_arm(tuned)
  if best_tuned is not None:  # the rule reads defaults; the tuned best says how near the ceiling
    values = list(tuned[best_tuned][train].values())
    line += (
      f" Each arm tuned (among arms with two tuned seeds or more), the best is {best_tuned[0]} "
      f"at {stats.fmt(values, scale=100)} % over {len(values)} seeds (the ceiling is 100)."
    )
  return line + "\n"


def power_table(results: dict) -> str:
  """Markdown: for each published comparison at each claim size (both arms at defaults), the
  paired sd of the per-seed differences, the minimum detectable difference at this record's
  seeds, and the seeds a paired test would need for `POWER_TARGET` points (80 % power, 5 %
  two-sided; `stats.seeds_needed`)."""
  rows = cells(results, "defaults")
  lines = []
  for _, _, text, a, b in PUBLISHED:
    for size in map(str, plan.CLAIM_SIZES):
      if not _two_seeds(rows, (a, b), size):
        continue
      va, vb, paired = stats.seed_paired(rows[a][size], rows[b][size])
      if not paired:
        continue
      sd = float(np.std(100 * (np.asarray(va) - np.asarray(vb)), ddof=1))
      half = stats.paired_difference(va, vb, scale=100)[1]
      needed = stats.seeds_text(sd, POWER_TARGET)
      mdd = stats.minimum_detectable(half, len(va) - 1)
      lines.append(f"| {text} | {size} px | {len(va)} | {sd:.1f} | {mdd:.1f} | {needed} |")
  if not lines:
    return ""
  head = [
    f"### Power (at defaults; seeds for a {POWER_TARGET:g}-point difference, 80 %, paired)",
    "",
    "| comparison | size | seeds | paired sd (points) | detectable now (points) | seeds needed |",
    "|---|---|---|---|---|---|",
  ]
  return "\n".join(head + lines) + "\n"


def claims(results: dict) -> list[dict]:
  """claims.json: per reading, the control, then `PUBLISHED` at each of `plan.CLAIM_SIZES`,
  where both cells have two seeds or more. The tuned reading is given only where an arm of
  it was swept."""
  out = []
  train, picks, by_arm = str(plan.TRAIN_SIZE), chosen(results), sweep(results)
  slugs = {a.name: a.slug for a in plan.arms()}
  for at in READINGS:
    rows = cells(results, at)
    best = _best_arm(rows)
    if best is None:
      continue
    tested = [("lfpe", "control", "position is needed: the best arm beats `none`", best,
               ("none", "extrapolate"), train)]  # fmt: skip
    tested += [(p, i, t, a, b, str(s)) for p, i, t, a, b in PUBLISHED for s in plan.CLAIM_SIZES]
    for paper, item, text, a, b, size in tested:
      swept = [name for name, _ in (a, b) if slugs[name] in picks]
      if at == "tuned" and not swept:
        continue  # neither arm swept: its tuned reading is its defaults one
      if not _two_seeds(rows, (a, b), size):
        continue
      ratio = int(size) / plan.TRAIN_SIZE
      note = stats.AT_DEFAULTS
      if at == "tuned":
        untuned = [name for name, _ in (a, b) if name not in swept]
        own = {slugs[name]: by_arm[slugs[name]] for name in swept}  # the claim's arms' budget
        note = sweeps.tuned_note(swept, untuned, own, RULE, knob="each one's knob")
      text = f"{text} at {ratio:g}x ({size} px)" + " (each tuned)" * (at == "tuned")
      source = "table" if item in READ_OFF else "text"
      out.append(
        accuracy_claim(
          paper,
          item,
          text,
          rows,
          a,
          b,
          size,
          tuned=note,
          source=source,
          control_gap=control_gap(rows, size),
        )
      )
  return out


def control_gap(rows: dict, size: str) -> float | None:
  """The best `(arm, policy)`'s mean test accuracy at `size` px minus the control's (None where
  the control did not run there): the base of the margin of every claim at that size
  (`stats.claim`: a difference inside a tenth of it is inside the about-equal margin)."""
  control = ("none", "extrapolate")
  mean = lambda row: np.mean(list(rows[row][size].values()))
  if size not in rows.get(control, {}):
    return None
  scored = [mean(row) for row in rows if row[0] != "none" and size in rows[row]]
  return float(max(scored) - mean(control)) if scored else None


def accuracy_claim(
  paper,
  item,
  text,
  rows: dict,
  a,
  b,
  size: str,
  *,
  tuned: str,
  source: str = "text",
  control_gap: float | None = None,
) -> dict:
  """`stats.claim` that `(arm, policy)` `a` scores a higher test accuracy than `b` at `size`
  px, paired on the seeds both ran (`stats.seed_paired`; both editions' claims), with the
  record's control gap (`control_gap()`) where it has one."""
  a_values, b_values, paired = stats.seed_paired(rows[a][size], rows[b][size])
  return stats.claim(
    paper=paper,
    item=item,
    text=text,
    metric=f"test accuracy at {size} px (points)",
    a=" / ".join(a),
    b=" / ".join(b),
    a_values=a_values,
    b_values=b_values,
    paired=paired,
    scale=100,
    ceiling=100,
    tuned=tuned,
    source=source,
    control_gap=control_gap,
  )


# Panels of the plot: arms whose name starts with one of these prefixes (`none`, the
# control, is drawn in every panel).
FAMILIES = (
  ("learned tables", ("embed_",)),
  ("sinusoids and Fourier", ("sine_2d", "fourier")),
  ("2-D RoPE", ("rope_",)),
)


def plot(results: dict, path: str) -> None:
  """Accuracy against test size, each arm tuned: a panel per family of encodings (the control
  in each), 95 % bands clipped to [0, 100]; aligned sizes marked on the axis, a
  mixed-resolution arm's other training sizes by open circles."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  rows = cells(results, "tuned")
  fig, axes = plt.subplots(1, len(FAMILIES), figsize=(4.4 * len(FAMILIES), 5.0), squeeze=False)
  for ax, (family, prefixes) in zip(axes[0], FAMILIES, strict=True):
    draw_curves(
      ax,
      rows,
      prefixes,
      solid=("extrapolate", "bicubic_pytorch"),
      train_size=plan.TRAIN_SIZE,
      trained=trained_elsewhere(),
      ticks={s: f"{s}" if s in plan.ALIGNED else f"({s})" for s in plan.TEST_SIZES},
      tick_style={"fontsize": 7, "rotation": 45},
      title=f"{family} (each arm tuned)",
      xlabel=f"test size (px; trained at {plan.TRAIN_SIZE}; unaligned sizes in parentheses)",
    )
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write(results: dict, out: str) -> None:
  """leaderboard.md (the leaderboard, the recipe's check, the sweep, the power table),
  claims.json and accuracy_vs_size.png into `out`, and the README's blocks."""
  board = "\n".join(
    p
    for p in (
      leaderboard(results),
      recipe_check(results),
      sweep_table(results),
      power_table(results),
      "\n".join(claims_table.rereads_markdown(claims, results)),
    )
    if p
  )
  write_files(out, claims(results), board, lambda path: plot(results, path))


def write_files(out: str, entries: list[dict], board: str, draw: Callable[[str], None]) -> None:
  """leaderboard.md (`board` and the claims' table), claims.json and accuracy_vs_size.png
  (`draw(path)`) into `out`, and its README's `leaderboard` and `claims` blocks, when it
  has them (both editions)."""
  with open(os.path.join(out, "leaderboard.md"), "w") as f:
    f.write(board + "\n### Claims\n\n" + claims_table.markdown(entries) + "\n")
  claims_table.write(entries, out)
  claims_table.update_readme(out, {"leaderboard": board})
  draw(os.path.join(out, "accuracy_vs_size.png"))
