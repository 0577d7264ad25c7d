"""The intervals every experiment reports: Student t over seeds, Welch for differences."""

from __future__ import annotations

import numpy as np
from scipy import stats


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


def fmt(values, *, scale: float = 1.0, digits: int = 1) -> str:
  """`mean ± half-width` (just the mean for one value)."""
  mean, half = interval(values, scale=scale)
  return f"{mean:.{digits}f}" if np.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"
