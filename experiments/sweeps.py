"""A record's γ sweep, read from its results: each arm's validation scores per γ, the
declared rule that chooses γ from them, and the table that shows both.

A sweep run's results key is `sweep/<arm>/gamma=<γ>/<seed>`, where the arm is what γ is
chosen for (`lsh/fourier` in generation, a protocol such as `heldout` in detection).
"""

import sys
from collections.abc import Callable, Iterable, Sequence

import numpy as np


def scores(results: dict, score: Callable[[dict], float]) -> dict[str, dict[float, list[float]]]:
  """{arm: {γ: [`score` of each seed's entry]}}, for every sweep entry of `results`."""
  out = {}
  for key, value in sorted(results.items()):
    if key.startswith("sweep/"):
      *arm, gamma, _ = key.removeprefix("sweep/").split("/")
      gamma = float(gamma.removeprefix("gamma="))
      out.setdefault("/".join(arm), {}).setdefault(gamma, []).append(score(value))
  return out


def choose(by_arm: dict[str, dict[float, list[float]]], *, higher_is_better: bool) -> dict:
  """The declared rule, per arm: the γ with the best mean validation score; ties go to the
  smaller γ."""
  sign = 1.0 if higher_is_better else -1.0
  return {
    arm: max(by_gamma, key=lambda g: (sign * np.mean(by_gamma[g]), -g))
    for arm, by_gamma in by_arm.items()
  }


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
) -> list[str]:
  """A markdown table of the sweep, one row per arm and γ (ascending), the chosen γ marked:
  `columns` names the arm's and the score's columns, `name` an arm, `cell` its scores."""
  arm_column, score_column = columns
  lines = [f"| {arm_column} | γ | {score_column} | chosen |", "|---|---|---|---|"]
  for arm, by_gamma in by_arm.items():
    for gamma, values in sorted(by_gamma.items()):
      mark = "**yes**" if gamma == chosen[arm] else ""
      lines.append(f"| {name(arm)} | {gamma:g} | {cell(values)} (n = {len(values)}) | {mark} |")
  return lines
