"""DETR's shorter-side sizes on a natively drawn dataset: `RandomShortSide`, `Crop`, config."""

import numpy as np
import pytest

from lfpe.data import detection_ops, ops


def _targets(boxes, labels, slots=4):
  """Targets as `Targets` leaves them: (cx, cy, w, h) normalised, padded to `slots`."""
  out = {"boxes": np.zeros((slots, 4), np.float32), "labels": np.zeros(slots, np.int32)}
  out["boxes"][: len(boxes)], out["labels"][: len(labels)] = boxes, labels
  out["target_valid"] = np.arange(slots) < len(boxes)
  return out


def test_crop_clips_renormalises_and_drops_hidden_targets():
  """A 16x16 image cut to rows 4-11: pixel boxes (x0, y0, x1, y1) worked out by hand."""
  image = np.arange(16 * 16 * 3, dtype=np.int32).reshape(16, 16, 3)
  pixel = np.array(
    [
      [2, 6, 6, 10],  # inside: stays (2, 2, 6, 6) in the window
      [8, 2, 12, 10],  # rows 2-10, 6 of its 8 rows visible (75 %): clipped to rows 0-6
      [0, 0, 4, 5],  # rows 0-5, 1 of 5 visible (20 %): dropped
      [10, 8, 14, 16],  # rows 8-16, 4 of 8 visible (exactly 50 %): stays, rows 4-8
    ],
    np.float32,
  )
  cxcywh = np.stack(
    [
      (pixel[:, 0] + pixel[:, 2]) / 2,
      (pixel[:, 1] + pixel[:, 3]) / 2,
      *(pixel[:, 2:] - pixel[:, :2]).T,
    ],
    -1,
  )
  element = {"image": image, **_targets(cxcywh / 16, [1, 2, 3, 4]), "crop": np.int32([4, 0, 8, 16])}
  out = detection_ops.Crop().map(element)
  np.testing.assert_array_equal(out["image"], image[4:12])
  np.testing.assert_array_equal(out["image_size"], [8, 16])
  want = np.array([[4, 4, 4, 4], [10, 3, 4, 6], [12, 6, 4, 4]], np.float32) / [16, 8, 16, 8]
  np.testing.assert_allclose(out["boxes"][:3], want, atol=1e-6)
  np.testing.assert_array_equal(out["boxes"][3], 0)
  np.testing.assert_array_equal(out["labels"], [1, 2, 4, 0])
  np.testing.assert_array_equal(out["target_valid"], [True, True, True, False])
  assert "crop" not in out


def test_short_side_draws_cover_every_shape_reproducibly():
  op = detection_ops.RandomShortSide((32, 40, 48), longer=(32, 40, 48, 56, 64))
  draws = [op.random_map({}, np.random.default_rng(i)) for i in range(400)]
  again = [op.random_map({}, np.random.default_rng(i)) for i in range(400)]
  assert all(np.array_equal(a["crop"], b["crop"]) for a, b in zip(draws, again, strict=True))
  shapes = set()
  for d in draws:
    size, (y0, x0, h, w) = int(d["size"]), d["crop"].tolist()
    assert 0 <= y0 and y0 + h <= size and 0 <= x0 and x0 + w <= size
    assert max(h, w) == size and min(h, w) in (32, 40, 48)
    shapes.add((h, w))
  pairs = {(s, long) for s in (32, 40, 48) for long in (32, 40, 48, 56, 64) if long >= s}
  assert shapes == pairs | {(long, s) for s, long in pairs}  # both orientations


def _detection(sizes=(32, 40, 48, 56), **kw):
  cfg = {"train_sizes": (32, 40), "test_sizes": (48,), "max_size": 48, "max_targets": 8, **kw}
  return detection_ops.Detection.create(cfg, "toy", detection_ops.Limits(sizes=sizes))


def test_short_side_config_and_ops():
  d = _detection(train_side="short")
  assert d.longer_sides == (32, 40, 48)  # the dataset's sizes up to the canvas
  names = lambda train: [type(op).__name__ for op in d.ops(train, [])]
  assert names(True) == ["RandomShortSide", "Targets", "AtSize", "Crop", "Pad"]
  assert names(False) == ["Targets", "AtSize", "Pad"]  # tests stay square
  assert _detection().train_side == "long" and "Crop" not in str(_detection().ops(True, []))


@pytest.mark.parametrize(
  "kw,match",
  [
    ({"train_side": "longer"}, r"train_side`='longer'; use one of \('long', 'short'\)"),
    ({"train_side": "short", "sizes": None}, "toy is resized to each size. Use train_side='long'"),
  ],
)
def test_short_side_errors_name_the_field(kw, match):
  with pytest.raises(ValueError, match=match):
    _detection(**kw)


def test_cropped_example_is_padded_with_its_mask():
  native = np.random.default_rng(0).integers(0, 256, (16, 16, 3), np.uint8)
  element = {"image_16": native, "image/id": np.int64(1), "size": np.int32(16)}
  element |= {"crop": np.int32([0, 6, 16, 8]), "objects": {"bbox": np.zeros((0, 4)), "label": []}}
  chain = [
    detection_ops.Targets(2),
    detection_ops.AtSize(),
    detection_ops.Crop(),
    detection_ops.Pad(16),
  ]
  out = ops.apply(chain, element)
  np.testing.assert_array_equal(out["image"][:, :8], native[:, 6:14])
  assert out["mask"][:, 8:].all() and not out["mask"][:, :8].any()
