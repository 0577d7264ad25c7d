"""The intuitive encodings of 001 Sec. 2.1 on hand-computed cases."""

import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings.intuitive import Intuitive, binary_code


def test_index_is_the_raster_index_in_every_channel():
  module = encodings.create("index", dim=3)
  assert module.flatten and module.coords_mode == "index"
  np.testing.assert_array_equal(
    module.apply({}, (2, 2), method="grid"), [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]]
  )


def test_unit_spans_zero_to_one_over_the_sequence():
  module = encodings.create("unit", dim=2)
  assert module.coords_mode == "unit"
  np.testing.assert_allclose(module.apply({}, (1, 3), method="grid"), [[0, 0], [0.5, 0.5], [1, 1]])
  four = module.apply({}, (4,), method="grid")[:, 0]  # 001's example: 0, 0.33, 0.66, 1
  np.testing.assert_allclose(four, [0, 1 / 3, 2 / 3, 1], rtol=1e-6)
  np.testing.assert_allclose(module.apply({}, (2, 2), method="grid")[:, 0], four, rtol=1e-6)


def test_binary_codes_eight_tokens_in_three_bits():
  module = encodings.create("binary", dim=3)
  table = np.asarray(module.apply({}, (8,), method="grid"))
  expected = [
    [0, 0, 0],
    [0, 0, 1],
    [0, 1, 0],
    [0, 1, 1],
    [1, 0, 0],
    [1, 0, 1],
    [1, 1, 0],
    [1, 1, 1],
  ]
  np.testing.assert_array_equal(table, expected)
  # 001 Sec. 2.1.3: the channels change with periods 8, 4, 2 (one bit each)
  for j, period in enumerate([8, 4, 2]):
    np.testing.assert_array_equal(table[:, j], (np.arange(8) % period) >= period // 2)


def test_binary_wraps_and_handles_wide_codes():
  np.testing.assert_array_equal(binary_code(jnp.float32([9.0, 4.9]), 3), [[0, 0, 1], [1, 0, 1]])
  wide = np.asarray(binary_code(jnp.float32([2**20 + 6]), 40))[0]
  assert wide[:19].sum() == 0 and wide[19] == 1 and wide[-3:].tolist() == [1, 1, 0]
  assert wide.sum() == 3


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: Intuitive(dim=4, code="onehot"), "code"),
    (lambda: Intuitive(dim=0), "dim"),
    (lambda: Intuitive(dim=4).apply({}, jnp.zeros((3, 2))), "`coords`"),
  ],
)
def test_bad_inputs_name_the_argument(call, match):
  with pytest.raises(ValueError, match=match):
    call()
