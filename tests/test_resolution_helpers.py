"""`lfpe.resolution`: the trainer's mixed-resolution draw and the ViT's coordinate augmentation,
as functions a user's own loop calls (and the same numbers as lfpe's own paths)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings, resolution
from lfpe.encodings import coords


def test_draw_size_depends_on_seed_and_step_only():
  draws = [resolution.draw_size((8, 16, 32), 5, step) for step in range(30)]
  assert draws == [resolution.draw_size((8, 16, 32), 5, step) for step in range(30)]
  assert set(draws) == {8, 16, 32}
  assert draws != [resolution.draw_size((8, 16, 32), 6, step) for step in range(30)]
  with pytest.raises(ValueError, match="at least one size"):
    resolution.draw_size((), 0, 0)


def test_resize_batch_repeats_pixels_at_integer_factors():
  images = jnp.arange(2 * 4 * 4 * 1, dtype=jnp.float32).reshape(2, 4, 4, 1)
  out = resolution.resize_batch(images, 8)
  np.testing.assert_array_equal(out, jnp.repeat(jnp.repeat(images, 2, 1), 2, 2))
  np.testing.assert_array_equal(resolution.resize_batch(images, (4, 4)), images)  # same size


def test_train_coords_are_the_models_augmented_grid():
  pos = encodings.create("rope_axial", head_dim=16)
  key = jax.random.key(3)
  got = resolution.train_coords(pos, (6, 4), key, **coords.DINOV3)
  want = coords.augment(
    pos.grid_coords((6, 4)), key, rescale=2.0, convention="dinov3", num_positions=(6, 4)
  )
  np.testing.assert_array_equal(got, want)
  plain = resolution.train_coords(pos, (6, 4), key)  # no options: the grid itself
  np.testing.assert_allclose(plain, pos.grid_coords((6, 4)), atol=1e-5)
  with pytest.raises(ValueError, match="train_coords: coord_augment.shfit is unknown"):
    resolution.train_coords(pos, (6, 4), key, shfit=0.1)
