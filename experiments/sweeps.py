"""A record's sweep, read from its results: each arm's validation scores per value of its
scale knob, the declared rules that widen its grid and choose a value, and the table of both.

Every encoding has one scale knob (`lfpe.encodings.knob`: Fourier's γ, MLP's input scale, a
sinusoid's temperature, a table's init std, RoPE's θ), so every arm of a comparison can have
the same budget by the same rule: `grid` gives each arm `VALUES` values around its default
(steps of `WIDEN_FACTOR`), `widen` extends an edge that leads, `choose` takes the best mean
validation score. A sweep run's results key is `sweep/<arm>/<knob>=<value>/<seed>`, where the
arm is what the value is chosen for (`lsh/fourier` in generation, a protocol such as
`heldout` in detection); older records name γ alone (`gamma=<γ>`), read the same way.
"""

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from experiments import stats
from lfpe import encodings

WIDEN_FACTOR = 4.0  # a widened grid steps on by the base grids' own ratio
WIDENINGS = 2  # at most this many γ added to each arm's grid
VALUES = 3  # the base grid of every arm: its default and one step of WIDEN_FACTOR each way


def grid(spec: str, values: int = VALUES) -> tuple[float, ...]:
  """The base grid of the knob of `spec`'s encoding: `values` values centred (geometrically)
  on the value `spec` gives it, `WIDEN_FACTOR` apart, ascending; `()` without a knob."""
  found = encodings.knob(spec)
  if found is None:
    return ()
  centre = found[1]
  return tuple(centre * WIDEN_FACTOR ** (k - (values - 1) / 2) for k in range(values))


def _setting(spec: str, value: float) -> str:
  """`<knob>=<value>`: a key's part naming the knob of `spec`'s encoding at `value`."""
  return f"{encodings.knob(spec)[0]}={value:g}"


def _value(setting: str) -> float:
  """The value of a key's `<knob>=<value>` part."""
  return float(setting.split("=", 1)[1])


def run_key(arm: str, spec: str, value: float, seed: int) -> str:
  """`sweep/<arm>/<knob>=<value>/<seed>`: the results key of one sweep run."""
  return f"sweep/{arm}/{_setting(spec, value)}/{seed}"


def at(spec: str, value: float | None) -> str:
  """`spec` with its knob at `value` (`spec` itself for None or its own value)."""
  if value is None or is_own(spec, value):
    return spec
  return encodings.with_options(spec, **{encodings.knob(spec)[0]: value})


def is_own(spec: str, value: float) -> bool:
  """Whether `value` is the value `spec` already gives its knob (a choice of the default)."""
  return math.isclose(encodings.knob(spec)[1], value, rel_tol=1e-6)


def record_key(arm: str, spec: str, value: float | None, seed: int) -> str:
  """A record run's key: `<arm>/<seed>` at `spec`'s own value (the defaults run), else
  `<arm>/<knob>=<value>/<seed>` (a tuned run), so a choice of the default trains nothing new."""
  if value is None or is_own(spec, value):
    return f"{arm}/{seed}"
  return f"{arm}/{_setting(spec, value)}/{seed}"


def is_tuned_key(key: str) -> bool:
  """Whether a record key names a tuned run (`.../<knob>=<value>/<seed>`)."""
  return "=" in key.split("/")[-2] and not key.startswith("sweep/")


def runs_at(results: dict, arm: str, chosen: dict[str, float], at: str) -> list[dict]:
  """`arm`'s record runs `at` "defaults", "tuned" (at its `chosen` value; its defaults runs
  when not swept) or "reported" (what a table row shows: at defaults, or tuned where a
  record, an older edition, has only those)."""
  if at == "reported":
    return runs_at(results, arm, chosen, "defaults") or runs_at(results, arm, chosen, "tuned")
  return arm_runs(results, arm, chosen.get(arm) if at == "tuned" else None)


def arm_runs(results: dict, arm: str, value: float | None = None) -> list[dict]:
  """The record runs of `arm` (by key, in key order): at defaults (`<arm>/<seed>`) for `value`
  None, else those with the knob at `value`: its tuned runs (`<arm>/<knob>=<value>/<seed>`),
  or the defaults runs when `value` is their own (a choice of the default). Each entry has
  its `seed` (from its key where the entry does not hold it), so arms pair by seed."""
  out = []
  for key, entry in sorted(results.items()):
    depth = key.count("/") - arm.count("/")  # 1: `<arm>/<seed>`; 2: `<arm>/<knob>=<v>/<seed>`
    if not key.startswith(f"{arm}/") or depth not in (1, 2):
      continue
    if value is None:
      keep = depth == 1
    elif depth == 2:
      keep = math.isclose(_value(key.split("/")[-2]), value, rel_tol=1e-6)
    else:
      spec = entry.get("posemb")
      keep = bool(spec and encodings.knob(spec)) and is_own(spec, value)
    if keep:
      out.append(entry if "seed" in entry else {**entry, "seed": int(key.rsplit("/", 1)[1])})
  return out


def shared_seeds(results: dict) -> int:
  """How many of the record's first seeds its sweep trained too: 1 + the largest sweep seed
  where the sweep began at seed 0 (before `runs.SWEEP_FIRST_SEED`), else 0."""
  tails = [k.rsplit("/", 1)[1] for k in results if k.startswith("sweep/")]
  seeds = [int(t) for t in tails if t.isdigit()]
  return max(seeds) + 1 if seeds and min(seeds) == 0 else 0


def record_seed(key: str) -> int | None:
  """The seed of a record run's key (`<arm>/.../<seed>`); None for a sweep, a rate or a
  length run (`sweep/`, `recipe/`, `length/`) and for the provenance."""
  seed = key.rsplit("/", 1)[-1]
  prefixed = key.startswith(("sweep/", "recipe/", "length/"))
  return int(seed) if seed.isdigit() and not prefixed else None


def without_seeds(results: dict, seeds: Iterable[int]) -> dict:
  """`results` without the record runs of `seeds`; sweep runs, other prefixed runs
  (`recipe/`, `length/`) and the provenance stay."""
  seeds = set(seeds)
  return {key: entry for key, entry in results.items() if record_seed(key) not in seeds}


def unfitted(results: dict, sweep_seeds: int) -> dict:
  """`results` without the record runs of seeds below `sweep_seeds`: what a sweep that trained
  seeds 0, ..., `sweep_seeds` - 1 (the sweeps begun before `runs.SWEEP_FIRST_SEED`) did not
  fit its choices to."""
  return without_seeds(results, range(sweep_seeds))


DIVERGED = "diverged"  # the field of a sweep run's entry whose training loss went non-finite


def scores(results: dict, score: Callable[[dict], float]) -> dict[str, dict[float, list[float]]]:
  """{arm: {knob value: [`score` of each seed's entry]}}, for every sweep entry of `results`
  (NaN for a run that diverged: `DIVERGED`, written by `runs.execute`)."""
  out = {}
  for key, value in sorted(results.items()):
    if key.startswith("sweep/"):
      *arm, setting, _ = key.removeprefix("sweep/").split("/")
      got = float("nan") if DIVERGED in value else score(value)
      out.setdefault("/".join(arm), {}).setdefault(_value(setting), []).append(got)
  return out


def choose(by_arm: dict[str, dict[float, list[float]]], *, higher_is_better: bool) -> dict:
  """The declared rule, per arm: the γ with the best mean validation score; ties go to the
  smaller γ; a value with a non-finite mean (a diverged seed) ranks last."""
  sign = 1.0 if higher_is_better else -1.0

  def rank(scores: list[float], g: float) -> tuple[float, float]:
    mean = np.mean(scores)
    return (sign * mean if np.isfinite(mean) else -np.inf, -g)

  return {
    arm: max(by_gamma, key=lambda g: rank(by_gamma[g], g)) for arm, by_gamma in by_arm.items()
  }


def widen(
  grids: dict[str, tuple[float, ...]],
  by_arm: dict[str, dict[float, list[float]]],
  *,
  seeds: int,
  higher_is_better: bool,
  limits: dict[str, int],
) -> dict[str, tuple[float, ...]]:
  """The declared edge rule, one step: where every γ of an arm's grid has its `seeds` scores
  and the best (by `choose`) is the grid's smallest (largest), the grid gains that γ divided
  (multiplied) by `WIDEN_FACTOR`, unless it already holds the arm's `limits` γ. A best γ at
  a grid's edge says only that the optimum may lie beyond it: the rule looks there, on
  validation scores alone, before any record run trains at the chosen γ."""
  out = dict(grids)
  for arm, grid in grids.items():
    scored = {g: by_arm.get(arm, {}).get(g, []) for g in grid}
    if len(grid) >= limits[arm] or any(len(v) < seeds for v in scored.values()):
      continue
    best = choose({arm: scored}, higher_is_better=higher_is_better)[arm]
    if best == min(grid):
      out[arm] = (best / WIDEN_FACTOR, *sorted(grid))
    elif best == max(grid):
      out[arm] = (*sorted(grid), best * WIDEN_FACTOR)
  return out


def plan(
  make: Callable[[dict[str, tuple[float, ...]]], list],
  base: dict[str, tuple[float, ...]],
  results: dict,
  score: Callable[[dict], float],
  *,
  seeds: int,
  higher_is_better: bool,
  widenings: int = WIDENINGS,
) -> list:
  """The sweep's runs as far as `results` decide them: `make(grids)` (runs keyed
  `sweep/<arm>/gamma=<γ>/<seed>`) for the `base` grids, widened by `widen` (at most
  `widenings` γ per arm) until it adds nothing. Only the plan's own runs count (not those
  another invocation's flags trained)."""
  grids = {arm: tuple(sorted(grid)) for arm, grid in base.items()}
  limits = {arm: len(grid) + widenings for arm, grid in grids.items()}
  while True:
    planned = make(grids)
    ours = scores({r.key: results[r.key] for r in planned if r.key in results}, score)
    wider = widen(grids, ours, seeds=seeds, higher_is_better=higher_is_better, limits=limits)
    if wider == grids:
      return planned
    grids = wider


def run(plan_now: Callable[[], list], train: Callable[[list], Any], results: dict) -> list:
  """Trains the sweep that `plan_now()` gives until all of it is in `results` (`train` adds
  every run it is given, or raises); a round that widens a grid plans more runs. Returns
  the final plan. Every plan goes through `train` at least once, a finished one too, so that
  `runs.execute` checks each finished or adopted run against its config
  (`runs.check_encodings`) before a record reads its choice."""
  planned = plan_now()
  while True:
    train(planned)
    planned, before = plan_now(), planned
    if [r.key for r in planned] == [r.key for r in before]:  # trained (`train`), not widened
      return planned


def tuned_note(
  tuned: Sequence[str], untuned: Sequence[str], by_arm: dict[str, dict], rule: str, knob: str = "γ"
) -> str:
  """A claim's `tuned` field: which of its arms had their `knob` swept (`tuned`, by display
  name) and by what budget (values per arm and seeds, from the sweep's own scores `by_arm`,
  which holds the claim's own arms' grids only: another arm's widened grid is not its budget)
  and `rule`, and which ran at defaults (`untuned`); `stats.AT_DEFAULTS` when none was."""
  if not tuned or not by_arm:  # no sweep in these results: nothing was tuned
    return stats.AT_DEFAULTS
  tuned = list(dict.fromkeys(tuned))  # one arm under two policies (PI vs extrapolation) once
  values = sorted({len(grid) for grid in by_arm.values()})
  seeds = sorted({len(v) for grid in by_arm.values() for v in grid.values()})
  span = lambda xs: f"{xs[0]}" if len(xs) == 1 else f"{xs[0]}-{xs[-1]}"
  note = f"{', '.join(tuned)}: {knob} over {span(values)} values x {span(seeds)} seeds, {rule}"
  return note + (f"; {', '.join(untuned)} at defaults" if untuned else "")


def require(chosen: dict[str, float], arms: Iterable[str]) -> None:
  """Stops the record if the sweep chose no γ for one of `arms` (no silent default γ)."""
  missing = sorted(set(arms) - set(chosen))
  if missing:
    sys.exit(f"the γ sweep chose nothing for {missing}: run it with --sweep-seeds >= 1")


def table(
  by_arm: dict[str, dict[float, list[float]]],
  chosen: dict[str, float],
  *,
  columns: Sequence[str],
  name: Callable[[str], str],
  cell: Callable[[list[float]], str],
  scale: float = 1.0,
  knob: str = "γ",
) -> list[str]:
  """A markdown table of the sweep, one row per arm and γ (ascending), the chosen γ marked:
  `columns` names the arm's and the score's columns, `name` an arm, `cell` its scores. Then,
  per arm, how far the choice is decided: the chosen γ's mean minus the runner-up's (Welch
  95 %, times `scale`), and whether the chosen γ sits at the edge of the swept grid."""
  arm_column, score_column = columns
  lines = [f"| {arm_column} | {knob} | {score_column} | chosen |", "|---|---|---|---|"]
  notes = []
  for arm, by_gamma in by_arm.items():
    for gamma, values in sorted(by_gamma.items()):
      mark = "**yes**" if gamma == chosen[arm] else ""
      lines.append(f"| {name(arm)} | {gamma:g} | {cell(values)} (n = {len(values)}) | {mark} |")
    notes.append(_decided(name(arm), by_gamma, chosen[arm], scale, knob))
  return [*lines, "", *notes]


def _decided(
  name: str, by_gamma: dict[float, list[float]], best: float, scale: float, knob: str = "γ"
) -> str:
  """One line: the chosen value against the runner-up (by mean), and an edge warning."""
  line = f"- {name}: {knob} = {best:g} chosen"
  diverged = sorted(g for g, v in by_gamma.items() if not np.all(np.isfinite(v)))
  others = {g: v for g, v in by_gamma.items() if g != best and g not in diverged}
  if others:
    mean = lambda g: abs(np.mean(by_gamma[g]) - np.mean(by_gamma[best]))
    runner_up = min(others, key=mean)
    d, h = stats.difference(by_gamma[best], others[runner_up], scale=scale)
    spread = f"± {h:.3g} (Welch 95 %)" if np.isfinite(h) else "(one seed: no interval)"
    line += f"; minus {knob} = {runner_up:g} (the nearest mean): {d:+.3g} {spread}"
  if diverged:
    line += f"; diverged (a non-finite score) at {knob} = {', '.join(f'{g:g}' for g in diverged)}"
  if len(by_gamma) > 1 and best in (min(by_gamma), max(by_gamma)):
    line += "; **at the edge of the swept grid**: the optimum may lie beyond it"
  return line + "."
