"""The intervals every experiment reports: Student t over seeds, Welch for differences."""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, optimize, stats


def interval(values, *, scale: float = 1.0, one_run: bool = False) -> tuple[float, float]:
  """Mean and 95 % half-width of `values * scale` (Student t over seeds; nan for one value):
  of the mean (confidence interval) or, with `one_run`, of one more run (prediction)."""
  x = scale * np.asarray(values, np.float64)
  if len(x) < 2:
    return float(x.mean()), float("nan")
  spread = np.sqrt(1 + 1 / len(x)) if one_run else np.sqrt(1 / len(x))
  return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) * spread)


def difference(a, b, *, scale: float = 1.0) -> tuple[float, float]:
  """Mean of `a` minus mean of `b` and its 95 % half-width (Welch), times `scale`."""
  a, b = scale * np.asarray(a, np.float64), scale * np.asarray(b, np.float64)
  if len(a) < 2 or len(b) < 2:
    return float(a.mean() - b.mean()), float("nan")
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  if va + vb == 0:
    return float(a.mean() - b.mean()), 0.0
  dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  return float(a.mean() - b.mean()), float(stats.t.ppf(0.975, dof) * np.sqrt(va + vb))


def seed_paired(a: dict, b: dict) -> tuple[list[float], list[float], bool]:
  """Two arms' `{seed: score}` as a claim compares them: paired on their common seeds when
  they share at least two (seed s of every arm shares its data order and init stream; runs of
  one arm without a partner are left out), else every run of each, unpaired (Welch)."""
  common = sorted(set(a) & set(b))
  if len(common) >= 2:
    return [a[s] for s in common], [b[s] for s in common], True
  return [a[s] for s in sorted(a)], [b[s] for s in sorted(b)], False


def fmt(values, *, scale: float = 1.0, digits: int = 1) -> str:
  """`mean ± half-width` (just the mean for one value)."""
  mean, half = interval(values, scale=scale)
  return f"{mean:.{digits}f}" if np.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"


def signed_interval(difference: float, low: float, high: float) -> str:
  """`+d [low, high]`, three significant figures, trailing zeros kept (-1.00, not -1)."""
  sig = lambda v: f"{v:+#.3g}".rstrip(".")  # noqa: E731
  return f"{sig(difference)} [{sig(low)}, {sig(high)}]"


def paired_difference(a, b, *, scale: float = 1.0) -> tuple[float, float]:
  """Mean of `a - b` over pairs (the same seed and data in both arms) and its 95 % half-width
  (Student t on the n differences), times `scale`."""
  d = scale * (np.asarray(a, np.float64) - np.asarray(b, np.float64))
  return interval(d)


def power(noncentrality: float, dof: float, alpha: float = 0.05) -> float:
  """The probability that a two-sided Student t test at level `alpha` rejects when the true
  difference is `noncentrality` standard errors: P(|T'| > t_{1-alpha/2}), T' noncentral t.

  T' = (Z + noncentrality) / (W / sqrt(dof)) with W ~ chi(dof), so the power is the mean over
  W of Φ(nc − t·W/√dof) + Φ(−nc − t·W/√dof), integrated against chi's density in closed form
  (scipy's `nct` is NaN at 1 dof and a large noncentrality, where the records' pilots sit).
  """
  t = stats.t.ppf(1 - alpha / 2, dof)
  log_norm = (dof / 2 - 1) * math.log(2) + math.lgamma(dof / 2)
  phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))  # noqa: E731

  def rejects(w: float) -> float:  # chi(dof)'s density at w times the test's rejection
    if w <= 0:
      return 0.0
    density = math.exp((dof - 1) * math.log(w) - w * w / 2 - log_norm)
    scale = t * w / math.sqrt(dof)
    return density * (phi(noncentrality - scale) + phi(-noncentrality - scale))

  mode = math.sqrt(max(dof - 1, 0.0))  # chi's mode; its sd is below 1, so 20 past it is all
  return float(integrate.quad(rejects, 0.0, mode + 20, points=[mode], limit=200)[0])


def minimum_detectable(half_width: float, dof: float, power_goal: float = 0.8) -> float:
  """The smallest true difference a two-sided 5 % t test finds with probability
  `power_goal`, given the 95 % half-width of the estimate: k·SE, with k the noncentrality at
  which `power` reaches the goal (exact: 16 % above the shortcut (t_0.975 + t_power)·SE at
  1 dof, 5 % at 2, 1 % at 4)."""
  if not np.isfinite(half_width) or dof <= 0:
    return float("nan")
  t = stats.t.ppf(0.975, dof)
  high = 2 * (t + stats.t.ppf(power_goal, dof))  # the shortcut's k is below the exact one
  k = optimize.brentq(lambda k: power(k, dof) - power_goal, 0.0, high, xtol=1e-10)
  return float(k * half_width / t)


def seeds_needed(paired_sd: float, difference: float, power_goal: float = 0.8, most: int = 1000):
  """The fewest seeds n (>= 2) whose paired comparison detects `difference` (same units as
  `paired_sd`, the sd of per-seed differences a pilot measured) with probability
  `power_goal` at 5 % two-sided: the smallest n whose t test on n − 1 dof has that `power`
  at noncentrality `difference`·√n / sd. The search starts at the normal approximation
  (z_0.975 + z_power)²·sd²/difference², a lower bound. ValueError past `most`."""
  if paired_sd < 0 or difference <= 0:
    raise ValueError(f"seeds_needed: paired_sd={paired_sd} >= 0 and difference={difference} > 0.")
  if paired_sd == 0:
    return 2
  z = stats.norm.ppf(0.975) + stats.norm.ppf(power_goal)
  start = max(2, int((z * paired_sd / difference) ** 2))
  for n in range(start, most + 1):
    if power(difference * np.sqrt(n) / paired_sd, n - 1) >= power_goal:
      return n
  raise ValueError(
    f"seeds_needed: more than {most} seeds for {difference} at paired sd {paired_sd}; "
    "the task must change, not the seed count."
  )


def paired_sd(entry: dict) -> float:
  """The sd of a paired claim's per-seed differences (claims.json's `n` pairs), read back from
  its 95 % interval: half-width · √n / t_0.975 (n − 1 dof), the inverse of
  `paired_difference`; what `seeds_needed` takes."""
  n, half = entry["n"], (entry["ci_high"] - entry["ci_low"]) / 2
  return float(half * np.sqrt(n) / stats.t.ppf(0.975, n - 1))


def seeds_text(sd: float, difference: float) -> str:
  """`seeds_needed` for a table: '2' with no spread, '> 1000' past its limit."""
  if sd == 0:
    return "2"
  try:
    return str(seeds_needed(sd, difference))
  except ValueError:
    return "> 1000"


VERDICTS = ("reproduced", "contradicted", "unresolved")


def verdict(ci_low: float, ci_high: float, direction: int = 1, margin: float = 0.0) -> str:
  """'reproduced' when the interval of (a - b) excludes 0 on the paper's side (`direction`
  +1: the paper says a > b; -1: a < b), 'contradicted' on the other side, else 'unresolved'.

  `direction=0` is a claim that a and b are about equal, an equivalence test with the
  `margin` declared with the claim: 'reproduced' when the whole interval lies within
  ±`margin`, 'contradicted' when it lies wholly outside (the difference is known to exceed
  the margin; with no margin, when it excludes 0), else 'unresolved'. An interval inside the
  margin that excludes 0 shows a difference too small to matter: still 'reproduced'."""
  if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
    return "unresolved"
  if direction == 0:
    if ci_low > margin or ci_high < -margin:
      return "contradicted"
    return "reproduced" if -margin < ci_low and ci_high < margin else "unresolved"
  if ci_low > 0 or ci_high < 0:
    return "reproduced" if (ci_low > 0) == (direction > 0) else "contradicted"
  return "unresolved"


def p_value(diff: float, half: float, dof: float) -> float:
  """Two-sided p of "a − b = 0" from the difference, its 95 % half-width and its degrees of
  freedom (the t test the interval inverts): 1 when there is no spread and no difference."""
  if not (np.isfinite(half) and np.isfinite(dof)) or dof <= 0:
    return float("nan")
  if half == 0:
    return 1.0 if diff == 0 else 0.0
  se = half / stats.t.ppf(0.975, dof)
  return float(2 * stats.t.sf(abs(diff) / se, dof))


def holm(entries: list[dict], alpha: float = 0.05) -> list[str]:
  """The Holm-adjusted verdict of each entry in one family (an experiment's claims.json):
  directional claims (`direction` ±1) are tested step-down on their `p_value`s at family-wise
  level `alpha` (a rejection keeps the plain verdict's side, 'reproduced' or 'contradicted';
  the rest are 'unresolved'); equivalence claims (`direction` 0) and claims contradicted by
  the failing arm at the ceiling (no test: an observation) keep their plain verdict, marked
  as not adjusted. Entries that repeat one test on the same runs (a claim's "each tuned"
  reading where every arm chose its defaults) count once in the family: Holm's m is the
  number of distinct hypotheses, not of rows."""
  adjusted = lambda e: e.get("direction", 1) != 0 and not e.get("failing_arm_at_ceiling")
  rows: dict[tuple, list[int]] = {}
  for i, e in enumerate(entries):
    if adjusted(e) and np.isfinite(e.get("p_value", float("nan"))):
      rows.setdefault(_hypothesis(e), []).append(i)
  tested = sorted((entries[same[0]]["p_value"], same) for same in rows.values())
  out = ["unresolved" if adjusted(e) else f"{e['verdict']} (not adjusted)" for e in entries]
  for rank, (p, same) in enumerate(tested):
    if p > alpha / (len(tested) - rank):
      break
    for i in same:
      out[i] = entries[i]["verdict"]
  return out


def _hypothesis(entry: dict) -> tuple:
  """What makes two claims one test: the same arms, metric and side, and the same numbers."""
  keys = ("a", "b", "metric", "direction", "difference", "ci_low", "ci_high", "n", "p_value")
  return tuple(repr(entry.get(k)) for k in keys) if "difference" in entry else (id(entry),)


AT_DEFAULTS = "none: every arm at its defaults"
EQUIVALENCE_SHARE = 0.1  # "about equal": within a tenth of what position buys on the metric


def equivalence_margin(control_gap: float) -> float:
  """The one margin rule of every "about equal" claim: `EQUIVALENCE_SHARE` of the control
  gap, |best encoding − no position| on the same metric in the same record. The papers name
  no smallest meaningful difference, so the margin is tied to the effect the task is about:
  two encodings that differ by under a tenth of what position itself buys do about equally
  well, in any units and at any scale of the run."""
  return EQUIVALENCE_SHARE * abs(control_gap)


SOURCES = ("text", "table")  # a claim the paper states in words, or lfpe's reading of a table


def claim(
  *,
  paper: str,
  item: str,
  text: str,
  metric: str,
  a: str,
  b: str,
  a_values,
  b_values,
  direction: int = 1,
  control_gap: float | None = None,
  paired: bool = False,
  scale: float = 1.0,
  ceiling: float | None = None,
  paper_value: float | None = None,
  tuned: str,
  source: str = "text",
  b_fails: bool = False,
) -> dict:
  """One entry of an experiment's claims.json: the paper's claim that `a` beats `b` on
  `metric` (or loses to it, `direction=-1`, or matches it, `direction=0`, within
  `equivalence_margin(control_gap)` in the units of the difference), its difference a - b
  with the 95 % interval (Welch, or paired when the arms share seeds and data), n, its
  degrees of freedom and two-sided p, the verdict, and the minimum detectable difference at
  this n (None when every run scored alike: no spread to size it from). With the metric's
  `ceiling` (scaled units), `at_ceiling` says whether both arms sit within 0.5 % of it,
  where the metric cannot show a difference either way. `b_fails`: the paper says arm `b`
  fails at the task (it sits far below `a`); if `b` reaches the `ceiling` anyway, the claim
  is `contradicted` whatever the interval (`failing_arm_at_ceiling`): the arm measured
  succeeding is the paper's evidence against itself, even when `a` is at the ceiling too.
  A directional claim given its record's `control_gap` as well carries the same margin and
  `inside_margin`: its whole interval inside ±margin, so that, resolved or not, the
  difference is smaller than the margin within which an "about equal" claim calls two arms
  equal (small beside what position buys; its verdict stands).

  `paper_value`: the paper's own a − b where it reports numbers, else None (written as null,
  so every row says whether the paper gave one), and `ratio_to_paper` the measured difference
  over it (null without one, or where it is 0); `source`: 'text' (the paper states the
  claim) or 'table' (lfpe's reading of a table's numbers); `tuned`: which arms were tuned
  and by which rule, or `AT_DEFAULTS` (required: every claim says how fair its comparison is).
  `experiments.claims.write` adds the family's Holm verdicts."""
  if source not in SOURCES:
    raise ValueError(f"claim source={source!r}: one of {SOURCES}.")
  if direction == 0 and control_gap is None:
    raise ValueError(
      f"claim {text!r}: an equivalence claim (direction=0) takes control_gap "
      "(|best encoding − no position| on its metric), from which its margin follows."
    )
  if b_fails and ceiling is None:
    raise ValueError(f"claim {text!r}: b_fails needs the metric's ceiling.")
  margin = 0.0 if control_gap is None else equivalence_margin(scale * control_gap)
  a_values, b_values = np.asarray(a_values, np.float64), np.asarray(b_values, np.float64)
  if paired:
    diff, half = paired_difference(a_values, b_values, scale=scale)
    dof = len(a_values) - 1
  else:
    diff, half = difference(a_values, b_values, scale=scale)
    va, vb = a_values.var(ddof=1) / len(a_values), b_values.var(ddof=1) / len(b_values)
    pooled = len(a_values) + len(b_values) - 2  # no spread in either arm: Welch's dof is 0/0
    dof = (
      (va + vb) ** 2 / (va**2 / (len(a_values) - 1) + vb**2 / (len(b_values) - 1))
      if va + vb
      else pooled
    )
  low, high = diff - half, diff + half
  ratio = diff / paper_value if paper_value else None  # None: no number, or a paper's 0
  reported = {"paper_value": paper_value, "ratio_to_paper": ratio}
  top = {}
  if ceiling is not None:
    near = lambda v: scale * np.mean(v) >= ceiling - 0.005 * abs(ceiling)
    top = {"at_ceiling": bool(near(a_values) and near(b_values))}
    if b_fails:
      top |= {"b_fails": True, "failing_arm_at_ceiling": bool(near(b_values))}
  return {
    "paper": paper,
    "item": item,
    "claim": text,
    "metric": metric,
    "a": a,
    "b": b,
    "difference": diff,
    "ci_low": low,
    "ci_high": high,
    "n": [len(a_values), len(b_values)] if not paired else len(a_values),
    "paired": paired,
    "dof": float(dof),
    "p_value": p_value(diff, half, dof),
    "direction": direction,
    **_sized(low, high, direction, margin, control_gap, scale),
    "verdict": _claim_verdict(low, high, direction, margin, top),
    "minimum_detectable": minimum_detectable(half, dof) if half > 0 else None,
    "source": source,
    "tuned": tuned,
    **reported,
    **top,
  }


def _sized(low, high, direction: int, margin: float, control_gap, scale: float) -> dict:
  """A claim's margin and control gap where it has one; a directional claim's `inside_margin`
  too: its whole interval inside ±margin, a difference (resolved or not) smaller than the one
  within which every "about equal" claim calls two arms equal (`equivalence_margin`)."""
  if control_gap is None:
    return {}
  sized = {"margin": margin, "control_gap": abs(scale * control_gap)}
  return sized | ({"inside_margin": bool(-margin < low and high < margin)} if direction else {})


def _claim_verdict(low: float, high: float, direction: int, margin: float, entry: dict) -> str:
  """`verdict` of the interval, but 'contradicted' when the arm the paper says fails sits at
  the metric's ceiling (`claim`'s `b_fails`)."""
  if entry.get("failing_arm_at_ceiling"):
    return "contradicted"
  return verdict(low, high, direction, margin)


def check_margin(entry: dict) -> None:
  """ValueError unless a claim's margin (every equivalence claim's, and a directional one's
  where it has a control gap) follows the one rule from its control_gap, and a directional
  claim's `inside_margin` follows its interval (records made before the rule, archived, keep
  their declared margins)."""
  sized = entry.get("direction", 1) == 0 or "control_gap" in entry
  if sized and not np.isclose(
    entry.get("margin", np.nan), equivalence_margin(entry.get("control_gap", np.nan))
  ):
    raise ValueError(
      f"claim {entry['claim']!r}: a margin is {EQUIVALENCE_SHARE} x its "
      f"control_gap (stats.equivalence_margin), not {entry.get('margin')}."
    )
  if sized and entry.get("direction", 1) != 0:
    margin, low, high = entry["margin"], entry["ci_low"], entry["ci_high"]
    if entry.get("inside_margin") != bool(-margin < low and high < margin):
      raise ValueError(
        f"claim {entry['claim']!r}: inside_margin is {entry.get('inside_margin')!r}, but its "
        f"interval [{low:.3g}, {high:.3g}] against ±{margin:.3g} says otherwise."
      )


def check_claim(entry: dict) -> None:
  """ValueError unless `entry` has the claims.json fields and a verdict its interval gives."""
  missing = {
    "paper",
    "item",
    "claim",
    "a",
    "b",
    "difference",
    "ci_low",
    "ci_high",
    "n",
    "paired",
    "verdict",
  } - set(entry)
  if missing:
    raise ValueError(f"claim {entry.get('claim')!r} lacks {sorted(missing)}.")
  expected = _claim_verdict(
    entry["ci_low"], entry["ci_high"], entry.get("direction", 1), entry.get("margin", 0.0), entry
  )
  if entry["verdict"] != expected:
    raise ValueError(
      f"claim {entry['claim']!r}: verdict {entry['verdict']!r}, but its interval "
      f"[{entry['ci_low']:.3g}, {entry['ci_high']:.3g}] gives {expected!r}."
    )


def check_paper_ratio(entry: dict) -> None:
  """ValueError unless `entry` (a current record's claim; archived ones predate the fields)
  says the paper's own a − b (`paper_value`, null where the paper gives no number) and
  `ratio_to_paper` is the measured difference over it (null without one)."""
  if not {"paper_value", "ratio_to_paper"} <= set(entry):
    raise ValueError(f"claim {entry['claim']!r} lacks paper_value or ratio_to_paper.")
  paper, ratio = entry["paper_value"], entry["ratio_to_paper"]
  expected = entry["difference"] / paper if paper else None
  wrong = ratio is not None and expected is not None and not np.isclose(ratio, expected)
  if (ratio is None) != (expected is None) or wrong:
    raise ValueError(
      f"claim {entry['claim']!r}: ratio_to_paper {ratio!r}, but difference / paper_value "
      f"gives {expected!r}."
    )
