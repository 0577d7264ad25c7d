"""The intervals every experiment reports (experiments/stats.py)."""

import numpy as np
import pytest
from scipy import stats

from experiments.stats import difference, fmt, interval


def test_intervals_are_student_t_over_seeds():
  mean, half = interval([0.90, 0.92, 0.94], scale=100)
  assert mean == pytest.approx(92.0)
  assert half == pytest.approx(stats.t.ppf(0.975, 2) * 2.0 / np.sqrt(3))
  _, one_run = interval([0.90, 0.92, 0.94], scale=100, one_run=True)  # where a 4th run lands
  assert one_run == pytest.approx(stats.t.ppf(0.975, 2) * 2.0 * np.sqrt(4 / 3))
  assert np.isnan(interval([0.5])[1])


def test_difference_is_welch():
  a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0, 8.0])
  mean, half = difference(a, b)
  va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 4
  dof = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
  assert mean == pytest.approx(-3.0)
  assert half == pytest.approx(stats.t.ppf(0.975, dof) * np.sqrt(va + vb))
  assert fmt([1.0, 2.0, 3.0], digits=2).startswith("2.00 ± ")
