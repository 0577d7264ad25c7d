"""`lfpe.resolution`: the trainer's mixed-resolution draw and the ViT's coordinate augmentation,
as functions a user's own loop calls (and the same numbers as lfpe's own paths)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings, resolution
from lfpe.encodings import coords
from lfpe.nn.positions import PositionSource


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


def test_train_coords_are_the_models_augmented_grid(monkeypatch):
  """What the ViT's position source draws while training (`model.coord_augment`), given the
  key it drew: `train_coords` with that key gives the same coordinates, and the model's
  table is the encoding at them (a change of the model's convention, preset or grid fails)."""
  seen = []
  augment = coords.augment
  monkeypatch.setattr(coords, "augment", lambda *a, **k: seen.append((a, augment(*a, **k)))
                      or seen[-1][1])  # fmt: skip
  source = PositionSource("fourier", (6, 4), 16, 2, coord_augment=coords.DINOV3)
  variables = source.init(jax.random.key(0), (6, 4))
  table = source.apply(variables, (6, 4), train=True, rngs={"dropout": jax.random.key(3)})["add"]
  [((_, key), drawn)] = seen
  pos = encodings.create("fourier", dim=16)
  np.testing.assert_array_equal(resolution.train_coords(pos, (6, 4), key, **coords.DINOV3), drawn)
  own = {"params": variables["params"]["encoding"]}
  np.testing.assert_allclose(table, pos.apply(own, drawn), rtol=1e-6)
  assert not np.allclose(drawn, pos.grid_coords((6, 4)))  # augmented: not the plain grid
  pos = encodings.create("rope_axial", head_dim=16)
  key = jax.random.key(3)
  plain = resolution.train_coords(pos, (6, 4), key)  # no options: the grid itself
  np.testing.assert_allclose(plain, pos.grid_coords((6, 4)), atol=1e-5)
  with pytest.raises(ValueError, match="train_coords: coord_augment.shfit is unknown"):
    resolution.train_coords(pos, (6, 4), key, shfit=0.1)


@pytest.mark.parametrize(
  "name, context",
  [
    ("embed_2d", dict(dim=16, grid_shape=(4, 4))),
    ("rel_bias_2d", dict(num_heads=2, grid_shape=(4, 4))),
  ],
)
def test_train_coords_refuses_what_the_model_refuses_to_augment(name, context):
  """A learned table's augmented lookups leave the table (NaN rows); a relative encoding reads
  no coordinates: both refused, as `model.coord_augment` refuses them."""
  registered = name.replace("embed_2d", "embed_nd")  # a built module names its registration
  with pytest.raises(ValueError, match=rf"train_coords: '{registered}' .* reads no coordinates"):
    resolution.train_coords(encodings.create(name, **context), (4, 4), jax.random.key(0))
  with pytest.raises(ValueError, match=rf"coord_augment: posemb='{name}' .* reads no coordinate"):
    PositionSource(name, (4, 4), 16, 2, coord_augment=coords.DINOV3).init(jax.random.key(0), (4, 4))


def test_crop_window_covers_its_area_at_a_bounded_aspect_inside_the_image():
  rng = np.random.default_rng(0)
  for _ in range(200):
    top, left, h, w = resolution.crop_window(rng, 60, 80, (0.1, 0.5))
    assert 0 <= top <= 60 - h and 0 <= left <= 80 - w
    assert 0.1 * 4800 - 80 <= h * w <= 0.5 * 4800 + 80  # rounding each side by <= 0.5
    assert 3 / 4 - 0.06 <= w / h <= 4 / 3 + 0.06
  # No try fits a whole-area crop of another aspect: torchvision's fallback, the central crop
  # with its aspect clamped to [3/4, 4/3] (its `get_params` gives (48, 0, 3, 2), (0, 38, 2, 3)).
  rng = np.random.default_rng(0)
  assert resolution.crop_window(rng, 100, 2, (1.0, 1.0)) == (48, 0, 3, 2)
  assert resolution.crop_window(rng, 2, 80, (1.0, 1.0)) == (0, 38, 2, 3)
  assert resolution.crop_window(rng, 30, 30, (2.0, 2.0)) == (0, 0, 30, 30)


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


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: resolution.resize_batch(np.zeros((8, 8, 3)), 16), r"resize_batch takes images \[B"),
    (lambda: resolution.resize_batch(np.zeros((1, 8, 8, 3)), -16), "size must be a positive"),
    (lambda: resolution.patchify(np.zeros((10, 8, 3)), (4, 4)), "not whole patches"),
    (lambda: resolution.pack(np.zeros((8, 8, 3)), 4, 16), "list of images"),
    (lambda: resolution.pack([np.zeros((8, 8))], 4, 16), r"images\[0\] must be an image"),
    (lambda: resolution.pack([np.zeros((8, 8, 3)), np.zeros((8, 8, 1))], 4, 16), "channels"),
    (lambda: resolution.pack([np.zeros((8, 8, 3))], 4, 0), "max_tokens must be a positive"),
    (lambda: resolution.packed_grid((32, -32), (8, 8), 16), "image_hw must be a positive"),
    (lambda: resolution.multi_crop(np.zeros((8, 8, 3)), 0, resolution.DINO_VIEWS), "Generator"),
    (
      lambda: resolution.multi_crop(np.zeros((8, 8, 3)), np.random.default_rng(0), [(4, 1)]),
      r"\(size, count, \(low, high\)\)",
    ),
    (
      lambda: resolution.multi_crop(
        np.zeros((8, 8, 3)), np.random.default_rng(0), [(4, 1, (0.4, 1.5))]
      ),
      "0 < low <= high <= 1",
    ),
  ],
)
def test_bad_arguments_are_named(call, match):
  """What a user's own loop may get wrong, said in its terms (these were IndexErrors, numpy's
  reshape or broadcast errors, or silent empty arrays)."""
  with pytest.raises(ValueError, match=match):
    call()
