"""Probes of position embeddings: pair datasets by hand, folds, and known tables."""

import numpy as np
import pytest

from lfpe.analysis import probes

SHAPE = (6, 6)


def _grid(shape=SHAPE):
  row, col = np.divmod(np.arange(np.prod(shape)), shape[1])
  return row.astype(float), col.astype(float)


def _sine_table(dim=24):
  """Eq. 1 of 003 written out: sin/cos of x and of y at D/4 frequencies each."""
  row, col = _grid()
  freqs = 1.0 / 10000 ** (4 * np.arange(dim // 4) / dim)
  parts = [
    np.sin(col[:, None] * freqs),
    np.cos(col[:, None] * freqs),
    np.sin(row[:, None] * freqs),
    np.cos(row[:, None] * freqs),
  ]
  return np.concatenate(parts, -1)


def test_pair_dataset_by_hand():
  table = np.arange(8.0).reshape(4, 2)  # a 2x2 grid, positions 0..3 row-major
  x, y, pairs = probes.pair_dataset(table, (2, 2), "left_right")
  # pairs in different columns: (0,1), (0,3), (1,0), (1,2), (2,1), (2,3), (3,0), (3,2)
  np.testing.assert_array_equal(pairs[:, 0], [0, 0, 1, 1, 2, 2, 3, 3])
  np.testing.assert_array_equal(pairs[:, 1], [1, 3, 0, 2, 1, 3, 0, 2])
  np.testing.assert_array_equal(y, [1, 1, 0, 0, 1, 1, 0, 0])  # 1: i left of j
  np.testing.assert_array_equal(x[1], table[0] - table[3])
  _, y, pairs = probes.pair_dataset(table, (2, 2), "up_down")
  np.testing.assert_array_equal(y, (pairs[:, 0] < 2).astype(int))  # i in the top row
  _, y, pairs = probes.pair_dataset(table, (2, 2), "distance")
  assert len(pairs) == 12
  np.testing.assert_array_equal(y[pairs.tolist().index([0, 3])], [1, 1])  # (dcol, drow)
  np.testing.assert_array_equal(y[pairs.tolist().index([3, 2])], [-1, 0])


def test_position_folds_hold_positions_out():
  _, _, pairs = probes.pair_dataset(np.zeros((36, 4)), SHAPE, "distance")
  held = []
  for train, test in probes.folds(pairs, 36, "positions"):
    seen = set(pairs[train].ravel())
    assert not seen & set(pairs[test].ravel())
    held.append(set(pairs[test].ravel()))
  assert set().union(*held) == set(range(36))
  pair_folds = probes.folds(pairs, 36, "pairs")
  assert len(pair_folds) == 10 and np.all(np.diff(pair_folds[0][1]) == 1)  # consecutive


@pytest.mark.parametrize("scheme", probes.SCHEMES)
def test_sinusoidal_table_solves_every_probe(scheme):
  table = _sine_table()
  for name in ("left_right", "up_down"):
    assert probes.probe(table, SHAPE, name, scheme).mean() > 0.99
  assert probes.probe(table, SHAPE, "distance", scheme).mean() > 0.99


def test_a_column_only_table_knows_left_right_not_up_down():
  _, col = _grid()
  rng = np.random.default_rng(0)
  table = np.stack([col, col**2, np.sin(col)], -1) @ rng.normal(size=(3, 16))
  assert probes.probe(table, SHAPE, "left_right").mean() > 0.99
  assert probes.probe(table, SHAPE, "up_down").mean() < 0.75


def test_random_table_is_near_chance_with_held_out_positions():
  rng = np.random.default_rng(1)
  scores = [
    probes.probe(rng.normal(0, 0.02, (36, 16)), SHAPE, "left_right", seed=s).mean()
    for s in range(3)
  ]
  assert 0.3 < np.mean(scores) < 0.7
  assert probes.probe(rng.normal(0, 0.02, (36, 16)), SHAPE, "distance").mean() < 0.3


def test_bad_arguments():
  with pytest.raises(ValueError, match="table"):
    probes.probe(np.zeros((10, 4)), SHAPE, "left_right")
  with pytest.raises(ValueError, match="probe"):
    probes.probe(np.zeros((36, 4)), SHAPE, "diagonal")
  with pytest.raises(ValueError, match="scheme"):
    probes.probe(_sine_table(), SHAPE, "left_right", scheme="random")


def test_r2_of_a_fold_whose_target_never_varies_is_scikit_learns():
  """R² is 1 - SSE/SST against the test fold's own mean; where SST is 0, scikit-learn's 1
  (exact) or 0 (not), never a huge negative number."""
  from sklearn.metrics import r2_score  # noqa: PLC0415

  class Fixed:
    def __init__(self, out):
      self.out = np.asarray(out, float)

    def predict(self, x):
      return self.out

  y = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]])
  for out in (y, y + [[0.0, 0.5]] * 3, y + [[0.1, 0.0]] * 3):
    expected = r2_score(y, out, force_finite=True)
    assert probes._score(Fixed(out), None, y) == pytest.approx(expected)
