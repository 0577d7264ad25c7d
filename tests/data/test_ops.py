"""Preprocessing ops: resizing against jax.image.resize, crops, flips, boxes, spec parsing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.data import detection_ops, image_ops, ops

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("method,jax_method", [("nearest", "nearest"), ("bilinear", "linear")])
@pytest.mark.parametrize("shape,size", [((8, 8, 1), 32), ((8, 6, 3), (12, 15)), ((20, 16, 2), 7)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_matches_jax(method, jax_method, shape, size, dtype):
  image = RNG.integers(0, 256, shape).astype(dtype)
  out = image_ops.resize_image(image, size, method)
  h, w = (size, size) if isinstance(size, int) else size
  expected = jax.image.resize(jnp.asarray(image, jnp.float32), (h, w, shape[2]), jax_method)
  # uint8 RGB / gray bilinear: Pillow's fixed-point passes, each rounded to whole levels
  fixed_point = method == "bilinear" and dtype == np.uint8 and shape[2] in image_ops.PIL_MODES
  assert out.shape == (h, w, shape[2])
  np.testing.assert_allclose(out, np.asarray(expected), atol=1.01 if fixed_point else 1e-3)


@pytest.mark.parametrize(
  "shape,size", [((16, 16, 1), 8), ((9, 13, 3), (4, 5)), ((8, 6, 5), (12, 15)), ((30, 20, 3), 7)]
)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_without_antialias_matches_jax(shape, size, dtype):
  image = RNG.integers(0, 256, shape).astype(dtype)
  h, w = (size, size) if isinstance(size, int) else size
  out = image_ops.resize_image(image[:, ::-1], size, antialias=False)  # a strided view too
  scale = jnp.array([h / shape[0], w / shape[1]])
  expected = jax.image.scale_and_translate(
    jnp.asarray(image[:, ::-1], jnp.float32),
    (h, w, shape[2]),
    (0, 1),
    scale,
    jnp.zeros(2),
    "linear",
    antialias=False,
  )
  assert out.shape == (h, w, shape[2]) and out.dtype == np.float32
  np.testing.assert_allclose(out, np.asarray(expected), atol=2e-3)


def test_antialias_only_changes_shrinking():
  # [0, 4, 8, 12] halved: centres at 0.5 and 2.5. Without antialiasing the 2 pixels around
  # each (2, 10); with, the triangle of half-width 2: (0.75*0 + 0.75*4 + 0.25*8) / 1.75 at
  # the left edge (pixel -1's weight dropped), and symmetric on the right.
  image = np.array([[0.0, 4.0, 8.0, 12.0]], np.float32)[..., None]
  sharp = image_ops.resize_image(image, (1, 2), antialias=False)
  np.testing.assert_allclose(sharp[0, :, 0], [2.0, 10.0], atol=1e-6)
  smooth = image_ops.resize_image(image, (1, 2))
  np.testing.assert_allclose(smooth[0, :, 0], [5 / 1.75, 12 - 5 / 1.75], atol=1e-4)
  up = RNG.uniform(0, 255, (5, 7, 3)).astype(np.float32)  # growing: the same filter
  np.testing.assert_allclose(
    image_ops.resize_image(up, (11, 9), antialias=False),
    image_ops.resize_image(up, (11, 9)),
    atol=2e-3,
  )


@pytest.mark.parametrize(
  "spec,field",
  [
    ("resize(8, antialias='no')", "antialias"),
    ("resize_small(8, 'cubic')", "method"),
    ("inception_crop(8, antialias=1)", "antialias"),
  ],
)
def test_resize_options_are_checked_when_parsed(spec, field):
  with pytest.raises(ValueError, match=f"`{field}`"):
    ops.parse(spec)


def test_nearest_upsampling_is_pixel_blocks():
  image = np.arange(16, dtype=np.uint8).reshape(4, 4, 1)
  out = image_ops.resize_image(image, 12, "nearest")
  assert out.dtype == np.uint8
  np.testing.assert_array_equal(out, np.repeat(np.repeat(image, 3, 0), 3, 1))


def test_bilinear_hand_values():
  # 1-D [0, 4] upsampled x2 with half-pixel centres: samples at -0.25, 0.25, 0.75, 1.25.
  image = np.array([[0.0, 4.0]], np.float32)[..., None]
  out = image_ops.resize_image(image, (1, 4))
  np.testing.assert_allclose(out[0, :, 0], [0.0, 1.0, 3.0, 4.0])


def test_value_range_and_normalize():
  element = {"image": np.array([[[0], [255]]], np.uint8)}
  out = ops.ValueRange(-1, 1).map(element)["image"]
  np.testing.assert_allclose(out[..., 0], [[-1.0, 1.0]])
  image = np.array([[[0.5, 1.0, 0.0]]], np.float32)
  out = ops.Normalize((0.5, 0.5, 0.25), (0.5, 0.25, 0.5)).map({"image": image})["image"]
  np.testing.assert_allclose(out, [[[0.0, 2.0, -0.5]]])


def test_random_crop_with_padding_is_a_shifted_window():
  image = RNG.integers(1, 256, (8, 8, 1)).astype(np.uint8)
  padded = np.pad(image, ((2, 2), (2, 2), (0, 0)))
  crops = set()
  for seed in range(20):
    out = ops.apply([image_ops.RandomCrop(8, 2)], {"image": image}, np.random.default_rng(seed))
    matches = [
      (t, x)
      for t in range(5)
      for x in range(5)
      if np.array_equal(out["image"], padded[t : t + 8, x : x + 8])
    ]
    assert matches
    crops.add(matches[0])
  assert len(crops) > 3  # The offset varies.


def test_flip_lr_flips_image_and_boxes():
  image = np.arange(6, dtype=np.uint8).reshape(1, 6, 1)
  boxes = np.array([[0.25, 0.5, 0.1, 0.2], [0, 0, 0, 0]], np.float32)
  element = {"image": image, "boxes": boxes, "box_mask": np.array([True, False])}
  out = image_ops.FlipLr(p=1.0).random_map(element, np.random.default_rng(0))
  np.testing.assert_array_equal(out["image"][0, :, 0], [5, 4, 3, 2, 1, 0])
  np.testing.assert_allclose(out["boxes"], [[0.75, 0.5, 0.1, 0.2], [0, 0, 0, 0]])
  assert image_ops.FlipLr(p=0.0).random_map(element, np.random.default_rng(0)) is element


def test_inception_crop_size_and_determinism():
  image = RNG.integers(0, 256, (40, 30, 3)).astype(np.uint8)
  op = image_ops.InceptionCrop(16)
  a = op.random_map({"image": image}, np.random.default_rng(5))["image"]
  b = op.random_map({"image": image}, np.random.default_rng(5))["image"]
  c = op.random_map({"image": image}, np.random.default_rng(6))["image"]
  assert a.shape == (16, 16, 3)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)
  # big_vision's resize: the same window (same draws), read without antialiasing
  sharp = ops.parse("inception_crop(16, antialias=False)")[0]
  d = sharp.random_map({"image": image}, np.random.default_rng(5))["image"]
  assert d.shape == (16, 16, 3) and not np.allclose(a, d, atol=1.01)


def test_resize_small_and_central_crop():
  image = np.arange(20 * 10, dtype=np.uint8).reshape(20, 10, 1)
  out = ops.apply(ops.parse("resize_small(5, 'nearest')|central_crop(4)"), {"image": image})
  small = image[1::2, 1::2]  # nearest halving picks odd rows/cols: [10, 5]
  np.testing.assert_array_equal(out["image"], small[3:7, 0:4])


def test_boxes_and_resize_pad():
  objects = {
    "bbox": np.array([[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0], [0.2, 0.2, 0.4, 0.4]]),
    "label": np.array([3, 7, 9]),
    "is_crowd": np.array([False, True, False]),
  }
  element = {"image": np.full((10, 20, 3), 255, np.uint8), "objects": objects}
  out = ops.apply(ops.parse("boxes(3)|resize_pad(8)"), element)
  # (ymin, xmin, ymax, xmax) -> (cx, cy, w, h); the crowd box is dropped.
  np.testing.assert_allclose(out["boxes"], [[0.4, 0.3, 0.4, 0.4], [0.3, 0.3, 0.2, 0.2], [0] * 4])
  np.testing.assert_array_equal(out["box_labels"], [3, 9, 0])
  np.testing.assert_array_equal(out["box_mask"], [True, True, False])
  assert out["image"].shape == (8, 8, 3) and "objects" not in out
  np.testing.assert_array_equal(out["image_mask"].sum(0), [4] * 8)  # 10x20 -> 4x8, top rows
  assert out["image_mask"][:4].all() and not out["image_mask"][4:].any()
  np.testing.assert_allclose(out["image"][:4], 255)
  np.testing.assert_array_equal(out["image"][4:], 0)


def test_onehot_keep_and_cast():
  element = {"image": np.zeros((2, 2, 1), np.float64), "label": np.int64(2), "id": b"x"}
  out = ops.apply([ops.Keep("image", "label"), ops.Onehot(4), ops.Cast()], element)
  assert sorted(out) == ["image", "label", "labels"]
  np.testing.assert_array_equal(out["labels"], [0, 0, 1, 0])
  assert (out["image"].dtype, out["label"].dtype) == (np.float32, np.int32)


def test_parse():
  parsed = ops.parse("resize(32, method='nearest')|flip_lr|value_range(-1, 1)")
  assert [type(op).__name__ for op in parsed] == ["Resize", "FlipLr", "ValueRange"]
  assert parsed[0].size == 32 and parsed[0].method == "nearest" and parsed[2].vmin == -1
  assert ops.parse("") == [] and ops.parse(None) == []
  assert isinstance(ops.parse("boxes(5)")[0], detection_ops.Boxes)


@pytest.mark.parametrize(
  "spec,match",
  [
    ("rezise(32)", "Unknown op 'rezise'"),
    ("resize(size=x)", r"not of the form .*: its arguments must be literals \(quote a string"),
    ("value_range(0, 1, 2, 3, 4)", "Bad arguments"),
    ("resize(32, 'cubic')|", None),
  ],
)
def test_parse_errors(spec, match):
  if match is None:  # Bad values surface when the op runs.
    with pytest.raises(ValueError, match="method"):
      ops.apply(ops.parse(spec), {"image": np.zeros((4, 4, 1), np.uint8)})
    return
  with pytest.raises(ValueError, match=match):
    ops.parse(spec)


@pytest.mark.parametrize("seed", range(8))
def test_random_erasing_fills_one_rectangle_of_the_drawn_area(seed):
  image = np.full((40, 50, 3), 7, np.uint8)
  op = ops.parse("random_erasing(p=1.0, mode='const')")[0]
  out = op.random_map({"image": image}, np.random.default_rng(seed))["image"]
  erased = np.all(out == 0, axis=-1)
  assert erased.any() and (out[~erased] == 7).all()
  rows, cols = np.flatnonzero(erased.any(1)), np.flatnonzero(erased.any(0))
  assert erased[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].all()  # a rectangle
  assert 0.02 * 0.8 <= erased.mean() <= (1 / 3) * 1.2  # the area range, rounding aside
  aspect = len(rows) / len(cols)
  assert 0.3 * 0.8 <= aspect <= (1 / 0.3) * 1.2


def test_random_erasing_probability_and_pixel_mode():
  image = np.full((40, 50, 3), 7, np.uint8)
  op = image_ops.RandomErasing(p=0.25)
  draws = [op.random_map({"image": image}, np.random.default_rng(s))["image"] for s in range(400)]
  changed = [not np.array_equal(d, image) for d in draws]
  assert 0.18 < np.mean(changed) < 0.32  # p = 0.25
  assert len(np.unique(draws[changed.index(True)])) > 50  # random pixel values
  with pytest.raises(ValueError, match="mode='zeros' must be"):
    image_ops.RandomErasing(mode="zeros")
