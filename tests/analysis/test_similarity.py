"""Similarity maps (002 Fig. 2) on hand-computed tables and the figure's shape claims."""

import numpy as np
import pytest

from experiments.similarity.run import figure_maps
from lfpe.analysis import plot_similarity_maps, similarity_map


def test_dot_and_cosine_maps_by_hand():
  table = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [1.0, 1.0]])  # a 2x2 grid
  np.testing.assert_allclose(similarity_map(table, (2, 2), index=(0, 1)), [[2, 4], [0, 2]])
  cos = similarity_map(table, (2, 2), index=(0, 0), metric="cosine")
  np.testing.assert_allclose(cos, [[1, 1], [0, np.sqrt(0.5)]])
  with pytest.raises(ValueError, match="prod"):
    similarity_map(table, (3, 3))


def test_fig2_fourier_is_isotropic_gaussian_and_sine_is_not(tmp_path):
  maps = figure_maps(dim=768)
  fourier, sine = maps["(b) Learnable-Fourier, init"], maps["(a) Sine-2D (concat)"]
  kernel = maps["½·exp(−‖x−y‖²/(2γ²))"]
  # Learnable-Fourier at init tracks ½·exp(−‖x−y‖²/(2γ²)) (sampling error ~ 1/sqrt(F)).
  assert np.abs(fourier - kernel).max() < 0.1
  # Sine-2D concatenation: an axis offset keeps far more similarity than a diagonal one.
  c = 16
  assert sine[c, c + 6] - sine[c + 6, c + 6] > 0.1 * sine[c, c]
  assert abs(fourier[c, c + 6] - fourier[c + 4, c + 4]) < 0.1  # same distance ≈ same value
  plot_similarity_maps(maps, str(tmp_path / "fig.png"))
  assert (tmp_path / "fig.png").stat().st_size > 10_000
