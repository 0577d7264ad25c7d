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


def test_crop_window_covers_its_area_at_a_bounded_aspect_inside_the_image():
  rng = np.random.default_rng(0)
  for _ in range(200):
    top, left, h, w = resolution.crop_window(rng, 60, 80, (0.1, 0.5))
    assert 0 <= top <= 60 - h and 0 <= left <= 80 - w
    assert 0.1 * 4800 - 80 <= h * w <= 0.5 * 4800 + 80  # rounding each side by <= 0.5
    assert 3 / 4 - 0.06 <= w / h <= 4 / 3 + 0.06
  # No window of the whole area fits at an aspect other than 1 often: a tall strip falls back.
  assert resolution.crop_window(np.random.default_rng(0), 100, 2, (1.0, 1.0)) == (0, 0, 100, 2)


def test_multi_crop_gives_each_views_count_and_size_and_packs_in_one_batch():
  image = np.random.default_rng(1).random((40, 40, 3)).astype(np.float32)
  views = ((16, 2, (0.4, 1.0)), (8, 3, (0.05, 0.4)))
  got = resolution.multi_crop(image, np.random.default_rng(2), views)
  assert [v.shape for v in got] == [(16, 16, 3)] * 2 + [(8, 8, 3)] * 3
  again = resolution.multi_crop(image, np.random.default_rng(2), views)
  np.testing.assert_array_equal(np.stack(got[:2]), np.stack(again[:2]))  # the rng decides
  # The whole square image at area 1 is the image resized (the window is the image).
  whole = resolution.multi_crop(image, np.random.default_rng(3), ((20, 1, (1.0, 1.0)),))[0]
  np.testing.assert_allclose(whole, resolution.resize_batch(image[None], 20, "bicubic")[0])
  batch = resolution.pack(got, patch=(4, 4), max_tokens=16)  # several sizes, one step
  np.testing.assert_array_equal(batch["shape"], [[4, 4]] * 2 + [[2, 2]] * 3)
  assert batch["valid"].sum(1).tolist() == [16, 16, 4, 4, 4]
