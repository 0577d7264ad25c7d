"""layout_screens: seeded screens, held-out bins, captions that the boxes determine, loader."""

import re

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds

from lfpe import data as data_lib
from lfpe.data import builders
from lfpe.data import screen_layouts as layouts
from lfpe.data import screens as sc

TINY = dict(num_train=24, num_test=8)
CLICKABLE = {"icon", "button", "checkbox", "switch", "fab", "nav_item", "image"}


def _records(data_dir, cfg, split="train"):
  sc.LayoutScreens(config=cfg, data_dir=str(data_dir)).download_and_prepare()
  source = tfds.data_source(f"layout_screens/{cfg.name}", split=split, data_dir=str(data_dir))
  return sorted((source[i] for i in range(len(source))), key=lambda r: r["screen_id"])


@pytest.fixture(scope="module")
def splits():
  cfg = sc.ScreensConfig(name="t", num_train=600, num_test=400)
  return {split: sc.generate(cfg, split) for split in sc.SPLITS}


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
  """A data_dir with `layout_screens/small` (512 train / 128 test), built once (~1 s)."""
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data_lib.prepare("layout_screens/small", data_dir)
  return data_dir


def _real(split):
  return np.arange(sc.MAX_OBJECTS)[None] < split["num_objects"][:, None]


def _target_boxes(split):
  return split["boxes"][np.arange(len(split["target"])), split["target"]]


def test_build_is_deterministic_from_the_seed(tmp_path):
  a, b = (_records(tmp_path / d, sc.ScreensConfig(name="tiny", **TINY)) for d in "ab")
  c = _records(tmp_path / "c", sc.ScreensConfig(name="tiny", seed=1, **TINY))
  assert len(a) == 24 and [r["screen_id"] for r in a] == list(range(24))
  for ra, rb in zip(a, b, strict=True):
    for k in ra:
      np.testing.assert_array_equal(ra[k], rb[k])
  assert not np.array_equal(a[0]["boxes"], c[0]["boxes"])


def test_training_never_uses_held_out_bins(splits):
  train, test = splits["train"], splits["test"]
  assert not np.isin(train["boxes"][_real(train)], sc.HELD_OUT).any()
  assert not train["unseen"].any()
  assert np.isin(np.arange(61, 67), test["boxes"][_real(test)]).all()  # test uses the band
  assert set(sc.SNAP.tolist()).isdisjoint(sc.HELD_OUT) and np.all(np.diff(sc.SNAP) >= 0)


def test_unseen_targets_have_a_coordinate_never_trained_on(splits):
  train, test = splits["train"], splits["test"]
  seen = [set(train["boxes"][..., c][_real(train)].tolist()) for c in range(4)]
  boxes, unseen = _target_boxes(test), test["unseen"].astype(bool)
  np.testing.assert_array_equal(unseen, np.isin(boxes, sc.HELD_OUT).any(-1))
  for box in boxes[unseen]:
    assert not all(int(v) in seen[c] for c, v in enumerate(box))
  assert 0.4 < unseen.mean() < 0.65


@pytest.mark.parametrize("split", sc.SPLITS)
def test_screens_are_well_formed(splits, split):
  d, real = splits[split], _real(splits[split])
  boxes = d["boxes"]
  assert boxes.min() >= 0 and boxes.max() < sc.BINS and not boxes[~real].any()
  assert np.all(boxes[..., 2][real] > boxes[..., 0][real])
  assert np.all(boxes[..., 3][real] > boxes[..., 1][real])
  assert np.all((d["types"] > 0) == real) and not d["texts"][~real].any()
  assert d["num_objects"].min() >= 8 and d["num_objects"].max() <= sc.MAX_OBJECTS
  kinds = {sc.TYPES[t] for t in d["types"][np.arange(len(d["target"])), d["target"]]}
  assert kinds == CLICKABLE  # every kind of target occurs
  captions = d["captions"]
  assert captions.shape[1:] == (sc.NUM_REFS, sc.CAPTION_LEN) and (captions[..., 0] == sc.BOS).all()
  assert ((captions == sc.EOS).sum(-1) == 1).all() and not (captions == sc.UNK).any()
  for refs in captions[:50]:
    assert len({sc.decode(r) for r in refs}) == sc.NUM_REFS  # distinct paraphrases


def test_vocabularies():
  assert sc.CAPTION_VOCAB[:4] == ("<pad>", "<bos>", "<eos>", "<unk>")
  assert (len(sc.TYPES), len(sc.TEXT_VOCAB), len(sc.CAPTION_VOCAB)) == (
    12,
    75,
    139,
  )  # as documented
  assert sc.TEXT_VOCAB[0] == "<pad>" and len(set(sc.TEXT_VOCAB)) == len(sc.TEXT_VOCAB)
  assert len(set(sc.CAPTION_VOCAB)) == len(sc.CAPTION_VOCAB)
  assert set(sc.TEXT_VOCAB[1:]) <= set(sc.CAPTION_VOCAB)  # captions copy screen words
  ids = [sc.BOS, sc.CAPTION_VOCAB.index("top"), sc.CAPTION_VOCAB.index("icon"), sc.EOS, 7]
  assert sc.decode(ids) == "top icon"


def _words(d, i, row):
  return " ".join(sc.TEXT_VOCAB[w] for w in d["texts"][i, row] if w)


def _inside(box, outer):
  return box[0] >= outer[0] and box[1] >= outer[1] and box[2] <= outer[2] and box[3] <= outer[3]


@pytest.mark.parametrize("split", sc.SPLITS)
def test_captions_follow_from_the_boxes(splits, split):
  """Order, alignment and containment in the captions hold in the stored (snapped) boxes."""
  d, checked = splits[split], set()
  for i in range(len(d["target"])):
    n, t = d["num_objects"][i], d["target"][i]
    boxes, types = d["boxes"][i, :n], [sc.TYPES[k] for k in d["types"][i, :n]]
    box = boxes[t]
    for caption in map(sc.decode, d["captions"][i]):
      if m := re.fullmatch(r"(\w+) tab in the bottom bar", caption):
        tabs = np.sort([b[1] for b, k in zip(boxes, types, strict=True) if k == "nav_item"])
        if m[1] in layouts.ORD:
          assert tabs[layouts.ORD.index(m[1])] == box[1]
        elif m[1] in ("last", "middle"):
          assert tabs[-1 if m[1] == "last" else len(tabs) // 2] == box[1]
        else:  # a label
          assert _words(d, i, t) == m[1]
      elif m := re.fullmatch(r"switch in the row of ([\w ]+)", caption):
        rows = [j for j in range(n) if types[j] == "text" and _words(d, i, j) == m[1]]
        assert len(rows) == 1 and boxes[rows[0], 0] <= box[2] and box[0] <= boxes[rows[0], 2]
      elif m := re.fullmatch(r"\w+ button in the (dialog|card)", caption):
        outer = [
          b for b, k in zip(boxes, types, strict=True) if k == m[1].replace("card", "container")
        ]
        assert any(_inside(box, b) for b in outer)
        dialogs = [b for b, k in zip(boxes, types, strict=True) if k == "dialog"]
        assert (m[1] == "dialog") == any(_inside(box, b) for b in dialogs)
      elif caption == "icon at the top right":
        top_icons = [b for b, k in zip(boxes, types, strict=True) if k == "icon" and b[2] < 12]
        assert box[3] == max(b[3] for b in top_icons)
      else:
        continue
      checked.add(caption.split()[0] if "tab" not in caption else "tab")
  assert {"switch", "tab", "icon"} <= checked and checked & set(sc.BUTTONS)


def test_render_draws_the_screen(splits):
  example = {k: v[3] for k, v in splits["test"].items()}
  image = sc.render(example, height=160)
  assert image.size == (90, 160) and image.mode == "RGB"
  assert len(np.unique(np.asarray(image).reshape(-1, 3), axis=0)) > 4


def test_registry_specs(tmp_path):
  for name in ("full", "small"):
    spec = builders.get_spec(f"layout_screens/{name}")
    assert spec.num_classes == len(sc.CAPTION_VOCAB) and spec.image_shape is None
    assert spec.preprocess == "" and "image" not in spec.fields and "captions" in spec.fields
    builder = spec.builder(data_dir=str(tmp_path))
    assert (builder.name, builder.builder_config.name) == ("layout_screens", name)


def test_loader_reads_integer_batches(small_dir):
  cfg = data_lib.default_config("layout_screens/small")
  cfg.data_dir = small_dir
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
  train = data_lib.make_loader(cfg, global_batch_size=16, seed=0, train=True, mesh=mesh)
  batch = {k: np.asarray(v) for k, v in next(iter(train)).items()}
  shapes = {
    "screen_id": (16,),
    "boxes": (16, sc.MAX_OBJECTS, 4),
    "types": (16, sc.MAX_OBJECTS),
    "texts": (16, sc.MAX_OBJECTS, sc.MAX_TEXT),
    "num_objects": (16,),
    "target": (16,),
    "captions": (16, sc.NUM_REFS, sc.CAPTION_LEN),
    "unseen": (16,),
  }
  assert {k: v.shape for k, v in batch.items()} == shapes
  assert all(v.dtype == np.int32 for v in batch.values())
  test = data_lib.make_loader(cfg, global_batch_size=64, seed=0, train=False, mesh=mesh)
  batches = [{k: np.asarray(v) for k, v in b.items()} for b in test]
  assert len(batches) == 2 and all(b["mask"].all() for b in batches)
  assert 0.3 < np.concatenate([b["unseen"] for b in batches]).mean() < 0.7


def test_grid_captions_name_the_cell_of_the_boxs_centre():
  # centre (41 / 99, 90 / 99) = (0.414, 0.909): row 5, column 10 of the 10 x 10 grid
  refs = sc.grid_refs("checkbox", [39, 86, 43, 94])
  assert refs[0] == "checkbox in row five column ten" and len(set(refs)) == sc.NUM_REFS
  assert sc.grid_refs("fab", [0, 0, 9, 10])[2] == "the floating button in column one of row one"
  assert sc.grid_refs("nav_item", [99, 99, 99, 99])[0] == "tab in row ten column ten"
  # a cell edge: centre 9.9 / 99 = 0.1 exactly is row two; a bin lower is row one
  assert "row two" in sc.grid_refs("icon", [9, 0, 10.8, 1])[0]
  assert "row one" in sc.grid_refs("icon", [9, 0, 10.6, 1])[0]


def test_grid_configs_hold_the_same_screens_with_grid_captions():
  cfg = dict(num_train=40, num_test=40)
  for split in sc.SPLITS:
    templates = sc.generate(sc.ScreensConfig(name="t", **cfg), split)
    grid = sc.generate(sc.ScreensConfig(name="g", captions="grid", **cfg), split)
    for key in ("boxes", "types", "texts", "target", "unseen"):
      np.testing.assert_array_equal(grid[key], templates[key])
    for i in range(40):  # from the stored (in train: snapped) box of the target
      expected = sc.grid_refs(
        sc.TYPES[grid["types"][i, grid["target"][i]]], grid["boxes"][i, grid["target"][i]]
      )
      assert [sc.decode(r) for r in grid["captions"][i]] == list(expected)
  with pytest.raises(ValueError, match="captions='free'"):
    sc.ScreensConfig(name="x", captions="free")
