"""widget_caption's builder: RICO trees and Li et al.'s captions as layout_screens-like
examples (the task that trains on them: test_widget_caption_task.py)."""

import collections
import dataclasses
import json
import os

import numpy as np
import pytest
from widget_caption_download import BOXES_101, LONG, SCREENS, write_manual
from widget_caption_download import read_split as _split

from lfpe import data as data_lib
from lfpe.data import builders
from lfpe.data import screens as sc
from lfpe.data import widget_caption as wc
from lfpe.errors import DatasetMissingError


@pytest.fixture
def data_dir(widget_caption_dir):
  """`widget_caption/full` built from the fake download, once a session (conftest.py)."""
  return widget_caption_dir


def _ids(vocab, words):
  ids = [sc.BOS, *(vocab.index(w) for w in words.split()), sc.EOS]
  return ids + [sc.PAD] * (sc.CAPTION_LEN - len(ids))


def test_node_ids_boxes_and_types_follow_the_format():
  nodes = wc.preorder(SCREENS["101"]["activity"]["root"])
  assert [i for i, _ in nodes] == ["0", "0.0", "0.0.0", "0.0.1", "0.2"]
  boxes = [wc.quantise(n["bounds"]).tolist() for _, n in nodes]
  assert boxes == BOXES_101
  types = [wc.TYPES[wc.node_type(n)] for _, n in nodes]
  assert types == ["VIEW", "VIEW", "IMAGEBUTTON", "VIEW", "IMAGEVIEW"]  # class, else ancestors
  more = [n for _, n in wc.preorder(SCREENS["102"]["activity"]["root"])[1:]]
  more += [n for _, n in wc.preorder(SCREENS["104"]["activity"]["root"])[1:2]]
  assert [wc.TYPES[wc.node_type(n)] for n in more] == [
    "SWITCH",
    "CHECKBOX",
    "UNKNOWN",
    "FLOATINGACTIONBUTTON",
  ]
  assert wc.preorder(None) == []


def test_tokens_and_node_words():
  assert wc.tokenize("Navigate to the previous page.") == "navigate to the previous page".split()
  assert wc.tokenize("Don't   STOP, café!") == ["don", "t", "stop", "caf"]  # ASCII only
  assert wc.tokenize("a " + "x" * 31) == ["a"]  # tokens over 30 characters are dropped
  assert wc.resource_words("com.app:id/backButton") == ["back", "button"]
  assert wc.resource_words("a:id/btn_send_URLField") == ["btn", "send", "url", "field"]
  assert wc.resource_words(None) == []
  nodes = dict(wc.preorder(SCREENS["101"]["activity"]["root"]))
  assert wc.node_words(nodes["0.0.1"]) == ["settings"]  # text
  assert wc.node_words(nodes["0.2"]) == ["profile", "photo"]  # content-desc list, "" skipped
  assert wc.node_words(nodes["0.0.0"]) == ["back", "button"]  # resource-id
  assert wc.node_words(nodes["0"]) == []


def test_vocabulary_is_the_training_words_most_frequent_first(data_dir):
  vocab = wc.vocabulary("widget_caption/full", data_dir)
  assert vocab[:4] == wc.SPECIAL == ("<pad>", "<bos>", "<eos>", "<unk>")
  # profile 4 (1 text, 3 captions), back 3 (1 resource-id, 2 captions), the 3, then 2s.
  assert vocab[4:10] == ("profile", "back", "the", "open", "to", "wifi")
  assert vocab[10:13] == ("a", "button", "go")  # then the 1s, alphabetical
  assert len(vocab) == 4 + 28 and "send" not in vocab and "ghost" not in vocab  # train only
  meta = json.load(
    open(os.path.join(data_dir, f"widget_caption/full/{wc.WidgetCaption.VERSION}/metadata.json"))
  )
  assert meta["skipped"] == {
    "train": {"nodes_not_in_tree": 1, "nodes_without_words": 1},
    "validation": {},
    "test": {"screens_without_json": 1},
  }


def test_examples_as_stored(data_dir):
  vocab = wc.vocabulary("widget_caption/full", data_dir)
  train = _split(data_dir, "train")
  assert train["screen_id"].tolist() == [101, 101, 102] and not train["unseen"].any()
  assert train["num_objects"].tolist() == [5, 5, 4] and train["target"].tolist() == [2, 4, 1]
  assert train["types"][0].tolist() == [4, 4, 3, 4, 1] + [0] * 27
  assert train["boxes"][0, :5].tolist() == BOXES_101
  assert not train["boxes"][0, 5:].any() and not train["texts"][0, 5:].any()
  back, button, settings = (vocab.index(w) for w in ("back", "button", "settings"))
  assert train["texts"][0, :4].tolist() == [
    [0] * 4,
    [0] * 4,
    [back, button, 0, 0],
    [settings, 0, 0, 0],
  ]
  first = np.zeros((sc.NUM_REFS, sc.CAPTION_LEN), int)
  for r, words in enumerate(["go back", "navigate to the previous page", "back"]):
    first[r] = _ids(vocab, words)
  np.testing.assert_array_equal(train["captions"][0], first)  # a zero row: only 3 captions
  long = _ids(vocab, "tap here to open the profile of the user in")  # 10 words kept
  assert train["captions"][1, 2].tolist() == long
  assert train["captions"][2, 0].tolist() == _ids(vocab, "turn on wifi")
  for split in ("train", "validation", "test"):
    d = _split(data_dir, split)
    for k, feature in wc.WidgetCaption(data_dir=data_dir).info.features.items():
      assert d[k].shape[1:] == feature.shape and d[k].dtype.kind == "i"  # scalars: ints
  dev = _split(data_dir, "validation")  # "send" is not a training word: <unk> in texts
  assert dev["texts"][0, 1, 0] == sc.UNK and dev["captions"][0, 0].tolist() == _ids(vocab, "back")
  assert dev["captions"][0, 1:].sum() == 0  # "send message" has no word left


def _written(reference_vocab, rows):
  return [" ".join(reference_vocab[i] for i in row if i) for row in rows if row.any()]


def test_references_are_every_caption_with_all_its_words(data_dir):
  """What the metrics score against: captions whole (13 words, words outside the training
  vocabulary), in a vocabulary of every split's caption words, most frequent first."""
  written = wc.vocabulary("widget_caption/full", data_dir, "reference_vocabulary")
  assert written[:4] == wc.SPECIAL and written[4:7] == ("back", "profile", "the")  # 4, 3, 3
  assert {"send", "message", "item", "previous"} <= set(written) and "ghost" not in written
  assert "settings" not in written  # a node's text, not a caption
  train, dev = _split(data_dir, "train"), _split(data_dir, "validation")
  assert train["references"].shape[1:] == (wc.MAX_REFERENCES, wc.REFERENCE_LEN)
  assert _written(written, train["references"][0]) == [
    "go back",
    "navigate to the previous page",
    "back",
  ]
  assert _written(written, train["references"][1]) == ["open profile", "profile picture", LONG]
  assert _written(written, dev["references"][0]) == ["send message", "back"]


def test_an_evaluation_widget_with_no_training_word_is_kept_to_be_scored():
  """No caption keeps a vocabulary word: skipped in training (nothing to learn), kept in
  validation and test with padding captions, so the scored split does not depend on the
  training vocabulary; a widget whose captions have no word at all is skipped everywhere."""
  screen = wc.Screen(7, np.zeros((1, 4), np.int32), np.ones(1, np.int32), [[]], {0: [["zebra"]]})
  reference_id, counts = {"zebra": 4}, collections.Counter()
  assert wc.encode(screen, 0, {}, reference_id, counts) is None
  kept = wc.encode(screen, 0, {}, reference_id, counts, train=False)
  assert not kept["captions"].any() and kept["references"][0, :2].tolist() == [4, 0]
  assert +counts == {"nodes_without_words": 1, "kept_without_training_words": 1}
  empty = dataclasses.replace(screen, captions={0: []})
  assert wc.encode(empty, 0, {}, reference_id, counts, train=False) is None


def test_references_past_8_captions_or_24_words_are_cut_and_counted():
  words = [f"w{i}" for i in range(30)]
  screen = wc.Screen(7, np.zeros((1, 4), np.int32), np.ones(1, np.int32), [[]], {0: [words] * 9})
  reference_id = {w: i + 4 for i, w in enumerate(words)}
  counts = collections.Counter()
  row = wc.encode(screen, 0, reference_id, reference_id, counts)
  assert row["references"].tolist() == [list(range(4, 28))] * 8
  assert +counts == {"references_cut": 1, "reference_words_cut": 8 * 6}


def test_features_are_those_of_layout_screens_and_the_references(tmp_path):
  ours = wc.WidgetCaption(data_dir=str(tmp_path)).info.features
  theirs = sc.LayoutScreens(config="small", data_dir=str(tmp_path)).info.features
  assert list(ours) == [*theirs, "references"] == list(wc.SPEC.fields)
  for k in theirs:
    assert (ours[k].shape, ours[k].np_dtype) == (theirs[k].shape, theirs[k].np_dtype)
  assert (wc.SPEC.num_classes, len(wc.TYPES)) == (10_000, 12)


def test_unseen_is_a_target_bin_no_training_object_has(data_dir):
  test = _split(data_dir, "test")
  target = test["boxes"][np.arange(2), test["target"]]
  # the fab's top (85) is no training object's top; the back button's box is a target's.
  assert target.tolist() == [[85, 81, 93, 96], [3, 0, 10, 12]]
  assert test["unseen"].tolist() == [1, 0]
  vocab = wc.vocabulary("widget_caption/full", data_dir)
  assert test["captions"][0, 0].tolist() == _ids(vocab, "new")  # "add", "item": unknown
  refs = [_ids(vocab, "go back"), _ids(vocab, "previous"), [0] * 12, [0] * 12]
  assert test["captions"][1].tolist() == refs


def test_a_bin_is_seen_when_any_training_object_has_it_not_only_a_target():
  """`seen_bins` reads every real object of the training screens (a context object's bin
  trains Embed-4D's row too) and no padding row; `unseen` flags a target with any side new."""
  boxes = np.zeros((2, 32, 4), int)
  boxes[0, :2] = [[3, 0, 10, 12], [50, 60, 70, 80]]  # a target and a context object
  boxes[1, :1] = [[5, 14, 9, 48]]
  boxes[1, 1] = [90, 90, 99, 99]  # padding beyond num_objects: not a training position
  seen = wc.seen_bins(boxes, np.array([2, 1]))
  assert seen == [{3, 50, 5}, {0, 60, 14}, {10, 70, 9}, {12, 80, 48}]
  targets = np.array([[50, 60, 70, 80], [3, 14, 9, 12], [90, 0, 10, 12], [3, 0, 10, 99]])
  assert wc.unseen(targets, seen).tolist() == [0, 0, 1, 1]


def test_large_screens_keep_the_target_and_the_first_objects():
  n = 40
  screen = wc.Screen(
    7,
    np.tile(np.arange(n)[:, None], (1, 4)).astype(np.int32),
    np.full(n, 4, np.int32),
    [[] for _ in range(n)],
    {35: [["x"]]},
  )
  example = wc.encode(screen, 35, {"x": 4}, {"x": 4}, collections.Counter())
  assert example["num_objects"] == 32 and example["target"] == 31
  assert example["boxes"][:, 0].tolist() == [*range(31), 35]
  assert example["captions"][0, :3].tolist() == [sc.BOS, 4, sc.EOS]


def test_vocabulary_size_comes_from_the_builder_config(tmp_path):
  write_manual(str(tmp_path / "downloads" / "manual" / "widget_caption"))
  cfg = wc.WidgetCaptionConfig(name="tiny", vocab_size=6)
  wc.WidgetCaption(config=cfg, data_dir=str(tmp_path)).download_and_prepare()
  vocab = wc.vocabulary("widget_caption/tiny", str(tmp_path))
  assert vocab == (*wc.SPECIAL, "profile", "back")
  train = _split(str(tmp_path), "train", "widget_caption/tiny")
  assert train["screen_id"].tolist() == [101, 101]  # "turn on wifi" has no word left
  assert train["captions"][0, :2, :3].tolist() == [[sc.BOS, 5, sc.EOS]] * 2  # go back, back
  assert train["texts"][0, 3, 0] == sc.UNK  # "settings"


def test_missing_download_says_where_to_get_it_and_put_it(tmp_path):
  with pytest.raises(DatasetMissingError) as info:
    data_lib.prepare("widget_caption/full", str(tmp_path))
  message = str(info.value)
  root = os.path.join(str(tmp_path), "downloads", "manual", "widget_caption")
  for part in (root, "github.com/google-research-datasets/widget-caption", "combined/", "split/"):
    assert part in message
  assert "interactionmining.org/rico" in message and "widget_captions.csv" in message
  assert builders.prepared_version("widget_caption/full", str(tmp_path)) is None
  with pytest.raises(DatasetMissingError, match="metadata.json"):
    wc.vocabulary("widget_caption/full", str(tmp_path / "nothing"))
