"""Registry, catalog datasets (missing: exact instructions; prepared: read the same way), config."""

import os
import shutil

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds
from etils.epath import testing as epath_testing

from lfpe import data as data_lib
from lfpe import errors
from lfpe.data import base, builders, config, pipeline


class FakeCifar10(base.ArrayBuilder, skip_registration=True):
  """Stands in for a cifar10 prepared with TFDS (same name, version and features)."""

  name = "cifar10"
  VERSION = tfds.core.Version("3.0.2")

  def _features(self):
    return {
      "id": tfds.features.Text(),
      "image": tfds.features.Image(shape=(32, 32, 3)),
      "label": tfds.features.ClassLabel(num_classes=10),
    }

  def _load_arrays(self):
    images = np.arange(6 * 32 * 32 * 3).reshape(6, 32, 32, 3) % 251
    return {
      "train": {
        "id": [f"train_{i}" for i in range(6)],
        "image": images.astype(np.uint8),
        "label": np.arange(6),
      }
    }


class FakeCoco(base.ArrayBuilder, skip_registration=True):
  """Stands in for coco/2017: variable image sizes, a sequence of objects."""

  name = "coco"
  VERSION = tfds.core.Version("1.1.0")
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="2017")]

  def _features(self):
    objects = {
      "bbox": tfds.features.BBoxFeature(),
      "is_crowd": np.bool_,
      "label": tfds.features.ClassLabel(num_classes=80),
    }
    return {
      "image": tfds.features.Image(shape=(None, None, 3)),
      "objects": tfds.features.Sequence(objects),
    }

  def _load_arrays(self):
    images = [np.full((10, 20, 3), 200, np.uint8), np.full((16, 8, 3), 100, np.uint8)]
    objects = [
      {"bbox": np.array([[0.1, 0.2, 0.5, 0.6]], np.float32), "is_crowd": [False], "label": [5]},
      {
        "bbox": np.zeros((0, 4), np.float32),
        "is_crowd": np.zeros(0, bool),
        "label": np.zeros(0, np.int64),
      },
    ]
    return {"validation": {"image": images, "objects": objects}}


def _config(name, data_dir, **kw):
  cfg = data_lib.default_config(name)
  cfg.data_dir = data_dir
  cfg.update(kw)
  return cfg


@pytest.mark.parametrize("name", ["cifar10", "imagenet_resized/64x64", "coco/2017"])
def test_missing_catalog_dataset_says_how_to_prepare(name, tmp_path):
  with pytest.raises(FileNotFoundError) as e:
    builders.data_source(name, "train", str(tmp_path))
  msg = str(e.value)
  assert f"tfds build {name} --data_dir={tmp_path} --file_format=array_record" in msg
  # `tfds build` imports apache_beam, the Python route importlib_resources: both are named.
  assert "pip install tensorflow tensorflow-datasets apache-beam importlib_resources" in msg
  assert "TensorFlow is needed only for this preparation step" in msg
  assert f"tfds.builder('{name}', data_dir='{tmp_path}', file_format='array_record')" in msg


def test_imagenet_message_names_the_manual_download(tmp_path):
  msg = builders.missing_message(builders.get_spec("imagenet2012"), str(tmp_path))
  assert "ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar" in msg
  assert f"{tmp_path}/downloads/manual/" in msg and "tfds build imagenet2012" in msg


def test_downsampled_imagenet_message_says_its_source_is_gone(tmp_path):
  msg = builders.missing_message(builders.get_spec("downsampled_imagenet/64x64"), str(tmp_path))
  assert "no longer serves" in msg and "imagenet_resized/64x64" in msg
  assert "tfds build downsampled_imagenet/64x64" in msg


def test_tfrecord_copy_gets_the_convert_command(tmp_path):
  version_dir = tmp_path / "cifar10" / "3.0.2"
  version_dir.mkdir(parents=True)
  (version_dir / "dataset_info.json").write_text("{}")
  (version_dir / "cifar10-train.tfrecord-00000-of-00001").write_text("")
  with pytest.raises(FileNotFoundError, match="tfds convert_format --dataset_version_dir="):
    builders.prepare("cifar10", str(tmp_path))


def _train_shard(data_dir, name, version):
  [shard] = (data_dir / name / version).glob(f"{name}-train.array_record-*")
  return shard


@pytest.mark.parametrize("how", ["truncated", "deleted"])
def test_a_damaged_local_dataset_says_which_folder_to_delete(tmp_path, how):
  builders.prepare("digits", str(tmp_path))
  shard = _train_shard(tmp_path, "digits", "1.0.0")
  if how == "deleted":
    shard.unlink()
  else:  # as by a copy or a build killed midway
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
  with pytest.raises(errors.DatasetDamagedError) as e:
    builders.data_source("digits", "train", str(tmp_path))
  folder = tmp_path / "digits" / "1.0.0"
  why = "is missing" if how == "deleted" else "is not a readable array_record file"
  assert str(e.value).startswith(
    f"Dataset 'digits' in {folder} cannot be read: a file is damaged or missing ("
    f"{shard.name} {why}). "
  )
  assert str(e.value).endswith(f"Delete {folder}; the next run builds it again.")
  assert isinstance(e.value, errors.UserError)
  builders.data_source("digits", "test", str(tmp_path))  # the intact split still opens


def test_a_truncated_catalog_dataset_gives_the_commands_that_prepare_it(tmp_path):
  """Cut at a block boundary: array_record's reader raises nothing there, and TFDS would read
  the lost records as empty bytes (a TypeError in the image decoder): found before reading."""
  FakeCifar10(data_dir=str(tmp_path)).download_and_prepare()
  shard = _train_shard(tmp_path, "cifar10", "3.0.2")
  shard.write_bytes(shard.read_bytes()[:65536])
  with pytest.raises(errors.DatasetDamagedError) as e:
    builders.data_source("cifar10", "train", str(tmp_path))
  assert f"({shard.name} is not a readable array_record file)." in str(e.value)
  assert f"Delete {tmp_path / 'cifar10' / '3.0.2'} and prepare it again:" in str(e.value)
  assert f"tfds build cifar10 --data_dir={tmp_path} --file_format=array_record" in str(e.value)


def test_a_shard_of_another_build_is_found_by_its_count(tmp_path):
  builders.prepare("digits", str(tmp_path))
  folder = tmp_path / "digits" / "1.0.0"
  test = next(folder.glob("digits-test.array_record-*"))
  shutil.copy(test, _train_shard(tmp_path, "digits", "1.0.0"))  # a readable file, 360 records
  with pytest.raises(errors.DatasetDamagedError, match=r"00001 holds 360 of its 1437 records\)"):
    builders.data_source("digits", "train", str(tmp_path))


def test_a_corrupted_record_is_damage_when_it_is_read(tmp_path):
  builders.prepare("digits", str(tmp_path))
  shard = _train_shard(tmp_path, "digits", "1.0.0")
  data = bytearray(shard.read_bytes())
  data[len(data) // 3 : len(data) // 3 + 64] = bytes(b ^ 0xFF for b in data[len(data) // 3 :][:64])
  shard.write_bytes(bytes(data))
  source = builders.data_source("digits", "train", str(tmp_path))  # the counts agree
  with pytest.raises(errors.DatasetDamagedError, match=r"\(RuntimeError: Corrupted Riegeli"):
    for i in range(len(source)):
      source[i]


def test_other_errors_of_a_read_are_not_called_damage():
  def fail(index):
    raise RuntimeError("a bug in a decoder")

  source = builders.CheckedReads(type("Source", (), {"__getitem__": lambda self, i: fail(i)})(), "")
  with pytest.raises(RuntimeError, match="a bug in a decoder") as e:
    source[0]
  assert not isinstance(e.value, errors.UserError)


def test_prepared_catalog_dataset_is_read_the_same_way(tmp_path, mesh):
  FakeCifar10(data_dir=str(tmp_path)).download_and_prepare()
  assert builders.prepared_version("cifar10", str(tmp_path)) == "3.0.2"
  cfg = _config("cifar10", str(tmp_path), eval_split="train")
  batches = list(pipeline.make_loader(cfg, global_batch_size=8, seed=0, train=False, mesh=mesh))
  assert len(batches) == 1 and sorted(batches[0]) == ["image", "label", "mask"]  # `id` dropped.
  labels = np.asarray(batches[0]["label"])[np.asarray(batches[0]["mask"])]
  assert sorted(labels.tolist()) == list(range(6))
  assert batches[0]["image"].shape == (8, 32, 32, 3)


def test_a_remote_data_dir_is_searched_through_epath(tmp_path):
  """gs:// data dirs are found as local ones (epath; here gs://bucket is mocked onto
  tmp_path), not reported missing; a missing one names its remote path."""
  FakeCifar10(data_dir=str(tmp_path)).download_and_prepare()
  local = lambda path: str(path).replace("gs://bucket", str(tmp_path))
  to_local = lambda fn, path, *a, **k: fn(local(path), *a, **k)
  calls = dict(exists=to_local, isdir=to_local, listdir=to_local, glob=to_local)
  with epath_testing.mock_epath(**calls):
    assert builders.prepared_version("cifar10", "gs://bucket") == "3.0.2"
    assert builders.prepare("cifar10", "gs://bucket") == "3.0.2"
    with pytest.raises(FileNotFoundError, match="in gs://bucket/nowhere/cifar10"):
      builders.prepare("cifar10", "gs://bucket/nowhere")


def test_prepared_coco_gives_detr_inputs(tmp_path, mesh):
  FakeCoco(data_dir=str(tmp_path), config="2017").download_and_prepare()
  cfg = _config("coco/2017", str(tmp_path), image_size=16)
  batch = next(iter(pipeline.make_loader(cfg, global_batch_size=8, seed=0, train=False, mesh=mesh)))
  assert batch["image"].shape == (8, 16, 16, 3) and batch["image_mask"].shape == (8, 16, 16)
  assert batch["boxes"].shape == (8, 100, 4) and batch["box_mask"].shape == (8, 100)
  n_boxes = np.asarray(batch["box_mask"]).sum(1)
  assert sorted(n_boxes[:2].tolist()) == [0, 1] and np.asarray(batch["mask"]).sum() == 2
  boxes = np.asarray(batch["boxes"])[np.asarray(batch["box_mask"])]
  np.testing.assert_allclose(boxes, [[0.4, 0.3, 0.4, 0.4]], atol=1e-6)  # (cx, cy, w, h)


def test_registry_and_unknown_name():
  assert {"digits", "cifar10", "imagenet2012", "imagenet_resized/64x64", "coco/2017"} <= set(
    builders.DATASETS
  )
  assert builders.get_spec("digits").builder is not None
  assert builders.get_spec("cifar10").builder is None
  with pytest.raises(ValueError, match=r"`data.name`='mnist'.*'digits'"):
    config.validate_data_config(_config("mnist", "/tmp"))


def test_default_config_and_data_dir(monkeypatch):
  monkeypatch.setenv("LFPE_DATA_DIR", "/data/tfds")
  cfg = data_lib.default_config()
  assert cfg.name == "digits" and cfg.data_dir == "/data/tfds" and cfg.worker_count == 0
  resolved = config.resolve(cfg)
  assert (resolved.train_split, resolved.eval_split) == ("train", "test")
  monkeypatch.delenv("LFPE_DATA_DIR")
  assert config.default_data_dir() == os.path.expanduser("~/tensorflow_datasets")


@pytest.mark.parametrize(
  "field,value,match",
  [
    ("image_size", -4, "`data.image_size`=-4 must be a positive int"),
    ("preprocess", "flip_lr|value_range(0, 1)", "move them to `data.augment`"),
    ("augment", "random_crop(8", "`data.augment`"),
    ("eval_preprocess", "central_crop(6)|flip_lr", "`data.eval_preprocess` has random ops"),
    ("worker_count", -1, "`data.worker_count`"),
    ("data_dir", "", "`data.data_dir`"),
  ],
)
def test_config_errors_name_the_field(field, value, match):
  cfg = data_lib.default_config()
  cfg[field] = value
  with pytest.raises(ValueError, match=match):
    config.validate_data_config(cfg)


def test_varying_size_datasets_need_image_size():
  with pytest.raises(ValueError, match="set `data.image_size`"):
    config.resolve(_config("imagenet2012", "/tmp"))
  assert config.resolve(_config("imagenet2012", "/tmp", image_size=64)).image_size == 64


def test_batch_must_split_over_processes(monkeypatch):
  monkeypatch.setattr(jax, "process_count", lambda: 3)
  with pytest.raises(ValueError, match=r"multiple of the process count \(3\)"):
    config.check_batch(16, None)


def test_a_build_that_loses_the_rename_to_another_process_reuses_its_build(tmp_path, monkeypatch):
  """Two processes building one generated dataset at once: TFDS renames each finished build
  into place, and the loser's rename raises FileExistsError; `prepare` then reuses the
  winner's build (and re-raises where there is none)."""
  builder = builders.get_spec("digits").builder
  real = builder.download_and_prepare

  def lose_the_race(self, *args, **kwargs):
    real(self, *args, **kwargs)  # the winner's build, now in place
    raise FileExistsError("Cannot rename ...: destination already exists")

  monkeypatch.setattr(builder, "download_and_prepare", lose_the_race)
  assert builders.prepare("digits", str(tmp_path)) == str(builder.VERSION)
  assert len(data_lib.data_source("digits", "train", str(tmp_path))) > 0

  def fail(self, *args, **kwargs):
    raise FileExistsError("some other file")

  monkeypatch.setattr(builder, "download_and_prepare", fail)
  with pytest.raises(FileExistsError, match="some other file"):
    builders.prepare("digits", str(tmp_path / "elsewhere"))


def test_an_unknown_split_or_an_unwritable_data_dir_is_a_config_error(digits_dir, tmp_path):
  """Both are the user's to fix (`lfpe.main` prints one line, no traceback), named by field."""
  with pytest.raises(errors.ConfigError, match=r"Unknown split 'valid'.*config\.data\.eval_split"):
    builders.data_source("digits", "valid", digits_dir)
  blocked = tmp_path / "file"
  blocked.write_text("not a folder")
  with pytest.raises(errors.ConfigError, match=r"config\.data\.data_dir=.*give a folder it can"):
    builders.prepare("digits", str(blocked / "data"))
