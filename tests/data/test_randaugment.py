"""RandAugment: its ops against their formulas, the draw, and the spec string."""

import numpy as np
import PIL.Image
import pytest

from lfpe.data import ops, randaugment

RNG = np.random.default_rng(0)
IMAGE = RNG.integers(0, 256, (24, 32, 3)).astype(np.uint8)


def _op(name, m, image=IMAGE, seed=0):
  out = randaugment._apply(name, PIL.Image.fromarray(image), m, np.random.default_rng(seed))
  return np.asarray(out)


def test_posterize_keeps_the_top_bits():
  for m, bits in ((0, 4), (5, 2), (9, 1), (10, 1)):
    np.testing.assert_array_equal(_op("posterize", m), IMAGE & (0xFF << (8 - bits) & 0xFF))


def test_solarize_inverts_from_the_threshold():
  for m in (0, 3, 10):
    threshold = 256 - int(256 * m / 10)
    np.testing.assert_array_equal(
      _op("solarize", m), np.where(IMAGE >= threshold, 255 - IMAGE, IMAGE)
    )


def test_solarize_add_adds_below_128_and_saturates():
  want = np.where(IMAGE < 128, np.minimum(IMAGE.astype(int) + 99, 255), IMAGE)
  np.testing.assert_array_equal(_op("solarize_add", 9), want)


def test_invert_and_brightness_by_formula():
  np.testing.assert_array_equal(_op("invert", 5), 255 - IMAGE)
  # brightness blends with black: factor 1 ± 0.9·m/10, sign drawn first from the rng
  sign = -1.0 if np.random.default_rng(0).uniform() < 0.5 else 1.0
  factor = 1.0 + sign * 0.9 * 0.5
  np.testing.assert_allclose(_op("brightness", 5), np.clip(IMAGE * factor, 0, 255), atol=1)


@pytest.mark.parametrize("name", ["rotate", "shear_x", "shear_y", "translate_x", "translate_y"])
def test_geometric_ops_are_the_identity_at_magnitude_zero_and_move_pixels_otherwise(name):
  np.testing.assert_array_equal(_op(name, 0), IMAGE)
  moved = _op(name, 10)
  assert not np.array_equal(moved, IMAGE) and moved.shape == IMAGE.shape


def test_translate_moves_by_the_fraction_of_the_side_and_fills_grey():
  out = _op("translate_x", 10, seed=0)  # ±0.45 · 32 = 14.4 px
  sign = -1.0 if np.random.default_rng(0).uniform() < 0.5 else 1.0
  shift = round(sign * 0.45 * 32)
  if shift > 0:  # output x reads input x + shift
    np.testing.assert_array_equal(out[:, : 32 - shift], IMAGE[:, shift:])
    assert (out[:, 32 - shift + 1 :] == 128).all()
  else:
    np.testing.assert_array_equal(out[:, -shift:], IMAGE[:, : 32 + shift])
    assert (out[:, : -shift - 1] == 128).all()


def test_rand_augment_is_reproducible_and_draws_num_ops():
  op = ops.parse("rand_augment(num_ops=2, magnitude=9, magnitude_std=0.5)")[0]
  a = op.random_map({"image": IMAGE}, np.random.default_rng(7))["image"]
  b = op.random_map({"image": IMAGE}, np.random.default_rng(7))["image"]
  np.testing.assert_array_equal(a, b)
  assert a.shape == IMAGE.shape and a.dtype == np.uint8
  same = ops.parse("rand_augment(num_ops=0)")[0].random_map({"image": IMAGE}, RNG)["image"]
  np.testing.assert_array_equal(same, IMAGE)
  grey = IMAGE[..., :1]
  assert op.random_map({"image": grey}, np.random.default_rng(1))["image"].shape == grey.shape


def test_bad_arguments_and_float_images_are_refused():
  with pytest.raises(ValueError, match="magnitude=11"):
    randaugment.RandAugment(magnitude=11)
  with pytest.raises(ValueError, match="uint8 images"):
    randaugment.RandAugment().random_map({"image": IMAGE / 255.0}, RNG)


def test_each_op_applies_with_prob_as_timms_augment_op():
  """timm applies each drawn op with probability 0.5: about a quarter of the images (both
  ops skipped, plus ops that leave this image as it is) come out untouched; prob=1: almost
  none."""

  def untouched(spec):
    op = ops.parse(spec)[0]
    rng = np.random.default_rng(3)
    return np.mean(
      [np.array_equal(op.random_map({"image": IMAGE}, rng)["image"], IMAGE) for _ in range(400)]
    )

  assert 0.18 < untouched("rand_augment(2, 9)") < 0.40
  assert untouched("rand_augment(2, 9, prob=1.0)") < 0.05


def test_geometric_ops_resample_with_the_interpolation(monkeypatch):
  """DeiT's bicubic by default (PIL's own rotate is nearest)."""
  monkeypatch.setattr(randaugment, "OPS", ("rotate",))
  for interpolation, resample in (("bicubic", PIL.Image.BICUBIC), ("nearest", PIL.Image.NEAREST)):
    op = randaugment.RandAugment(num_ops=1, prob=1.0, interpolation=interpolation)
    out = op.random_map({"image": IMAGE}, np.random.default_rng(0))["image"]
    rng = np.random.default_rng(0)
    rng.choice(("rotate",), 1), rng.uniform()  # the op's draw, then its prob's
    angle = (-1.0 if rng.uniform() < 0.5 else 1.0) * 0.9 * 30
    want = PIL.Image.fromarray(IMAGE).rotate(angle, resample, fillcolor=randaugment.FILL)
    np.testing.assert_array_equal(out, np.asarray(want))
  with pytest.raises(ValueError, match="interpolation"):
    randaugment.RandAugment(interpolation="lanczos")
