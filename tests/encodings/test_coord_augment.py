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


@pytest.mark.parametrize(
  "options, match",
  [({"shfit": 0.1}, "coord_augment.shfit is unknown"), ({"jitter": 0.5}, "jitter must be")],
)
def test_bad_options_name_the_field(options, match):
  with pytest.raises(ValueError, match=match):
    coords_lib.check_augment(options, "coord_augment")


def _vit(posemb: str, augment):
  return vit.Model(
    2, variant="mu/4", image_size=32, pool="gap", head_init_std=1.0, posemb=posemb,
    coord_augment=augment,
  )  # fmt: skip


@pytest.mark.parametrize("posemb", ["fourier(coords_mode='unit')", "rope_axial"])
def test_the_vit_augments_when_training_and_never_at_evaluation(posemb):
  images = jax.random.uniform(jax.random.key(2), (2, 32, 32, 3))
  plain, augmented = _vit(posemb, None), _vit(posemb, OPTIONS)
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
