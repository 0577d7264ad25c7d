"""digit_images: bilinear upsampling, quantised grey levels, the digits split, the loader."""

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds

from lfpe import data as data_lib
from lfpe.data import digit_images as di
from lfpe.data import digits


def test_upsampling_is_jaxs_linear_resize():
  x = np.random.default_rng(0).uniform(0, 16, (3, 8, 8))
  expected = jax.image.resize(x, (3, 16, 16), "linear")
  np.testing.assert_allclose(di.upsample(x, 2), expected, atol=1e-4)
  np.testing.assert_array_equal(di.upsample(x, 1), x)


def test_interpolation_weights_by_hand():
  # output pixel 0 sits at source -0.25 (clamped to 0), pixel 1 at 0.25, pixel 3 at 1.25
  m = di.interpolation_matrix(4, 2)
  np.testing.assert_allclose(m[0], [1, 0, 0, 0])
  np.testing.assert_allclose(m[1], [0.75, 0.25, 0, 0])
  np.testing.assert_allclose(m[3], [0, 0.75, 0.25, 0])
  np.testing.assert_allclose(m[7], [0, 0, 0, 1])
  np.testing.assert_allclose(m.sum(1), 1)


def test_quantised_levels():
  np.testing.assert_array_equal(di.quantise([0, 1.1, 1.2, 8, 16, 17]), [0, 0, 1, 4, 7, 7])


def test_images_are_centred_digits_on_a_blank_border():
  images, labels = di.images(16)
  assert images.shape == (1797, 16, 16, 1) and images.dtype == np.uint8
  assert images.max() == di.LEVELS - 1 and len(np.unique(labels)) == 10
  sides, centre = images[:, :, [0, -1]], images[:, 6:10, 6:10]  # where a pixel is matters:
  assert (sides == 0).mean() > 0.95 and (centre > 0).mean() > 0.9  # blank sides, inked centre
  native, _ = di.images(8)
  np.testing.assert_array_equal(native[..., 0], di.quantise(digits.raw()[0]))


@pytest.mark.parametrize("size", [8, 16])
def test_built_dataset_reads_back_with_the_digits_split(size, tmp_path):
  name = f"digit_images/{size}x{size}"
  data_lib.prepare(name, str(tmp_path))
  images, labels = di.images(size)
  split = digits.split_indices(labels)
  for name_split, rows in split.items():
    source = tfds.data_source(name, split=name_split, data_dir=str(tmp_path))
    assert len(source) == len(rows)
    record = source[5]
    np.testing.assert_array_equal(record["image"], images[record["index"]])
  spec = data_lib.get_spec(name)
  assert (spec.num_classes, spec.image_shape) == (di.LEVELS, (size, size, 1))
