"""Detection ops (COCO in TFDS form): fixed-size box arrays, and padded images with a mask.

TFDS gives `objects: {bbox [n, 4] (ymin, xmin, ymax, xmax) in [0, 1], label [n], is_crowd [n]}`.
`boxes(K)` turns it into DETR's targets; `resize_pad(S)` resizes the longer side to `S`
and zero-pads to `S x S`, with `image_mask` marking real pixels (what DETR's sine encoding
reads). Boxes stay normalised by the unpadded image size, as in DETR.
"""

from __future__ import annotations

import dataclasses

import grain
import numpy as np

from lfpe.data import image_ops


@dataclasses.dataclass
class Boxes(grain.transforms.Map):
  """`boxes(max_boxes)`: `objects` -> fixed-size DETR targets.

  Adds `boxes [K, 4]` (cx, cy, w, h), `box_labels [K]` int32, `box_mask [K]` bool. Crowd
  annotations are dropped (as DETR does); objects past `max_boxes` are cut.
  """

  max_boxes: int

  def map(self, element):
    out = dict(element)
    objects = out.pop("objects")
    keep = ~np.asarray(objects.get("is_crowd", np.zeros(len(objects["label"]), bool)), bool)
    bbox = np.asarray(objects["bbox"], np.float32).reshape(-1, 4)[keep][: self.max_boxes]
    labels = np.asarray(objects["label"])[keep][: self.max_boxes]
    ymin, xmin, ymax, xmax = bbox.T
    n, k = len(bbox), self.max_boxes
    cxcywh = np.stack([(xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin], -1)
    out["boxes"] = np.zeros((k, 4), np.float32)
    out["boxes"][:n] = cxcywh
    out["box_labels"] = np.zeros((k,), np.int32)
    out["box_labels"][:n] = labels
    out["box_mask"] = np.arange(k) < n
    return out


@dataclasses.dataclass
class ResizePad(grain.transforms.Map):
  """`resize_pad(size)`: longer side to `size` (aspect kept), zero-pad to `size x size`.

  Adds `image_mask [size, size]` (bool, True on image pixels, which sit top-left).
  """

  size: int
  method: str = "bilinear"

  def map(self, element):
    image = element["image"]
    h, w = image.shape[:2]
    ratio = self.size / max(h, w)
    nh, nw = max(1, round(h * ratio)), max(1, round(w * ratio))
    image = image_ops.resize_image(image, (nh, nw), self.method)
    padded = np.zeros((self.size, self.size, image.shape[2]), image.dtype)
    padded[:nh, :nw] = image
    mask = np.zeros((self.size, self.size), bool)
    mask[:nh, :nw] = True
    return {**element, "image": padded, "image_mask": mask}
