"""COCO evaluation of in-memory arrays: perfect detections, shifted ones, empty images."""

import math

import numpy as np
import pytest

from lfpe.tasks.coco_eval import METRICS, area_ranges, coco_evaluate

# Three images of 640 px, padded to T = 3 targets; image 2 has none. Areas: 20² (small),
# 60² (medium), 200² (large) and 10x30 (small).
TARGET_BOXES = np.array(
  [
    [[10, 10, 30, 30], [100, 100, 160, 160], [300, 200, 500, 400]],
    [[50, 60, 60, 90], [0, 0, 0, 0], [0, 0, 0, 0]],
    [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
  ],
  np.float32,
)
TARGET_LABELS = np.array([[0, 1, 2], [1, -1, -1], [-1, -1, -1]], np.int32)
TARGET_VALID = TARGET_LABELS >= 0


def _perfect():
  """The ground truth as detections with score 1 (padding slots marked invalid)."""
  return np.ones(TARGET_LABELS.shape, np.float32), TARGET_LABELS, TARGET_BOXES, TARGET_VALID


def _evaluate(scores, labels, boxes, valid=None, image_size=640):
  return coco_evaluate(
    scores,
    labels,
    boxes,
    TARGET_LABELS,
    TARGET_BOXES,
    TARGET_VALID,
    image_size=image_size,
    detection_valid=valid,
  )


def test_ground_truth_as_detections_gives_ap_one(capsys):
  metrics = _evaluate(*_perfect())
  assert sorted(metrics) == sorted(METRICS)
  for name in METRICS:
    assert metrics[name] == pytest.approx(1.0), name
  assert capsys.readouterr().out == ""  # pycocotools' printing is swallowed


def test_shifted_detection_lowers_ap():
  scores, labels, boxes, valid = _perfect()
  shifted = boxes.copy()
  shifted[0, 2] += [100, 100, 100, 100]  # the large box: IoU 1/7 with its target
  metrics = _evaluate(scores, labels, shifted, valid)
  assert metrics["AP_large"] == pytest.approx(0.0)
  assert metrics["AP"] < 0.9 and metrics["AP_small"] == pytest.approx(1.0)
  slightly = boxes.copy()
  slightly[0, 2] += [12, 12, 12, 12]  # IoU 0.79: a hit at IoU 0.5 and 0.75, not above
  metrics = _evaluate(scores, labels, slightly, valid)
  assert metrics["AP50"] == pytest.approx(1.0) and metrics["AP75"] == pytest.approx(1.0)
  assert 0.5 < metrics["AP_large"] < 1.0


def test_extra_low_score_false_positives_keep_ap_and_wrong_class_drops_it():
  scores, labels, boxes, valid = _perfect()
  scores = np.concatenate([scores, np.full((3, 1), 0.1, np.float32)], 1)
  labels = np.concatenate([labels, np.ones((3, 1), np.int32)], 1)
  boxes = np.concatenate([boxes, np.tile([[[400, 0, 440, 40]]], (3, 1, 1))], 1)
  valid = np.concatenate([valid, np.ones((3, 1), bool)], 1)  # one false positive per image
  assert _evaluate(scores, labels, boxes, valid)["AP"] == pytest.approx(1.0)
  wrong = labels.copy()
  wrong[0, 0] = 2
  assert _evaluate(scores, wrong, boxes, valid)["AP_small"] < 1.0


def test_images_without_detections():
  scores, labels, boxes, valid = _perfect()
  valid = valid.copy()
  valid[1] = False  # image 1 gets no detection: its one small target is missed
  metrics = _evaluate(scores, labels, boxes, valid)
  assert metrics["AP_large"] == pytest.approx(1.0) and metrics["AP"] < 1.0
  nothing = _evaluate(scores, labels, boxes, np.zeros_like(valid))
  for name in METRICS:
    assert nothing[name] == 0.0, name


def test_no_targets_anywhere_gives_nan():
  metrics = coco_evaluate(
    *_perfect()[:3],
    TARGET_LABELS,
    TARGET_BOXES,
    np.zeros_like(TARGET_VALID),
    image_size=640,
  )
  assert all(math.isnan(v) for v in metrics.values())


def test_area_ranges_scale_with_image_size():
  assert area_ranges(640)[1:] == [[0.0, 1024.0], [1024.0, 9216.0], [9216.0, 1e10]]
  assert area_ranges(160)[2] == [64.0, 576.0]
  # A 20x20 box (area 400) is small on 640 px images, medium on 160 px images.
  scores, labels, boxes, valid = _perfect()
  only = np.zeros_like(valid)
  only[0, 0] = True
  kwargs = dict(target_labels=TARGET_LABELS, target_boxes=TARGET_BOXES, target_valid=only)
  at_640 = coco_evaluate(scores, labels, boxes, **kwargs, image_size=640, detection_valid=only)
  at_160 = coco_evaluate(scores, labels, boxes, **kwargs, image_size=160, detection_valid=only)
  assert at_640["AP_small"] == pytest.approx(1.0) and math.isnan(at_640["AP_medium"])
  assert at_160["AP_medium"] == pytest.approx(1.0) and math.isnan(at_160["AP_small"])


def test_images_of_several_sizes_are_each_bucketed_at_their_own_size():
  """One object at the same relative size in a 640 px and a 320 px image (40x40 and 20x20 px):
  both medium on COCO's scale (9.4 % of the side), as each alone; scored with one size for
  both (the largest), the 320 px one fell into "small". AP is the same either way."""
  labels = np.array([[1], [1]])
  boxes = np.array([[[100.0, 100.0, 140.0, 140.0]], [[50.0, 50.0, 70.0, 70.0]]])
  valid = np.ones((2, 1), bool)
  sizes = np.array([640.0, 320.0])
  together = coco_evaluate(np.ones((2, 1)), labels, boxes, labels, boxes, valid, image_size=sizes)
  assert math.isnan(together["AP_small"]) and together["AP_medium"] == pytest.approx(1.0)
  assert together["AP"] == pytest.approx(1.0)
  for i in range(2):
    alone = coco_evaluate(
      np.ones((1, 1)), labels[i : i + 1], boxes[i : i + 1], labels[i : i + 1],
      boxes[i : i + 1], valid[i : i + 1], image_size=sizes[i],
    )  # fmt: skip
    assert math.isnan(alone["AP_small"]) and alone["AP_medium"] == pytest.approx(1.0)


def test_a_detection_on_a_crowd_region_is_ignored_not_a_false_positive():
  """COCO's `iscrowd`: one real object found, and a second confident detection on a crowd
  region; without the crowd annotation it is a false positive ranked first (AP < 1)."""
  labels = np.array([[1, 1]])
  targets = np.array([[[10.0, 10.0, 50.0, 50.0], [100.0, 100.0, 200.0, 200.0]]])
  detections = targets.copy()
  scores = np.array([[0.5, 0.9]])  # the crowd region's detection ranks first
  real, crowd = np.array([[True, False]]), np.array([[False, True]])
  kwargs = dict(target_labels=labels, target_boxes=targets, target_valid=real, image_size=640)
  ignored = coco_evaluate(scores, labels, detections, **kwargs, target_crowd=crowd)
  counted = coco_evaluate(scores, labels, detections, **kwargs)
  assert ignored["AP"] == pytest.approx(1.0)
  assert counted["AP"] < 0.9
