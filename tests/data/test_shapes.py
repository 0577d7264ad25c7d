"""shapes_detection: seeded scenes, the same scene at every size, valid boxes, the loader."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from lfpe import data as data_lib
from lfpe.data import detection_ops, ops
from lfpe.data import shapes as sh

TINY = dict(sizes=(32, 64), num_train=24, num_test=8)


def _records(data_dir, cfg, split="train"):
  sh.ShapesDetection(config=cfg, data_dir=str(data_dir)).download_and_prepare()
  source = tfds.data_source(f"shapes_detection/{cfg.name}", split=split, data_dir=str(data_dir))
  return sorted((source[i] for i in range(len(source))), key=lambda r: r["image/id"])


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
  """A data_dir with the `small` config (512 train / 128 test), built once for this module."""
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data_lib.prepare("shapes_detection/small", data_dir)
  return data_dir


@pytest.fixture
def small_config(small_dir):
  cfg = data_lib.default_config("shapes_detection/small")
  cfg.data_dir = small_dir
  return cfg


def test_build_is_deterministic_from_the_seed(tmp_path):
  a, b = (_records(tmp_path / d, sh.ShapesConfig(name="tiny", **TINY)) for d in "ab")
  c = _records(tmp_path / "c", sh.ShapesConfig(name="tiny", seed=1, **TINY))
  for ra, rb in zip(a, b, strict=True):
    np.testing.assert_array_equal(ra["image_64"], rb["image_64"])
    np.testing.assert_array_equal(ra["objects"]["bbox"], rb["objects"]["bbox"])
  assert not np.array_equal(a[0]["image_32"], c[0]["image_32"])
  assert a[3]["image_64"].shape == (64, 64, 3) and a[3]["image_64"].dtype == np.uint8
  np.testing.assert_array_equal(a[3]["image_32"], sh.render(a[3], 32))  # the scene redraws it


def test_splits_are_disjoint():
  cfg = sh.ShapesConfig(name="t", num_train=300, num_test=100)
  seeds = [{s["background_seed"] for s in sh.generate(cfg, split)} for split in sh.SPLITS]
  assert len(seeds[0]) == 300 and len(seeds[1]) == 100 and not seeds[0] & seeds[1]


def test_same_scene_looks_alike_at_every_size():
  """Drawn natively, not resized: the 64 px image averaged 2x2 is the 32 px one."""
  cfg = sh.ShapesConfig(name="t")
  for i in range(20):
    scene = sh.sample_scene(cfg, np.random.default_rng([0, 0, i]))
    big, small = sh.render(scene, 64).astype(float), sh.render(scene, 32).astype(float)
    pooled = big.reshape(32, 2, 32, 2, 3).mean((1, 3))
    assert np.abs(pooled - small).mean() < 2.0  # of 255: antialiased edges differ slightly


@pytest.mark.parametrize("label", range(len(sh.SHAPES)))
def test_each_shape_fills_its_box(label):
  """One shape on its own: drawn pixels lie in its box (same normalised box at 32 and 64 px),
  touch all four sides, and cover `AREA[label]` of it."""
  box = np.array([0.25, 0.125, 0.75, 0.625], np.float32)  # pixel-aligned at 32 and 64
  objects = {"bbox": box[None], "label": [label], "color": np.array([[255, 255, 255]])}
  for size in (32, 64):
    scene = {"background_seed": 0, "objects": objects}
    drawn = np.any(sh.render(scene, size) != sh.render({**scene, "objects": _none()}, size), -1)
    ys, xs = np.nonzero(drawn)
    top, left, bottom, right = (box * size).astype(int)
    assert (ys.min(), xs.min(), ys.max() + 1, xs.max() + 1) == (top, left, bottom, right)
    cover = _coverage(scene, size)[top:bottom, left:right].mean()
    assert cover == pytest.approx(sh.AREA[label], abs=0.03)


def _none():
  return {"bbox": np.zeros((0, 4)), "label": [], "color": np.zeros((0, 3))}


def _coverage(scene, size):
  """Fraction of each pixel the objects cover: drawn in white over black, one channel."""
  image = np.zeros((size, size, 3))
  for box, label in zip(scene["objects"]["bbox"], scene["objects"]["label"], strict=True):
    sh._draw(image, box, label, np.array([1.0, 1.0, 1.0]))
  return image[..., 0]


def test_boxes_are_inside_with_bounded_overlap():
  cfg = sh.ShapesConfig(name="t", num_train=400)
  scenes = sh.generate(cfg, "train")
  counts = np.bincount([len(s["objects"]["label"]) for s in scenes], minlength=9)
  assert len(counts) == 9 and counts[0] > 0 and counts[8] > 20  # 0-8 objects; 2% empty
  for s in scenes:
    bbox = s["objects"]["bbox"]
    ymin, xmin, ymax, xmax = bbox.T  # inside [0, 1], positive height and width
    assert ((ymin >= 0) & (xmin >= 0) & (ymax <= 1) & (xmax <= 1)).all()
    assert ((ymax > ymin) & (xmax > xmin)).all()
    sides = np.concatenate([bbox[:, 2] - bbox[:, 0], bbox[:, 3] - bbox[:, 1]])
    assert np.all((sides > 0.12) & (sides < 0.53))  # extent 0.15-0.45, aspect 3/4-4/3
    for i in range(1, len(bbox)):
      assert np.all(sh._overlap(bbox[i], bbox[:i]) <= cfg.max_overlap + 1e-6)


def test_images_with_no_objects(tmp_path):
  cfg = sh.ShapesConfig(name="empty", empty_rate=1.0, **TINY)
  records = _records(tmp_path, cfg, split="test")
  assert all(len(r["objects"]["bbox"]) == 0 for r in records)
  chain = detection_ops.Detection((32,), (32,), 64, 8).ops(False, [])
  out = ops.apply(chain, {**records[0], "size": np.int32(32)})
  assert not out["target_valid"].any() and out["image"].shape == (64, 64, 3)


def test_train_batches_have_static_shapes(small_config, mesh):
  small_config.detection.train_sizes = small_config.detection.test_sizes = (32, 40, 48)
  small_config.detection.max_targets = 10
  it = data_lib.make_loader(small_config, global_batch_size=16, seed=0, train=True, mesh=mesh)
  seen = set()
  for _ in range(4):
    batch = {k: np.asarray(v) for k, v in next(it).items()}
    assert {k: v.shape for k, v in batch.items()} == {
      "image": (16, 48, 48, 3),
      "mask": (16, 48, 48),
      "boxes": (16, 10, 4),
      "labels": (16, 10),
      "target_valid": (16, 10),
      "target_crowd": (16, 10),  # all False in training (crowds are kept at evaluation)
      "image_size": (16, 2),
      "image_id": (16,),
    }
    size = batch["image_size"][:, 0]
    seen |= set(size.tolist())
    assert np.array_equal(batch["mask"].sum((1, 2)), 48**2 - size**2)
    assert batch["target_valid"].sum(1).max() <= 8 and 0 <= batch["labels"].min()
  assert seen == {32, 40, 48}


def test_train_batches_resume_from_the_iterator_state(small_config, mesh):
  it = data_lib.make_loader(small_config, global_batch_size=8, seed=2, train=True, mesh=mesh)
  next(it)
  state, want = it.get_state(), next(it)
  again = data_lib.make_loader(small_config, global_batch_size=8, seed=2, train=True, mesh=mesh)
  again.set_state(state)
  got = next(again)
  for k in want:  # The same examples, at the same drawn sizes.
    np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]))


def test_held_out_sizes_at_eval(small_config, mesh):
  """Train at 32-48 on a 64 canvas, evaluate every test example at 56 and at 64."""
  small_config.detection.train_sizes, small_config.detection.test_sizes = (32, 40, 48), (56, 64)
  loader = data_lib.make_loader(small_config, global_batch_size=64, seed=0, train=False, mesh=mesh)
  batches = [{k: np.asarray(v) for k, v in b.items()} for b in loader]
  assert len(batches) == len(loader) == 4 and batches[0]["image"].shape == (64, 64, 64, 3)
  assert sorted(batches[0]) == sorted([*detection_ops.OUTPUT, "valid"])  # `mask`: pixels
  real = np.concatenate([b["valid"] for b in batches])
  sizes = np.concatenate([b["image_size"][:, 0] for b in batches])[real]
  ids = np.concatenate([b["image_id"] for b in batches])[real]
  assert sorted(sizes.tolist()) == [56] * 128 + [64] * 128
  assert sorted(ids[sizes == 64].tolist()) == list(range(128))


def test_short_side_training_crops_native_squares(small_config, mesh):
  """`train_side="short"`: shorter sides 32-48, longer sides up to the 64 canvas, both ways."""
  small_config.detection.train_sizes, small_config.detection.train_side = (32, 40, 48), "short"
  it = data_lib.make_loader(small_config, global_batch_size=32, seed=0, train=True, mesh=mesh)
  shapes = set()
  for _ in range(4):
    batch = {k: np.asarray(v) for k, v in next(it).items()}
    h, w = batch["image_size"].T
    assert set(np.minimum(h, w)) <= {32, 40, 48} and set(np.maximum(h, w)) <= {32, 40, 48, 56, 64}
    assert np.array_equal(batch["mask"].sum((1, 2)), 64**2 - h * w)
    boxes = batch["boxes"][batch["target_valid"]]
    assert (boxes[:, :2] - boxes[:, 2:] / 2 >= -1e-6).all() and (
      boxes[:, :2] + boxes[:, 2:] / 2 <= 1 + 1e-6
    ).all()
    shapes |= set(zip(h.tolist(), w.tolist(), strict=True))
  assert any(a > b for a, b in shapes) and any(a < b for a, b in shapes)
