"""COCO-format folders (an instances JSON and its images) in TFDS's `coco/2017` layout.

`read_split(root, split)` converts as TFDS's own coco builder does
(tensorflow_datasets/object_detection/coco.py): images sorted by id; `label` is the
category's position in the JSON's `categories`; COCO's pixel box `[x, y, w, h]` becomes
`bbox` (y / H, x / W, (y + h) / H, (x + w) / W); `area` int64; `is_crowd`; `image/id`.

`CocoFolder` writes such a folder as array_record under the name `coco/2017`, without
TensorFlow, so `make_loader` reads it as the catalog dataset, through the same detection
preprocessing. It is for small folders (tests, subsets): a split is decoded in memory and
its images are stored as PNG. The full COCO is prepared with TFDS (`builders.missing_message`).

Folder layout, as in COCO's downloads: `ROOT/annotations/instances_{train,val}2017.json`
and the images under `ROOT/{train,val}2017/`.
"""

from __future__ import annotations

import json
import os

import numpy as np
import PIL.Image
import tensorflow_datasets as tfds

from lfpe.data import base

FOLDERS = {"train": "train2017", "validation": "val2017"}  # TFDS split -> COCO's name


def _objects(annotations: list[dict], info: dict, label: dict[int, int]) -> dict[str, np.ndarray]:
  """One image's annotations as TFDS's `objects` (sorted by annotation id, as TFDS)."""
  annotations = sorted(annotations, key=lambda a: a["id"])
  h, w = info["height"], info["width"]
  bbox = [
    (y / h, x / w, (y + bh) / h, (x + bw) / w) for x, y, bw, bh in (a["bbox"] for a in annotations)
  ]
  return {
    "id": np.asarray([a["id"] for a in annotations], np.int64),
    "area": np.asarray([a["area"] for a in annotations], np.float64).astype(np.int64),
    "bbox": np.asarray(bbox, np.float32).reshape(-1, 4),
    "label": np.asarray([label[a["category_id"]] for a in annotations], np.int64),
    "is_crowd": np.asarray([bool(a["iscrowd"]) for a in annotations], bool),
  }


def read_split(root: str, split: str) -> dict[str, list]:
  """`{feature: [value per image]}` of `split` (`train` or `validation`) under `root`."""
  name = FOLDERS[split]
  with open(os.path.join(root, "annotations", f"instances_{name}.json")) as f:
    coco = json.load(f)
  label = {c["id"]: i for i, c in enumerate(coco["categories"])}
  per_image = {i["id"]: [] for i in coco["images"]}
  for a in coco["annotations"]:
    per_image[a["image_id"]].append(a)
  images = sorted(coco["images"], key=lambda i: i["id"])
  return {
    "image": [
      np.asarray(PIL.Image.open(os.path.join(root, name, i["file_name"])).convert("RGB"))
      for i in images
    ],
    "image/filename": [i["file_name"] for i in images],
    "image/id": np.asarray([i["id"] for i in images], np.int64),
    "objects": [_objects(per_image[i["id"]], i, label) for i in images],
  }


class CocoFolder(base.ArrayBuilder, skip_registration=True):
  """`coco/2017` (TFDS's name, version and features; PNG images) from a COCO-format folder."""

  name = "coco"
  VERSION = tfds.core.Version("1.1.0")
  RELEASE_NOTES = {"1.1.0": "TFDS's coco/2017 layout, written from a COCO-format folder."}
  DESCRIPTION = __doc__
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="2017")]

  def __init__(self, *, root: str, **kwargs):
    self._root = root
    kwargs.setdefault("config", "2017")
    super().__init__(**kwargs)

  def _features(self):
    objects = {
      "id": np.int64,
      "area": np.int64,
      "bbox": tfds.features.BBoxFeature(),
      "label": tfds.features.ClassLabel(num_classes=80),
      "is_crowd": np.bool_,
    }
    return {
      "image": tfds.features.Image(shape=(None, None, 3)),
      "image/filename": tfds.features.Text(),
      "image/id": np.int64,
      "objects": tfds.features.Sequence(objects),
    }

  def _load_arrays(self):
    return {
      split: read_split(self._root, split)
      for split, folder in FOLDERS.items()
      if os.path.exists(os.path.join(self._root, "annotations", f"instances_{folder}.json"))
    }
