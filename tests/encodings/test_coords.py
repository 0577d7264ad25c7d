"""The coordinate convention: grids, DETR positions, box groups."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings import coords


def test_grid_modes_row_major_by_hand():
  np.testing.assert_array_equal(
    coords.grid((2, 3), "index"), [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
  )
  np.testing.assert_allclose(coords.grid((2, 3), "unit")[:, 1], [0, 0.5, 1, 0, 0.5, 1])
  np.testing.assert_allclose(coords.grid((3, 2), "centered")[:, 0], [-1, -1, 0, 0, 1, 1])
  assert coords.grid((1, 4), "unit")[:, 0].tolist() == [0, 0, 0, 0]
  assert coords.grid((1, 4), "centered")[:, 0].tolist() == [-1, -1, -1, -1]  # the first end


def test_flat_index_is_raster_order():
  np.testing.assert_array_equal(coords.flat_index((2, 3))[:, 0], np.arange(6))


def test_detr_positions_by_hand_and_padding_invariance():
  mask = np.zeros((1, 3, 4), bool)
  mask[0, :, 2:] = True  # two padded columns
  pos = np.asarray(coords.detr(jnp.asarray(mask)))
  np.testing.assert_allclose(pos[0, :, 0, 0], np.array([1, 2, 3]) / 3 * 2 * math.pi, rtol=1e-5)
  np.testing.assert_allclose(pos[0, 0, :2, 1], np.array([1, 2]) / 2 * 2 * math.pi, rtol=1e-5)
  unpadded = np.asarray(coords.detr(jnp.zeros((1, 3, 2), bool)))
  np.testing.assert_allclose(pos[:, :, :2], unpadded, rtol=1e-6)
  assert pos[0, :, :2].min() > 0 and pos[0, :, :2].max() <= 2 * math.pi + 1e-5


def test_boxes_groups():
  box = jnp.arange(8.0).reshape(2, 4)
  assert coords.boxes(box, 1).shape == (2, 1, 4)
  np.testing.assert_array_equal(coords.boxes(box, 2)[0], [[0, 1], [2, 3]])
  assert coords.boxes(box, 4).shape == (2, 4, 1)


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: coords.grid((0, 3)), "grid shape"),
    (lambda: coords.grid((2, 2), "pixels"), "mode"),
    (lambda: coords.detr(jnp.zeros((3, 4), bool)), "mask"),
    (lambda: coords.detr(jnp.zeros((1, 3, 4))), "mask"),
    (lambda: coords.boxes(jnp.zeros((2, 3))), "4 coordinates"),
    (lambda: coords.boxes(jnp.zeros((2, 4)), 3), "groups"),
  ],
)
def test_bad_inputs_name_the_argument(call, match):
  with pytest.raises(ValueError, match=match):
    call()
