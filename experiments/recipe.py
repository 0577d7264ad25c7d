"""A record's training recipe, one for every arm, by declared rules (issue 38).

A recipe taken from one encoding's pilots favours that encoding. So a record that picks its
learning rate trains each encoding it compares (not its no-position control, which then
trains at the chosen rate), at defaults, at each rate of `rates` (on validation data, as the
knob sweep), widens past a winning edge (`plan`), and takes the rate with the best score
averaged over the arms (`choose`), before the sweep and the record train at it. Its length
is checked on the record's own learning curves (`LengthRule`): each encoding's mean curve at
defaults must gain less than a declared tolerance over the last stretch of training.
Results keys of the rate runs: `recipe/lr=<rate>/<arm>/<seed>`
(`experiments.runs.recipe_runs` plans them); each entry records the rate it trained at. A
record whose runs evaluate only at their end checks its length on separate runs instead
(`runs.length_runs`, keys `length/<arm>/<seed>`): each arm at defaults and, where its sweep
chose another value, at that value (`length/<arm>/<knob>=<value>/<seed>`), `LENGTH_SEEDS`,
evaluated along the way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from experiments import stats, sweeps

FACTORS = (0.5, 1.0, 2.0)  # the rates tried: the config's, halved and doubled
WIDEN_FACTOR = 2.0  # a rate added past a winning edge: the base grid's own step
WIDENINGS = 1  # at most this many rates added
PREFIX = "recipe/"
LENGTH = "length/"  # results keys of a length check: `length/<arm>/<seed>` (`runs.length_runs`)
LENGTH_SEEDS = (100, 101)  # a length check's seeds: apart from any record's and sweep's


def rates(base: float, factors: Sequence[float] = FACTORS) -> tuple[float, ...]:
  """The learning rates tried around the config's `base`, ascending."""
  return tuple(sorted(base * f for f in factors))


def run_key(rate: float, arm: str, seed: int) -> str:
  """`recipe/lr=<rate>/<arm>/<seed>`: the results key of one run of the rate choice."""
  return f"{PREFIX}lr={rate:g}/{arm}/{seed}"


def scores(results: dict, score: Callable[[dict], float]) -> dict[float, dict[str, list[float]]]:
  """{rate: {arm: [`score` of each seed's entry]}} of the rate runs in `results` (NaN for a
  run that diverged); the rate is the one the entry recorded (its key's, rounded to 6
  digits, where it has none)."""
  out = {}
  for key, entry in sorted(results.items()):
    if key.startswith(PREFIX):
      setting, *arm, _ = key.removeprefix(PREFIX).split("/")
      got = float("nan") if sweeps.DIVERGED in entry else score(entry)
      rate = float(entry.get("lr", setting.split("=", 1)[1]))
      out.setdefault(rate, {}).setdefault("/".join(arm), []).append(got)
  return out


def overall(by_arm: dict[str, list[float]]) -> float:
  """A rate's score: the mean over arms of each arm's mean over seeds (every arm weighs the
  same, however many seeds it has); NaN if a run diverged."""
  return float(np.mean([np.mean(v) for v in by_arm.values()]))


def choose(by_rate: dict[float, dict[str, list[float]]], *, higher_is_better: bool) -> float:
  """The declared rule: the rate with the best `overall` score; a rate with a diverged run,
  or missing an arm that another rate has (not comparable), ranks last; ties go to the
  smaller rate."""
  sign = 1.0 if higher_is_better else -1.0
  arms = {arm for by_arm in by_rate.values() for arm in by_arm}

  def rank(rate: float) -> tuple[float, float]:
    value = overall(by_rate[rate])
    whole = set(by_rate[rate]) == arms and np.isfinite(value)
    return (sign * value if whole else -np.inf, -rate)

  return max(by_rate, key=rank)


def plan(
  make: Callable[[tuple[float, ...]], list],
  base: tuple[float, ...],
  results: dict,
  score: Callable[[dict], float],
  *,
  higher_is_better: bool,
  widenings: int = WIDENINGS,
) -> list:
  """The rate choice's runs as far as `results` decide them: `make(rates)` for the `base`
  rates, and, once all of them are scored, a rate `WIDEN_FACTOR` past the best where it is
  the smallest or the largest (at most `widenings` added), as the knob sweep widens
  (`sweeps.widen`): a best rate at an edge says only that the optimum may lie beyond it."""
  grid = tuple(sorted(base))
  while True:
    planned = make(grid)
    if any(run.key not in results for run in planned) or len(grid) >= len(base) + widenings:
      return planned
    best = choose(scores({r.key: results[r.key] for r in planned}, score),
                  higher_is_better=higher_is_better)  # fmt: skip
    if best == grid[0]:
      grid = (best / WIDEN_FACTOR, *grid)
    elif best == grid[-1]:
      grid = (*grid, best * WIDEN_FACTOR)
    else:
      return planned


def table(
  by_rate: dict[float, dict[str, list[float]]],
  chosen: float,
  *,
  name: Callable[[str], str],
  cell: Callable[[list[float]], str],
) -> list[str]:
  """A markdown table of the rate choice: one row per rate, one column per arm, the mean over
  arms that the rule reads (through `cell`), the chosen rate marked."""
  arms = sorted({arm for by_arm in by_rate.values() for arm in by_arm})
  lines = [
    "| lr | " + " | ".join(name(a) for a in arms) + " | mean over arms | chosen |",
    "|---|" + "---|" * (len(arms) + 2),
  ]
  for rate, by_arm in sorted(by_rate.items()):
    cells = [cell(by_arm[a]) if a in by_arm else "–" for a in arms]
    mark = "**yes**" if rate == chosen else ""
    lines.append(f"| {rate:g} | " + " | ".join(cells) + f" | {cell([overall(by_arm)])} | {mark} |")
  return lines


def gains(curves: Sequence[Sequence[Sequence[float]]], window: int) -> list[float]:
  """Each seed's gain over its curve's last `window` steps: the last value minus the value at
  `window` steps before the end (curves `[[step, value], ...]`; that step must be evaluated)."""
  out = []
  for curve in curves:
    if not curve:
      raise ValueError("a run without a curve")
    at = dict((int(step), value) for step, value in curve)
    last = max(at)
    if last - window not in at:
      raise ValueError(f"a curve evaluated at {sorted(at)} has no step {last - window}")
    out.append(at[last] - at[last - window])
  return out


TUNED = " (tuned)"  # a tuned reading's key in a length check: `arm (tuned)` beside `arm`


@dataclasses.dataclass(frozen=True)
class LengthRule:
  """A record's declared length rule: an arm has settled where its mean gain over the last
  `window` steps of its curves (in the metric's better direction, times `scale`) is below
  `tolerance`. An arm that has not is read at the record's length, before it settled: its
  claims say so (`experiments.claims.mark_settling`). A record reads it on each encoding's
  runs at defaults; where its tuned runs keep curves too (detection, generation:
  `length_curves`), on those as well, keyed `arm (tuned)` (`TUNED`), and a claim read as
  tuned takes that verdict, else the defaults'."""

  window: int
  tolerance: float
  higher_is_better: bool
  scale: float = 1.0

  def table(
    self,
    curves: dict[str, Sequence[Sequence[Sequence[float]]]],
    *,
    name: Callable[[str], str],
    digits: int = 1,
    unit: str = "",
  ) -> list[str]:
    """The check as a markdown table: per arm (`curves`: {arm: each seed's curve}), the mean
    gain (95 % interval over seeds) over the last `window` steps and over the `window`
    before, and whether the arm settled (shown with `digits` decimals)."""
    lines = [
      f"| encoding | gain over the last {self.window} steps{unit} | over the {self.window} "
      f"before | settled (< {self.tolerance:g}) |",
      "|---|---|---|---|",
    ]
    # n/a: a run without a curve, or one too short for the window (e.g. a --quick run's)
    mark = {True: "yes", False: "**no**", None: "n/a (evaluated at too few steps)"}
    for arm, runs in curves.items():
      last = self._gains(runs)
      before = self._gains([c[: _until(c, self.window)] for c in runs if c])
      cell = lambda v: stats.fmt(v, scale=self.scale, digits=digits) if v else "–"
      lines.append(f"| {name(arm)} | {cell(last)} | {cell(before)} | {mark[self._settled(last)]} |")
    return lines

  def check(self, curves: dict[str, Sequence[Sequence[Sequence[float]]]]) -> dict | None:
    """{arm: True (settled), False (not), or None (its curves too short to read)} of
    `curves`; None where there are no curves (the record checked no length). Where `curves`
    hold tuned readings (`TUNED` keys: `length_curves`), every arm gets one: its own, or its
    defaults' verdict where its tuned runs are its defaults runs."""
    if not curves:
      return None
    checked = {arm: self._settled(self._gains(runs)) for arm, runs in curves.items()}
    if any(arm.endswith(TUNED) for arm in checked):
      checked = {**{a + TUNED: ok for a, ok in checked.items() if not a.endswith(TUNED)}, **checked}
    return checked

  def _settled(self, last: list[float]) -> bool | None:
    """Whether the gains `last` pass the rule (below the tolerance: a NaN gain does not);
    None where there are none to read."""
    return bool(np.mean(last) * self.scale < self.tolerance) if last else None

  def _gains(self, curves) -> list[float]:
    """`gains` in the metric's better direction; [] where a curve lacks a step it needs."""
    sign = 1.0 if self.higher_is_better else -1.0
    try:
      return [sign * g for g in gains(curves, self.window)]
    except ValueError:
      return []


def reading(checked: dict[str, bool | None], tuned: bool) -> tuple[dict[str, bool | None], str]:
  """The length verdicts a claim read as `tuned` (or at defaults) takes from
  `LengthRule.check`'s `checked`: {arm: verdict} of the tuned readings where the check has
  them, else the defaults'; and the suffix ("" or `TUNED`) whose keys they were."""
  suffix = TUNED if tuned and any(arm.endswith(TUNED) for arm in checked) else ""
  kept = {a: ok for a, ok in checked.items() if a.endswith(TUNED) == bool(suffix)}
  return {a.removesuffix(suffix): ok for a, ok in kept.items()}, suffix


def length_curves(arms: Sequence[str], runs: Callable[[str, str], list[dict]]) -> dict:
  """The curves `LengthRule` reads, from each arm's record runs (`runs(arm, at)`, `at` as
  `sweeps.runs_at`): at defaults (as reported where an older record has only tuned runs),
  keyed by arm, and its tuned runs', keyed `arm (tuned)`, where they are other runs; arms
  whose runs kept no curve are left out, but for tuned runs without one beside defaults runs
  with one: those are kept, so that `LengthRule.check` reads them as unchecked (None)."""
  out = {}
  for arm in arms:
    defaults, tuned = runs(arm, "defaults"), runs(arm, "tuned")
    out[arm] = [r.get("curve") for r in defaults or tuned]
    if defaults and tuned and tuned != defaults:
      out[arm + TUNED] = [r.get("curve") for r in tuned]
  return {arm: c for arm, c in out.items() if any(c) or any(out[arm.removesuffix(TUNED)])}


def _until(curve: Sequence[Sequence[float]], window: int) -> int:
  """How many points of `curve` lie at or before `window` steps before its end."""
  last = curve[-1][0]
  return sum(1 for step, _ in curve if step <= last - window)
