"""Detection preprocessing: DETR targets, native or resized sizes, padding, checks, config."""

import numpy as np
import pytest

from lfpe import data as data_lib
from lfpe.data import config, detection_ops, ops


def _element(bbox, label, crowd=None, image=None, image_id=7):
  objects = {"bbox": np.asarray(bbox, np.float32).reshape(-1, 4), "label": np.asarray(label)}
  if crowd is not None:
    objects["is_crowd"] = np.asarray(crowd)
  image = np.full((10, 20, 3), 255, np.uint8) if image is None else image
  return {"image": image, "image/id": np.int64(image_id), "objects": objects}


def _chain(size=10, max_size=12, max_targets=3, train=False):
  detection = detection_ops.Detection((size,), (size,), max_size, max_targets, name="toy")
  preprocess = ops.parse("value_range(0, 1)")
  return [*detection.ops(train, preprocess), ops.Keep(*detection_ops.OUTPUT), ops.Cast()]


def test_hand_checked_example():
  """A 10x20 image at size 10 is 5x10 (longer side 10), padded to 12x12; the crowd box is no
  target, kept after the targets at evaluation (`target_crowd`, COCO's `iscrowd`)."""
  element = _element([[0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1]], [3, 5], crowd=[False, True])
  out = ops.apply(_chain(), {**element, "size": np.int32(10)})
  assert sorted(out) == sorted(detection_ops.OUTPUT)
  want_boxes = [[0.4, 0.3, 0.4, 0.4], [0.5, 0.5, 1, 1], [0] * 4]
  np.testing.assert_allclose(out["boxes"], want_boxes, atol=1e-7)
  np.testing.assert_array_equal(out["labels"], [3, 5, 0])
  np.testing.assert_array_equal(out["target_valid"], [True, False, False])
  np.testing.assert_array_equal(out["target_crowd"], [False, True, False])
  trained = ops.apply(_chain(train=True), element, np.random.default_rng(0))
  np.testing.assert_array_equal(trained["labels"], [3, 0, 0])  # training: dropped, as DETR
  assert not trained["target_crowd"].any()
  np.testing.assert_array_equal(out["image_size"], [5, 10])
  assert out["image_id"] == 7 and out["image_id"].dtype == np.int32
  assert out["image"].shape == (12, 12, 3) and out["image"].dtype == np.float32
  want = np.ones((12, 12), bool)
  want[:5, :10] = False  # True = padding (DETR)
  np.testing.assert_array_equal(out["mask"], want)
  np.testing.assert_allclose(out["image"][:5, :10], 1.0)
  assert not out["image"][out["mask"]].any()


def test_native_size_is_taken_as_drawn():
  native = {s: np.random.default_rng(s).integers(0, 256, (s, s, 3), np.uint8) for s in (8, 16)}
  element = _element([[0.25, 0.25, 0.75, 0.5]], [1], image=None)
  del element["image"]
  element.update({f"image_{s}": v for s, v in native.items()})
  for size in (8, 16):
    out = ops.apply(_chain(size, max_size=16), {**element, "size": np.int32(size)})
    np.testing.assert_array_equal(out["image"][:size, :size], native[size] / np.float32(255))
    np.testing.assert_array_equal(out["image_size"], [size, size])
    np.testing.assert_allclose(out["boxes"][0], [0.375, 0.5, 0.25, 0.5])  # same at every size


def test_image_with_no_objects():
  out = ops.apply(_chain(), {**_element(np.zeros((0, 4)), []), "size": np.int32(10)})
  assert not out["target_valid"].any() and not out["boxes"].any() and not out["labels"].any()


@pytest.mark.parametrize(
  "bbox,want",
  [
    ([0.2, 0.3, 0.6, 0.3], None),  # zero width: dropped
    ([0.5, 0.1, 0.4, 0.2], None),  # negative height: dropped
    ([0.5, 1.1, 0.7, 1.3], None),  # right of the image: nothing left after clipping
    ([0.1, -0.1, 0.5, 0.5], [0.1, 0.0, 0.5, 0.5]),  # clipped to the image, as DETR
    ([0.1, 0.1, 1.2, 0.5], [0.1, 0.1, 1.0, 0.5]),
  ],
  ids=["zero-width", "negative-height", "right-of-image", "left-of-image", "below-image"],
)
def test_boxes_are_clipped_and_degenerate_ones_dropped_as_detr(bbox, want, caplog):
  element = _element([[0.1, 0.1, 0.2, 0.2], bbox], [0, 1], image_id=4242)
  out = ops.apply(_chain(), {**element, "size": np.int32(10)})
  if want is None:
    np.testing.assert_array_equal(out["target_valid"], [True, False, False])
    assert "image/id=4242 of toy: dropped 1 of 2 boxes" in caplog.text
    return
  ymin, xmin, ymax, xmax = want
  np.testing.assert_array_equal(out["target_valid"], [True, True, False])
  np.testing.assert_allclose(
    out["boxes"][1], [(xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin], atol=1e-6
  )
  np.testing.assert_array_equal(out["labels"][:2], [0, 1])
  assert "dropped" not in caplog.text


def test_non_finite_box_names_the_example():
  element = _element([[0.1, 0.1, 0.2, 0.2], [0.1, np.nan, 0.5, 0.5]], [0, 1], image_id=4242)
  with pytest.raises(ValueError, match=r"image/id=4242 of toy: box 1 .* is not finite"):
    ops.apply(_chain(), {**element, "size": np.int32(10)})


def test_too_many_objects_for_the_targets():
  element = _element([[0.1, 0.1, 0.2, 0.2]] * 4, [0] * 4, image_id=3)
  with pytest.raises(ValueError, match=r"image/id=3 of toy has 4 boxes.*max_targets`=3"):
    ops.apply(_chain(), {**element, "size": np.int32(10)})


def test_training_draws_sizes_per_example_reproducibly():
  op = detection_ops.RandomSize((32, 40, 48))
  draws = [int(op.random_map({}, np.random.default_rng(i))["size"]) for i in range(60)]
  again = [int(op.random_map({}, np.random.default_rng(i))["size"]) for i in range(60)]
  assert draws == again and set(draws) == {32, 40, 48}


def test_eval_sees_every_record_at_every_test_size():
  source = detection_ops.AtSizes([{"r": 0}, {"r": 1}, {"r": 2}], (56, 64))
  got = [(int(source[i]["size"]), source[i]["r"]) for i in range(len(source))]
  assert got == [(56, 0), (56, 1), (56, 2), (64, 0), (64, 1), (64, 2)]


def _detection(**kw):
  cfg = {"train_sizes": (32, 40), "test_sizes": (48,), "max_size": None, "max_targets": 8, **kw}
  limits = detection_ops.Limits(sizes=(32, 40, 48), max_objects=8)
  return detection_ops.Detection.create(cfg, "toy", limits)


def test_detection_config_defaults():
  d = _detection()
  assert (d.train_sizes, d.test_sizes, d.max_size, d.max_targets) == ((32, 40), (48,), 48, 8)
  assert _detection(max_size=64).max_size == 64


@pytest.mark.parametrize(
  "kw,match",
  [
    ({"train_sizes": (32, 36)}, r"train_sizes`=\(32, 36\): toy is not drawn at \[36\]"),
    ({"test_sizes": ()}, "test_sizes`=.* non-empty"),
    ({"train_sizes": (32.0,)}, "train_sizes`=32.0 must be a positive int"),
    ({"max_size": 40}, "max_size`=40 is below the largest size 48"),
    ({"max_targets": 4}, "max_targets`=4: toy has up to 8 objects"),
    ({"sizes": (32,)}, r"unknown fields \['sizes'\]"),
  ],
)
def test_detection_config_errors_name_the_field(kw, match):
  with pytest.raises(ValueError, match=match):
    _detection(**kw)


def test_data_config_detection_branch():
  cfg = data_lib.default_config("shapes_detection/small")
  assert cfg.detection.train_sizes == cfg.detection.test_sizes == (32, 40, 48, 56, 64)
  assert data_lib.detection_info(cfg) == (6, (64, 64), 8)  # classes, canvas, targets
  cfg.image_size = 32
  with pytest.raises(ValueError, match="leave `data.image_size` None"):
    config.resolve(cfg)
  cfg.image_size, cfg.detection = None, None
  with pytest.raises(ValueError, match="is a detection dataset: set `data.detection`"):
    config.resolve(cfg)


def test_coco_opts_in_and_other_datasets_have_no_boxes():
  coco = data_lib.default_config("coco/2017")
  assert coco.detection is None  # the `boxes|resize_pad` ops, unless set:
  coco.detection = data_lib.detection_config((64, 96), max_targets=100)
  resolved = config.resolve(coco)
  assert (resolved.detection.max_size, resolved.detection.test_sizes) == (96, (64, 96))
  digits = data_lib.default_config("digits")
  digits.detection = data_lib.detection_config((16,))
  with pytest.raises(ValueError, match="has no boxes"):
    config.resolve(digits)
