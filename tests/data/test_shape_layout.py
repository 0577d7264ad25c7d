"""`shape_layout`: the left-most shape's class, disjoint splits, redrawn at any size, through
the trainer with an evaluation at another size."""

import json

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds

from configs import vit_shape_layout
from lfpe import data as data_lib
from lfpe import resolution
from lfpe.data import ops, pipeline, shapes
from lfpe.data import shape_layout as sl
from lfpe.train import trainer

CFG = sl.ShapeLayoutConfig(name="t", num_train=300, num_test=200)


def test_the_label_is_the_class_of_the_left_most_shape_ahead_by_the_gap():
  for scene in sl.generate(CFG, "test"):
    boxes, labels = scene["objects"]["bbox"], scene["objects"]["label"]
    centres = (boxes[:, 1] + boxes[:, 3]) / 2
    assert scene["label"] == labels[np.argmin(centres)]
    gap = np.sort(centres)[1] - np.sort(centres)[0]
    assert CFG.gap_range[0] <= gap + 1e-6 and gap <= CFG.gap_range[1] + 1e-6
    assert len(set(labels.tolist())) == len(labels) and 3 <= len(labels) <= 5  # distinct classes


def test_no_test_scene_occurs_in_training_and_every_class_is_a_label():
  """Disjoint splits, by layout whatever the background (`_closest_layout`); a layout moved by
  less than 1/64 would be caught (a scene's key, its background seed included, is no check:
  the seeds alone differ between splits)."""
  train, test = sl.generate(CFG, "train"), sl.generate(CFG, "test")
  assert _closest_layout(train, test) > 1 / 64
  moved = np.asarray(test[0]["objects"]["bbox"]) + 1 / 128  # a test layout, nudged
  near = {**test[0], "objects": {**test[0]["objects"], "bbox": moved}}
  assert _closest_layout([*train, near], test) <= 1 / 64  # the check can fail
  assert sl.scene_key(train[0]) == sl.scene_key(sl.generate(CFG, "train")[0])  # deterministic
  assert set(np.bincount([s["label"] for s in train], minlength=6).nonzero()[0]) == set(range(6))


def _closest_layout(train: list, test: list) -> float:
  """The smallest gap between a test scene and a training scene of the same classes: the
  largest difference of a box coordinate (fractions of the image), whatever the background."""
  grouped = {}
  for split, scenes in (("train", train), ("test", test)):
    for scene in scenes:
      labels, boxes = scene["objects"]["label"], np.asarray(scene["objects"]["bbox"])
      order = np.argsort(labels)  # each class at most once: boxes by class
      key = tuple(np.asarray(labels)[order].tolist())
      grouped.setdefault(key, {"train": [], "test": []})[split].append(boxes[order].ravel())
  assert sum(len(g["test"]) for g in grouped.values()) == len(test)
  closest = np.inf
  for group in grouped.values():
    if group["train"] and group["test"]:
      train_boxes, test_boxes = np.stack(group["train"]), np.stack(group["test"])
      gaps = np.abs(test_boxes[:, None, :] - train_boxes[None, :, :]).max(-1)  # worst coordinate
      closest = min(closest, gaps.min())
  return closest


@pytest.mark.slow
def test_the_records_test_layouts_are_not_near_copies_of_training_layouts():
  """`shape_layout/colour`, the resolution record's data (20,000 / 10,000 scenes): no test scene
  has the same classes as a training scene with every box within 1/64 of the image (whatever
  the background), so a test image is never a training layout redrawn."""
  train, test = sl.generate(sl.COLOUR, "train"), sl.generate(sl.COLOUR, "test")
  assert len(test) == sl.COLOUR.num_test
  closest = _closest_layout(train, test)
  assert closest > 1 / 64, closest


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data_lib.prepare("shape_layout/small", data_dir)
  return data_dir


def test_redraw_draws_the_stored_scene_again_at_any_size(small_dir):
  source = tfds.data_source("shape_layout/small", split="test", data_dir=small_dir)
  example = source[3]
  scene = {"background_seed": example["background_seed"], "objects": example["objects"]}
  (redraw,) = ops.parse("redraw(64)")
  np.testing.assert_array_equal(redraw.map(example)["image"], example["image"])  # as stored
  (redraw,) = ops.parse("redraw(96)")
  np.testing.assert_array_equal(redraw.map(example)["image"], shapes.render(scene, 96))
  with pytest.raises(ValueError, match="redraw"):
    ops.parse("redraw(4)")


def _layout_loader(small_dir, mesh, sizes, cache=True):
  cfg = data_lib.default_config("shape_layout/small")
  cfg.data_dir, cfg.cache, cfg.train_sizes = small_dir, cache, sizes
  return pipeline.make_loader(cfg, global_batch_size=8, seed=3, train=True, mesh=mesh)


def test_mixed_resolution_draws_each_training_scene_natively_at_its_batch_size(small_dir, mesh):
  """`data.train_sizes` on a dataset that draws itself: batch i holds the scenes it holds at
  64 px, each drawn again at the batch's size (as the tests are), not resized."""
  sizes = (48, 64, 96)
  mixed, plain = _layout_loader(small_dir, mesh, sizes), _layout_loader(small_dir, mesh, None)
  source = tfds.data_source("shape_layout/small", split="train", data_dir=small_dir)
  scene_of = {source[i]["image"].tobytes(): source[i] for i in range(len(source))}
  (value_range,) = ops.parse("value_range(0, 1)")
  drawn_sizes = set()
  for i in range(6):
    batch, at_64 = jax.tree.map(np.asarray, next(mixed)), jax.tree.map(np.asarray, next(plain))
    size = resolution.draw_size(sizes, 3, i)
    drawn_sizes.add(size)
    assert batch["image"].shape[1:3] == (size, size)
    np.testing.assert_array_equal(batch["label"], at_64["label"])
    stored = [scene_of[np.round(x * 255).astype(np.uint8).tobytes()] for x in at_64["image"]]
    want = [value_range.map({"image": sl.draw(r, size)})["image"] for r in stored]
    np.testing.assert_allclose(batch["image"], np.stack(want), atol=1e-6)
    if size == 96:  # not the nearest resize of the 64 px scene
      idx = np.floor((np.arange(96) + 0.5) * 64 / 96).astype(int)
      assert not np.allclose(batch["image"], at_64["image"][:, idx][:, :, idx], atol=0.05)
  assert len(drawn_sizes) > 1
  with pytest.raises(ValueError, match=r"data.cache=True"):
    _layout_loader(small_dir, mesh, sizes, cache=False)


def test_a_stored_test_set_at_another_size_is_the_redrawn_test_split(small_dir):
  """`small_test_96` holds `small`'s test scenes drawn at 96 px, in the same order: reading it
  scores what `redraw(96)` would, without drawing again."""
  data_lib.prepare("shape_layout/small_test_96", small_dir)
  stored = tfds.data_source("shape_layout/small_test_96", split="test", data_dir=small_dir)
  source = tfds.data_source("shape_layout/small", split="test", data_dir=small_dir)
  assert len(stored) == len(source) == 256
  (redraw,) = ops.parse("redraw(96)")
  for i in (0, 7, 255):
    assert stored[i]["label"] == source[i]["label"]
    np.testing.assert_array_equal(stored[i]["image"], redraw.map(source[i])["image"])
  with pytest.raises(ValueError, match="train"):
    tfds.data_source("shape_layout/small_test_96", split="train", data_dir=small_dir)


def test_trains_and_evaluates_redrawn_at_another_size(small_dir, tmp_path):
  config = vit_shape_layout.get_config("small=1,posemb=rope_axial")
  with config.unlocked():
    config.data.data_dir = small_dir
    config.mesh.data = 1
    config.evals = {"at_96": {"data": {"image_size": 96, "eval_preprocess": "redraw(96)"}}}
  summary = trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert summary["eval"]["count"] == summary["eval/at_96"]["count"] == 256
  assert 0 <= summary["eval/at_96"]["accuracy"] <= 1
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved["evals"]["at_96"]["data"]["eval_preprocess"] == "redraw(96)"


def test_class_colours_give_each_class_its_own_hue():
  import colorsys  # noqa: PLC0415

  cfg = sl.ShapeLayoutConfig(name="c", num_train=50, num_test=10, class_colours=True)
  for scene in sl.generate(cfg, "train"):
    for label, colour in zip(scene["objects"]["label"], scene["objects"]["color"], strict=True):
      hue = colorsys.rgb_to_hsv(*(np.asarray(colour) / 255))[0]
      assert abs(hue - label / 6) < 0.02 or abs(hue - label / 6) > 0.98
