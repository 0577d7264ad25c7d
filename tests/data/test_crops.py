"""photo_crops: seeded crops of real photographs, train and test columns apart, the loader."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from lfpe import data as data_lib
from lfpe.data import builders
from lfpe.data import crops as cr

TINY = dict(crop_size=4, num_train=64, num_test=16)


def _records(data_dir, cfg, split="train"):
  cr.PhotoCrops(config=cfg, data_dir=str(data_dir)).download_and_prepare()
  source = tfds.data_source(f"photo_crops/{cfg.name}", split=split, data_dir=str(data_dir))
  return sorted((source[i] for i in range(len(source))), key=lambda r: (r["photo"], r["y"], r["x"]))


@pytest.fixture(scope="module")
def photos():
  return cr.photographs()


@pytest.fixture(scope="module")
def crops_dir(tmp_path_factory):
  """A data_dir with `photo_crops/8x8` (4,096 train / 512 test), built once (about a second)."""
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data_lib.prepare("photo_crops/8x8", data_dir)
  return data_dir


def test_photographs(photos):
  assert photos.shape == (2, 427, 640, 3) and photos.dtype == np.uint8
  assert photos.std() > 30 and not np.array_equal(photos[0], photos[1])  # real, varied images


def test_build_is_deterministic_from_the_seed(tmp_path):
  a, b = (_records(tmp_path / d, cr.CropsConfig(name="tiny", **TINY)) for d in "ab")
  c = _records(tmp_path / "c", cr.CropsConfig(name="tiny", seed=1, **TINY))
  assert len(a) == len(b) == 64
  for ra, rb in zip(a, b, strict=True):
    assert (ra["photo"], ra["y"], ra["x"]) == (rb["photo"], rb["y"], rb["x"])
    np.testing.assert_array_equal(ra["image"], rb["image"])
  assert [(r["y"], r["x"]) for r in a] != [(r["y"], r["x"]) for r in c]


@pytest.mark.parametrize("cfg", cr.PhotoCrops.BUILDER_CONFIGS, ids=lambda c: c.name)
def test_train_and_test_columns_never_meet(cfg, photos):
  size = cfg.crop_size
  train, test = (cr.positions(cfg, split, photos.shape[1:]) for split in cr.SPLITS)
  assert train["x"].min() >= 0 and (train["x"] + size).max() <= 480
  assert test["x"].min() >= 480 + size and (test["x"] + size).max() <= 640
  assert (train["x"] + size - 1).max() + size < test["x"].min()  # a crop's width apart
  for where, n in ((train, cfg.num_train), (test, cfg.num_test)):
    assert where["y"].min() >= 0 and (where["y"] + size).max() <= 427
    np.testing.assert_array_equal(np.bincount(where["photo"]), [n // 2, n // 2])
    corners = np.stack([where["photo"], where["y"], where["x"]], -1)
    assert len(np.unique(corners, axis=0)) == n  # distinct crops


def test_crops_are_the_photographs_pixels(crops_dir, photos):
  for split, n in (("train", 4_096), ("test", 512)):
    source = tfds.data_source("photo_crops/8x8", split=split, data_dir=crops_dir)
    assert len(source) == n
    features = source.dataset_info.features
    assert features["y"].np_dtype == features["x"].np_dtype == np.int32
    assert features["photo"].names == ["china", "flower"]
    for i in range(0, n, 61):
      r = source[i]
      assert r["image"].shape == (8, 8, 3) and r["image"].dtype == np.uint8
      assert r["photo"] in (0, 1)  # TFDS returns scalars as Python ints
      y, x = int(r["y"]), int(r["x"])
      np.testing.assert_array_equal(r["image"], photos[r["photo"], y : y + 8, x : x + 8])


def test_loader_gives_uint8_pixels(crops_dir, mesh):
  cfg = data_lib.default_config("photo_crops/8x8")
  cfg.data_dir = crops_dir
  train = data_lib.make_loader(cfg, global_batch_size=16, seed=0, train=True, mesh=mesh)
  batch = next(iter(train))
  assert sorted(batch) == ["image"]
  image = np.asarray(batch["image"])
  assert image.shape == (16, 8, 8, 3) and image.dtype == np.uint8 and image.max() > image.min()
  test = data_lib.make_loader(cfg, global_batch_size=64, seed=0, train=False, mesh=mesh)
  assert len(test) == 8  # 512 test crops, no padding
  assert np.asarray(next(iter(test))["mask"]).all()


def test_registry_specs(tmp_path):
  for size in (8, 16, 32):
    spec = builders.get_spec(f"photo_crops/{size}x{size}")
    assert (spec.num_classes, spec.image_shape, spec.fields) == (256, (size, size, 3), ("image",))
    assert spec.preprocess == "" and (spec.train_split, spec.eval_split) == ("train", "test")
    builder = spec.builder(data_dir=str(tmp_path))
    assert (builder.name, builder.builder_config.crop_size) == ("photo_crops", size)


def test_config_errors():
  with pytest.raises(ValueError, match="multiples of 2"):
    cr.CropsConfig(name="x", num_train=3)
  cfg = cr.CropsConfig(name="x", crop_size=200, num_test=1_000)
  with pytest.raises(ValueError, match="do not fit in the test region"):
    cr.positions(cfg, "test", (427, 640, 3))
