"""Red-green datasets: labels re-derived from the pixels, balance, splits, TFDS round trip."""

import numpy as np
import pytest

from lfpe.data import redgreen as rg


def _cfg(task, **kw):
  kw = {"num_train": 400, "num_validation": 40, "num_test": 40, **kw}
  test_colors = rg.SHIFTED if task == "color_shift" else None
  return rg.RedGreenConfig(name=f"t_{task}", task=task, test_colors=test_colors, **kw)


def _square_corner(images, color):
  """Top-left (y, x) of the pixels of `color` in each image, found by scanning pixels."""
  mask = np.all(images == np.asarray(color, np.uint8), axis=-1)  # [n, H, W]
  out = []
  for m in mask:
    ys, xs = np.nonzero(m)
    out.append((ys.min(), xs.min()))
  return np.asarray(out)


def _expected_label(task, g, r, size):
  """The label written out by hand from the task definitions of 003 Sec. 4."""
  gy, gx, ry, rx = g[:, 0], g[:, 1], r[:, 0], r[:, 1]
  if task == "direction":
    return (gx > rx).astype(int)  # 1 = green right of red
  if task == "direction4":
    return 2 * (gx > rx) + (gy > ry)
  return (gy >= size // 2).astype(int)  # absolute: 1 = lower half


@pytest.mark.parametrize("task", ["direction", "direction4", "absolute", "color_shift"])
def test_labels_follow_from_pixels(task):
  cfg = _cfg(task)
  data = rg.generate(cfg, "train")
  g = _square_corner(data["image"], rg.GREEN)
  r = _square_corner(data["image"], rg.RED)
  np.testing.assert_array_equal(g, data["green"])
  np.testing.assert_array_equal(r, data["red"])
  np.testing.assert_array_equal(data["label"], _expected_label(task, g, r, cfg.image_size))
  np.testing.assert_array_equal(
    np.bincount(data["label"]), [cfg.num_train // rg.NUM_CLASSES[task]] * rg.NUM_CLASSES[task]
  )


@pytest.mark.parametrize("task", rg.TASKS)
def test_squares_are_whole_disjoint_and_aligned(task):
  cfg = _cfg(task)
  data = rg.generate(cfg, "validation")
  s = cfg.square_size
  lit = np.any(data["image"] > 0, axis=-1).sum(axis=(1, 2))
  np.testing.assert_array_equal(lit, 2 * s * s)  # two full squares, no overlap
  assert np.all(data["green"] % cfg.stride == 0) and np.all(data["red"] % cfg.stride == 0)
  assert data["image"].shape == (40, 32, 32, 3) and data["image"].dtype == np.uint8


def test_strict_separation_and_halves():
  s = 4
  d = rg.generate(_cfg("direction"), "train")
  assert np.all(np.abs(d["green"][:, 1] - d["red"][:, 1]) >= s)
  a = rg.generate(_cfg("absolute"), "train")
  ys = np.concatenate([a["green"][:, 0], a["red"][:, 0]]).reshape(2, -1)
  upper = a["label"] == 0
  assert np.all(ys[:, upper] + s <= 16) and np.all(ys[:, ~upper] >= 16)


def test_distance_is_signed_offset_green_to_red():
  d = rg.generate(_cfg("distance"), "train")
  dx = d["red"][:, 1] - d["green"][:, 1]
  dy = d["red"][:, 0] - d["green"][:, 0]
  np.testing.assert_array_equal(d["distance"], np.stack([dx, dy], -1).astype(np.float32))
  assert d["distance"].std(0).min() > 5  # offsets vary along both axes


def test_color_shift_test_colours_never_seen_in_training():
  cfg = _cfg("color_shift")
  colours = {}
  for split in rg.SPLITS:
    px = rg.generate(cfg, split)["image"].reshape(-1, 3)
    colours[split] = {tuple(c) for c in np.unique(px, axis=0)} - {(0, 0, 0)}
  assert colours["train"] == colours["validation"] == {rg.GREEN, rg.RED}
  assert colours["test"] == set(rg.SHIFTED)
  assert np.array_equal(rg.generate(cfg, "test")["label"] >= 0, np.ones(40, bool))


def test_deterministic_and_splits_differ():
  cfg = _cfg("distance")
  a, b = rg.generate(cfg, "train"), rg.generate(cfg, "train")
  np.testing.assert_array_equal(a["image"], b["image"])
  t = rg.generate(cfg, "test")
  assert not np.array_equal(a["green"][:40], t["green"])


def test_config_validation():
  with pytest.raises(ValueError, match="task"):
    rg.RedGreenConfig(name="x", task="left_right")
  with pytest.raises(ValueError, match="square_size"):
    rg.RedGreenConfig(name="x", square_size=20)


def test_default_configs_match_thesis_sizes():
  for cfg in rg.RedGreen.BUILDER_CONFIGS:
    assert (cfg.num_train, cfg.num_validation, cfg.num_test) == (5000, 1000, 1000)
  assert [c.name for c in rg.RedGreen.BUILDER_CONFIGS] == list(rg.TASKS)


def test_tfds_array_record_round_trip(tmp_path):
  cfg = _cfg("direction4", num_train=24, num_validation=8, num_test=8)
  loaded = rg.load("unused", "train", str(tmp_path), config=cfg)
  assert list(tmp_path.rglob("*.array_record*"))
  expected = rg.generate(cfg, "train")
  for key in expected:
    np.testing.assert_array_equal(loaded[key], expected[key])


def test_registered_in_the_data_registry(tmp_path):
  from lfpe.data import builders

  for task in rg.TASKS:
    spec = builders.get_spec(f"red_green/{task}")
    assert spec.num_classes == rg.NUM_CLASSES[task]
    assert spec.fields[1] == ("label" if rg.NUM_CLASSES[task] else "distance")
    builder = spec.builder(data_dir=str(tmp_path))
    assert (builder.name, builder.builder_config.name) == ("red_green", task)
