"""Feature-level probes of position embeddings (003 Sec. 4.1, Table 2, Appendix A).

For every ordered pair of grid positions `(i, j)` the feature is the difference of their
embeddings `x_i - x_j` (Wang & Chen's probe, as the thesis uses it):
* `left_right`: logistic regression, target 1 if `p_i` is left of `p_j` (pairs in one
  column are left out);
* `up_down`: the same for `p_i` above `p_j` (pairs in one row are left out);
* `distance`: linear regression of the shift `p_j - p_i` as (columns, rows); R^2
  averaged over the two outputs.
Scores come from 10-fold cross-validation, one score per fold.

Two cross-validation schemes (the thesis does not say how it split its folds):
* `positions` (default): positions are split into k groups; fold g tests on the pairs
  within group g and trains on the pairs among the other positions, with standardised
  features (a test pair with one seen position would leak that position's label). It asks
  whether the *geometry* of the embedding generalises to positions the probe never saw,
  and is blind to the scale of the table.
* `pairs`: scikit-learn defaults on the raw differences (`LogisticRegression()` with its
  L2 penalty C=1, `LinearRegression()`), k folds of consecutive pairs in raster order,
  unshuffled and unstratified (`KFold`, where `cross_val_score(..., cv=k)` would stratify a
  classifier's folds: 1-4 points apart on random tables): the literal reading of the thesis.
  Every position is then seen in training, and a linear probe can fit `w . x_i` = any
  function of `i` whenever the N vectors are linearly independent, random tables included:
  a 64 x 32 N(0, 0.02^2) table scores about 0.7 on left_right, a 64 x 768 one 1.0, where
  the thesis reports about 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lfpe.extras import require_extra

require_extra("experiments", "lfpe.analysis.probes")
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

PROBES = ("left_right", "up_down", "distance")
SCHEMES = ("positions", "pairs")


def pair_dataset(
  table: np.ndarray, shape: Sequence[int], probe: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Features `[P, D]`, targets `[P]` or `[P, 2]` and the pairs `[P, 2]` of one probe.

  `table` is `[H * W, D]` (row-major grid of `shape`); pairs are ordered `(i, j)`, i != j,
  enumerated in raster order of `i`, then `j`.
  """
  table = np.asarray(table, np.float64)
  h, w = shape
  if table.ndim != 2 or table.shape[0] != h * w:
    raise ValueError(f"table must be [H*W={h * w}, D] for shape {tuple(shape)}, got {table.shape}.")
  if probe not in PROBES:
    raise ValueError(f"probe={probe!r}; use one of {PROBES}.")
  i, j = np.nonzero(~np.eye(h * w, dtype=bool))
  row, col = np.divmod(np.arange(h * w), w)
  if probe == "left_right":
    keep, target = col[i] != col[j], (col[i] < col[j]).astype(int)
  elif probe == "up_down":
    keep, target = row[i] != row[j], (row[i] < row[j]).astype(int)
  else:
    keep = np.ones(len(i), bool)
    target = np.stack([col[j] - col[i], row[j] - row[i]], -1).astype(np.float64)
  i, j, target = i[keep], j[keep], target[keep]
  return table[i] - table[j], target, np.stack([i, j], -1)


def folds(
  pairs: np.ndarray, num_positions: int, scheme: str = "positions", k: int = 10, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
  """`k` (train, test) index arrays over `pairs` for a cross-validation `scheme`."""
  if scheme == "pairs":
    return list(KFold(k, shuffle=False).split(pairs))
  if scheme != "positions":
    raise ValueError(f"scheme={scheme!r}; use one of {SCHEMES}.")
  group = np.random.default_rng(seed).permutation(num_positions) % k  # position -> fold
  out = []
  for g in range(k):
    held = group[pairs] == g  # [P, 2]
    out.append((np.flatnonzero(~held.any(-1)), np.flatnonzero(held.all(-1))))
  return out


def _estimator(probe: str, scheme: str):
  if probe == "distance":
    reg = LinearRegression()
  else:
    reg = LogisticRegression(max_iter=2000)
  return reg if scheme == "pairs" else make_pipeline(StandardScaler(), reg)


def _score(model, x: np.ndarray, y: np.ndarray) -> float:
  if y.ndim == 1:
    return float(np.mean(model.predict(x) == y))
  sse = np.sum(np.square(model.predict(x) - y), 0)
  sst = np.sum(np.square(y - y.mean(0)), 0)
  # a test fold whose target never varies: 1 if predicted exactly, else 0 (scikit-learn's)
  r2 = np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), np.where(sse == 0, 1.0, 0.0))
  return float(np.mean(r2))


def probe(
  table: np.ndarray,
  shape: Sequence[int],
  name: str,
  scheme: str = "positions",
  k: int = 10,
  seed: int = 0,
) -> np.ndarray:
  """Cross-validated probe scores `[k]`: accuracy (left_right, up_down) or R^2 (distance).

  Args:
    table: `[H * W, D]` position embeddings of a row-major grid (no class token).
    shape: the grid `(H, W)`.
    name: one of `PROBES`.
    scheme: `positions` or `pairs` (module docstring).
    k: number of folds (10 in the thesis).
    seed: the position-to-fold assignment of the `positions` scheme.
  """
  x, y, pairs = pair_dataset(table, shape, name)
  scores = []
  for train, test in folds(pairs, len(table), scheme, k, seed):
    if y.ndim == 1 and len(np.unique(y[train])) < 2:  # one class only: predict it
      scores.append(float(np.mean(y[test] == y[train][0])))
      continue
    model = _estimator(name, scheme).fit(x[train], y[train])
    scores.append(_score(model, x[test], y[test]))
  return np.asarray(scores)
