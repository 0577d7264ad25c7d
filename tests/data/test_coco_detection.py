"""COCO path: a COCO-format folder read in TFDS's coco/2017 layout, through the same loader."""

import json

import numpy as np
import PIL.Image

from lfpe import data as data_lib
from lfpe.data import coco

# Three images (sorted by id in the dataset), categories with COCO's sparse ids.
IMAGES = [(42, "b.png", 20, 40), (7, "a.png", 30, 30), (99, "c.png", 16, 8)]  # id, file, h, w
CATEGORIES = [{"id": 3, "name": "car"}, {"id": 1, "name": "person"}, {"id": 18, "name": "dog"}]
ANNOTATIONS = [  # [x, y, w, h] in pixels
  {"id": 5, "image_id": 42, "category_id": 18, "bbox": [10, 5, 20, 10], "area": 150.7},
  {"id": 2, "image_id": 42, "category_id": 3, "bbox": [0, 0, 40, 20], "area": 800, "iscrowd": 1},
  {"id": 1, "image_id": 42, "category_id": 1, "bbox": [0, 0, 4, 4], "area": 16},
  {"id": 9, "image_id": 7, "category_id": 3, "bbox": [3, 6, 15, 12], "area": 180},
]  # image 99 has none


def write_folder(root, annotations=ANNOTATIONS, split="val2017"):
  """A COCO-format folder: `annotations/instances_{split}.json` and `{split}/*.png`."""
  (root / "annotations").mkdir(parents=True)
  (root / split).mkdir()
  images = []
  for image_id, name, h, w in IMAGES:
    pixels = np.full((h, w, 3), image_id, np.uint8)
    PIL.Image.fromarray(pixels).save(root / split / name)
    images.append({"id": image_id, "file_name": name, "height": h, "width": w})
  annotations = [{"iscrowd": 0, "segmentation": [], **a} for a in annotations]
  instances = {"images": images, "annotations": annotations, "categories": CATEGORIES}
  (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(instances))
  return str(root)


def test_read_split_converts_as_tfds(tmp_path):
  """TFDS's conversion: ids sorted, label = position in `categories`, relative yxyx boxes."""
  split = coco.read_split(write_folder(tmp_path), "validation")
  assert split["image/id"].tolist() == [7, 42, 99] and split["image/filename"][0] == "a.png"
  assert split["image"][1].shape == (20, 40, 3) and split["image"][1][0, 0, 0] == 42
  objects = split["objects"][1]  # image 42, annotations sorted by id: 1, 2, 5
  assert objects["id"].tolist() == [1, 2, 5] and objects["label"].tolist() == [1, 0, 2]
  assert objects["is_crowd"].tolist() == [False, True, False]
  assert objects["area"].tolist() == [16, 800, 150] and objects["area"].dtype == np.int64
  np.testing.assert_allclose(objects["bbox"][2], [5 / 20, 10 / 40, 15 / 20, 30 / 40])
  assert split["objects"][2]["bbox"].shape == (0, 4)


def _loader(tmp_path, mesh, annotations=ANNOTATIONS, sizes=(40,)):
  data_dir = str(tmp_path / "tfds")
  coco.CocoFolder(
    root=write_folder(tmp_path / "coco", annotations), data_dir=data_dir
  ).download_and_prepare()
  cfg = data_lib.default_config("coco/2017")
  cfg.data_dir = data_dir
  cfg.detection = data_lib.detection_config(sizes, max_size=48, max_targets=4)
  return data_lib.make_loader(cfg, global_batch_size=8, seed=0, train=False, mesh=mesh)


def test_prepared_folder_reads_as_coco_2017(tmp_path, mesh):
  (batch,) = [{k: np.asarray(v) for k, v in b.items()} for b in _loader(tmp_path, mesh)]
  real = batch["valid"]
  assert real.sum() == 3 and batch["image"].shape == (8, 48, 48, 3)
  row = {int(i): r for r, i in enumerate(batch["image_id"]) if real[r]}
  assert sorted(row) == [7, 42, 99]
  b = row[42]  # 20x40 at size 40 stays 20x40; the crowd box is dropped.
  np.testing.assert_array_equal(batch["image_size"][b], [20, 40])
  np.testing.assert_allclose(batch["boxes"][b, :2], [[0.05, 0.1, 0.1, 0.2], [0.5, 0.5, 0.5, 0.5]])
  np.testing.assert_array_equal(batch["labels"][b], [1, 2, 0, 0])
  np.testing.assert_array_equal(batch["target_valid"][b], [True, True, False, False])
  assert batch["mask"][b, 20:].all() and not batch["mask"][b, :20, :40].any()
  np.testing.assert_allclose(batch["image"][b, :20, :40], 42 / 255, atol=1e-6)
  c = row[99]  # 16x8 at size 40 -> 40x20 (resized, aspect kept), no objects
  np.testing.assert_array_equal(batch["image_size"][c], [40, 20])
  assert not batch["target_valid"][c].any()
  assert batch["mask"][c].sum() == 48 * 48 - 40 * 20


def test_zero_area_boxes_in_the_folder_are_dropped_with_a_count(tmp_path, mesh, caplog):
  """Real COCO train2017 holds two zero-height boxes: DETR drops them; so does lfpe."""
  degenerate = [
    {"id": 11, "image_id": 99, "category_id": 1, "bbox": [2, 3, 0, 5], "area": 0},
    {"id": 12, "image_id": 7, "category_id": 1, "bbox": [4, 4, 6, 0], "area": 0},
  ]
  (batch,) = [
    {k: np.asarray(v) for k, v in b.items()}
    for b in _loader(tmp_path, mesh, [*ANNOTATIONS, *degenerate])
  ]
  row = {int(i): r for r, i in enumerate(batch["image_id"]) if batch["valid"][r]}
  assert not batch["target_valid"][row[99]].any()
  np.testing.assert_array_equal(batch["target_valid"][row[7]], [True, False, False, False])
  assert "image/id=99 of coco/2017: dropped 1 of 1 boxes" in caplog.text
  assert "image/id=7 of coco/2017: dropped 1 of 2 boxes" in caplog.text
