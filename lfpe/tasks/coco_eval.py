"""COCO box AP of in-memory detections with pycocotools (no annotation files).

Inputs are padded numpy arrays over N images: detections as `postprocess` returns them
(scores `[N, Q]`, labels `[N, Q]`, xyxy pixel boxes `[N, Q, 4]`) and targets (labels
`[N, T]`, xyxy pixel boxes `[N, T, 4]`, valid `[N, T]`). Images are numbered 1..N and
category ids are the integer labels.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

METRICS = ("AP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large")  # COCOeval.stats[:6]
MAX_AREA = 1e5**2  # COCOeval's upper bound of the "all" and "large" ranges


def area_ranges(image_size: float, reference_size: float = 640.0) -> list[list[float]]:
  """COCOeval's areaRng (all, small, medium, large) for images of side `image_size` px.

  COCO's small < 32² <= medium < 96² <= large are pixel areas of images ~640 px a side;
  on images resized to `image_size`, objects shrink by image_size / reference_size per
  side, so both thresholds are scaled by (image_size / reference_size)².
  """
  scale = (image_size / reference_size) ** 2
  small, medium = 32**2 * scale, 96**2 * scale
  return [[0.0, MAX_AREA], [0.0, small], [small, medium], [medium, MAX_AREA]]


def _xywh(box: np.ndarray) -> list[float]:
  x0, y0, x1, y1 = (float(v) for v in box)
  return [x0, y0, x1 - x0, y1 - y0]


def _ground_truth(
  labels: np.ndarray, boxes: np.ndarray, valid: np.ndarray, crowd: np.ndarray, classes: np.ndarray
) -> COCO:
  """A COCO object of images 1..N, their real targets and crowd regions (`iscrowd`: detections
  on them are ignored; area = box area) and `classes`."""
  annotations = []
  for is_crowd, kept in ((0, valid), (1, crowd)):
    for image, label, box in zip(np.nonzero(kept)[0], labels[kept], boxes[kept], strict=True):
      x, y, w, h = _xywh(box)
      annotations.append(
        {
          "id": len(annotations) + 1,  # >= 1: COCOeval reads id 0 as "unmatched"
          "image_id": int(image) + 1,
          "category_id": int(label),
          "bbox": [x, y, w, h],
          "area": w * h,
          "iscrowd": is_crowd,
        }
      )
  coco = COCO()
  coco.dataset = {
    "images": [{"id": i + 1} for i in range(labels.shape[0])],
    "annotations": annotations,
    "categories": [{"id": int(c)} for c in classes],
  }
  coco.createIndex()
  return coco


def _detections(
  scores: np.ndarray, labels: np.ndarray, boxes: np.ndarray, valid: np.ndarray
) -> list[dict]:
  """COCO result dicts (image_id, category_id, bbox xywh, score) of the valid detections."""
  return [
    {"image_id": int(i) + 1, "category_id": int(c), "bbox": _xywh(b), "score": float(s)}
    for i, s, c, b in zip(
      np.nonzero(valid)[0], scores[valid], labels[valid], boxes[valid], strict=True
    )
  ]


def _results(gt: COCO, detections: list[dict]) -> COCO:
  """`gt.loadRes(detections)`; loadRes cannot take an empty list, so that gets a bare COCO."""
  if detections:
    return gt.loadRes(detections)
  res = COCO()
  res.dataset = {**gt.dataset, "annotations": []}
  res.createIndex()
  return res


def coco_evaluate(
  scores: np.ndarray,
  labels: np.ndarray,
  boxes: np.ndarray,
  target_labels: np.ndarray,
  target_boxes: np.ndarray,
  target_valid: np.ndarray,
  *,
  image_size: float | np.ndarray,
  reference_size: float = 640.0,
  detection_valid: np.ndarray | None = None,
  target_crowd: np.ndarray | None = None,
) -> dict[str, float]:
  """COCO box AP {'AP', 'AP50', 'AP75', 'AP_small', 'AP_medium', 'AP_large'} in [0, 1].

  Detections: scores / labels `[N, Q]`, boxes `[N, Q, 4]` xyxy pixels, all Q per image
  unless `detection_valid [N, Q]` says otherwise (COCOeval keeps the 100 best per image).
  Targets: labels `[N, T]`, boxes `[N, T, 4]` xyxy pixels, target_valid `[N, T]`; images
  without targets or without detections are fine. `target_crowd [N, T]` marks crowd regions
  (COCO's `iscrowd`: a detection matching one is neither true nor false).

  The small / medium / large area thresholds (32², 96² px for COCO's ~640 px images) hold
  for images of `reference_size` a side: each image's boxes, detections and targets alike,
  are scaled to that side from its own (`image_size`, one for all or `[N]`: images of
  several sizes scored together are each bucketed by their own size, not by the largest),
  which leaves every IoU, so AP, AP50 and AP75, as it is. A target's area is its box's
  (the official COCO evaluation reads its segmentation's, usually smaller: objects land in
  larger buckets here, so AP_small / medium / large are not published COCO's). A metric
  with no target in its area range is NaN (COCOeval's -1). pycocotools' printing is
  swallowed.
  """
  scores, labels, boxes = np.asarray(scores), np.asarray(labels), np.asarray(boxes)
  if detection_valid is None:
    detection_valid = np.ones(scores.shape, bool)
  detection_valid = np.asarray(detection_valid, bool)
  target_valid = np.asarray(target_valid, bool)
  target_labels = np.asarray(target_labels)
  crowd = np.zeros_like(target_valid) if target_crowd is None else np.asarray(target_crowd, bool)
  real = target_labels[target_valid | crowd]
  classes = np.union1d(real, labels[detection_valid])  # category ids
  sides = np.broadcast_to(np.asarray(image_size, np.float64), scores.shape[:1])
  to_reference = (reference_size / sides)[:, None, None]  # each image at reference_size a side
  boxes, target_boxes = boxes * to_reference, np.asarray(target_boxes) * to_reference
  with contextlib.redirect_stdout(io.StringIO()):
    gt = _ground_truth(target_labels, target_boxes, target_valid, crowd, classes)
    dt = _results(gt, _detections(scores, labels, boxes, detection_valid))
    evaluator = COCOeval(gt, dt, iouType="bbox")
    evaluator.params.areaRng = area_ranges(reference_size, reference_size)
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
  return {
    name: float(v) if v >= 0 else float("nan")
    for name, v in zip(METRICS, evaluator.stats, strict=False)
  }
