"""Coordinate augmentation (DINOv3's shift, jitter, rescale) against its formula, and its wiring:
training only, coordinate-based encodings only, one draw per call from the 'dropout' stream."""

import math

import jax
import numpy as np
import pytest

from lfpe.encodings import coords as coords_lib
from lfpe.models import vit

OPTIONS = {"shift": 0.2, "jitter": 1.3, "rescale": 2.0}


def test_defaults_are_the_identity():
  grid = coords_lib.grid((5, 7), "index")
  np.testing.assert_allclose(coords_lib.augment(grid, jax.random.key(0)), grid, atol=1e-5)


def test_centered_coordinates_follow_dinov3_in_order_shift_jitter_rescale():
  """On [-1, 1] coordinates the map is DINOv3's: (c + u) * j * r with its three draws."""
  grid = np.asarray(coords_lib.grid((4, 6), "centered"))
  key = jax.random.key(3)
  k_shift, k_jitter, k_rescale = jax.random.split(key, 3)
  u = np.asarray(jax.random.uniform(k_shift, (2,), minval=-0.2, maxval=0.2))
  j = np.exp(
    np.asarray(jax.random.uniform(k_jitter, (2,), minval=-math.log(1.3), maxval=math.log(1.3)))
  )
  r = math.exp(
    float(jax.random.uniform(k_rescale, (), minval=-math.log(2.0), maxval=math.log(2.0)))
  )
  expected = (grid + u) * j * r
  np.testing.assert_allclose(coords_lib.augment(grid, key, **OPTIONS), expected, rtol=1e-5)


@pytest.mark.parametrize("mode", ["index", "unit"])
def test_every_mode_is_augmented_in_its_own_normalisation(mode):
  """Index and unit grids move exactly as the centered grid does, mapped back to their range."""
  shape, key = (6, 4), jax.random.key(5)
  centered = np.asarray(coords_lib.augment(coords_lib.grid(shape, "centered"), key, **OPTIONS))
  got = np.asarray(coords_lib.augment(coords_lib.grid(shape, mode), key, **OPTIONS))
  half = np.array([(n - 1) / 2 for n in shape]) if mode == "index" else np.array([0.5, 0.5])
  np.testing.assert_allclose(got, half + centered * half, rtol=1e-5, atol=1e-5)


def test_shift_alone_moves_every_token_by_one_offset_within_its_bound():
  grid = coords_lib.grid((8, 8), "index")
  moved = np.asarray(coords_lib.augment(grid, jax.random.key(1), shift=0.1)) - np.asarray(grid)
  assert np.ptp(moved, axis=0).max() < 1e-5  # one offset per axis for all tokens
  assert np.all(np.abs(moved[0]) <= 0.1 * 3.5 + 1e-6)  # shift x half-range (3.5 cells)


def test_dinov3_convention_normalises_by_pixel_centres():
  """DINOv3: (i + 0.5)/n · 2 − 1, so a shift u moves n positions by u·n/2 index steps (lfpe's
  `extent` convention: u·(n − 1)/2); rescaling about the centre is the same in both."""
  grid, key = coords_lib.grid((8, 5), "index"), jax.random.key(1)
  u = np.asarray(jax.random.uniform(jax.random.split(key, 3)[0], (2,), minval=-0.2, maxval=0.2))
  for convention, half in (("extent", np.array([3.5, 2.0])), ("dinov3", np.array([4.0, 2.5]))):
    moved = coords_lib.augment(grid, key, shift=0.2, convention=convention, num_positions=(8, 5))
    np.testing.assert_allclose(
      np.asarray(moved) - np.asarray(grid), np.broadcast_to(u * half, (40, 2)), atol=1e-5
    )
  # DINOv3's own formula on its pixel-centre coordinates, mapped back to index steps.
  pixel = (np.asarray(grid) + 0.5) / np.array([8, 5]) * 2 - 1
  ours = coords_lib.augment(grid, key, **coords_lib.DINOV3, num_positions=(8, 5))
  r = math.exp(
    float(
      jax.random.uniform(
        jax.random.split(key, 3)[2], (), minval=-math.log(2.0), maxval=math.log(2.0)
      )
    )
  )
  np.testing.assert_allclose(
    (np.asarray(ours) + 0.5) / np.array([8, 5]) * 2 - 1, pixel * r, rtol=1e-5
  )
  extent = coords_lib.augment(grid, key, rescale=2.0)  # rescale alone: the same either way
  np.testing.assert_allclose(ours, extent, rtol=1e-5)
  with pytest.raises(ValueError, match="needs num_positions"):
    coords_lib.augment(grid, key, convention="dinov3")


def test_dinov3_shift_moves_a_one_cell_axis_by_half_its_u():
  """DINOv3 puts one cell at c = 0 and a shift u moves it to u: u·n/2 = u/2 index steps."""
  grid, key = coords_lib.grid((1, 4), "index"), jax.random.key(3)
  u = np.asarray(jax.random.uniform(jax.random.split(key, 3)[0], (2,), minval=-0.5, maxval=0.5))
  moved = coords_lib.augment(grid, key, shift=0.5, convention="dinov3", num_positions=(1, 4))
  np.testing.assert_allclose(np.asarray(moved) - np.asarray(grid), [u * [0.5, 2.0]] * 4, atol=1e-5)


def test_the_dinov3_preset_is_its_released_config():
  assert coords_lib.DINOV3 == {"rescale": 2.0, "convention": "dinov3"}  # shift, jitter: null
  assert coords_lib.check_augment(coords_lib.DINOV3, "x") == {
    "shift": 0.0, "jitter": 1.0, "rescale": 2.0, "convention": "dinov3"
  }  # fmt: skip


@pytest.mark.parametrize(
  "options, match",
  [
    ({"shfit": 0.1}, "coord_augment.shfit is unknown"),
    ({"jitter": 0.5}, "jitter must be"),
    ({"convention": "pixel"}, "coord_augment.convention='pixel'"),
  ],
)
def test_bad_options_name_the_field(options, match):
  with pytest.raises(ValueError, match=match):
    coords_lib.check_augment(options, "coord_augment")


def _vit(posemb: str, augment):
  return vit.Model(
    2, variant="mu/4", image_size=32, pool="gap", head_init_std=1.0, posemb=posemb,
    coord_augment=augment,
  )  # fmt: skip


@pytest.mark.parametrize(
  "posemb, options",
  [
    ("fourier(coords_mode='unit')", OPTIONS),
    ("rope_axial", OPTIONS),
    ("rope_axial", coords_lib.DINOV3),  # the preset reaches the model with the grid's shape
  ],
)
def test_the_vit_augments_when_training_and_never_at_evaluation(posemb, options):
  images = jax.random.uniform(jax.random.key(2), (2, 32, 32, 3))
  plain, augmented = _vit(posemb, None), _vit(posemb, options)
  variables = plain.init(jax.random.key(0), images, train=False)
  run = lambda model, train, seed=0: np.asarray(
    model.apply(variables, images, train=train, rngs={"dropout": jax.random.key(seed)})
  )
  np.testing.assert_allclose(run(augmented, False), run(plain, False), atol=1e-6)
  np.testing.assert_allclose(run(plain, True), run(plain, False), atol=1e-6)  # no dropout
  assert np.abs(run(augmented, True) - run(plain, True)).max() > 1e-4
  assert np.abs(run(augmented, True, 1) - run(augmented, True, 0)).max() > 1e-4  # new draw


@pytest.mark.parametrize("posemb", ["embed_2d", "rel_bias_2d", "none"])
def test_encodings_without_coordinates_refuse_augmentation(posemb):
  with pytest.raises(ValueError, match="reads no coordinates to augment"):
    _vit(posemb, OPTIONS).check()
