"""`widget_caption`: Li et al. (2020)'s widget captions on RICO screens, for the layout captioner.

Built offline (no TensorFlow) from a manual download, `{data_dir}/downloads/manual/widget_caption/`:
  widget_captions.csv    `screenId,nodeId,captions` (captions separated by `|`), from
                         https://github.com/google-research-datasets/widget-caption
  split/{train,dev,test}.txt   screen ids, one a line (same repository; dev -> `validation`)
  combined/<screenId>.json     RICO's view hierarchies ("UI Screenshots and View
                         Hierarchies", http://interactionmining.org/rico; images are not read)
A RICO json holds the tree at `["activity"]["root"]`; a node id is the path of child indices
from the root (`0`, `0.2`, `0.2.0`; null children are skipped but keep their index).

One example is one captioned node (the target) of one screen, with the features of
`lfpe.data.screens` (names, dtypes, shapes, padding), so `lfpe.models.layout` and
`lfpe.tasks.captioning` read both alike, and `references` (the captions as written):
  screen_id [] int64: the RICO screen id (one example per captioned node: not unique).
  boxes [32, 4] int32: (top, left, bottom, right) of `bounds` [x1, y1, x2, y2] / (1440, 2560)
    clipped to [0, 1] as in Li et al., quantised as screens: `round(v * 99)`; zero rows pad.
  types [32] int32: `TYPES` (0 pad, Li et al.'s 11 types): the class's last dotted part, else
    that of the first ancestor that names a type, else UNKNOWN.
  texts [32, 4] int32: a node's first non-empty of `text`, `content-desc` (a string or a
    list), else its `resource-id`'s words (`backButton` -> back button); first 4 tokens.
  num_objects, target [] int32: real rows, the target's row.
  captions [4, 12] int32: up to 4 of the node's captions (empty ones dropped), `<bos> w1 ..
    wk <eos>` (k <= 10) then padding; zero rows when it has fewer than 4.
  references [8, 24] int32: the node's captions as written, to score against (not to train
    on): every word of each (tokenised as below, no vocabulary filter, no 10-word cut), ids
    of the build's `reference_vocabulary` (`SPECIAL`, then every caption word of every split,
    most frequent first), padding 0; up to 8 captions of up to 24 words (the few longer ones
    are cut and counted in the metadata's `skipped`).
  unseen [] int32: 1 if one of the target's four bins never occurs on that side among the
    training screens' objects (`seen_bins`: 002 Fig. 4's per-dimension notion); 0 in train.
    002 counts 2,692 of 4,559 test widgets unseen and does not say whether per side or per
    whole box, nor over targets or all objects; lfpe takes every object a model trained on.

Tokens: lower-case, non-ASCII characters removed, alphanumeric runs (punctuation dropped;
Li et al. use NLTK, absent here: `don't` gives `don t`), tokens over 30 characters dropped.
Vocabulary: one for captions and texts (Li et al. share it), from the training split (each
screen's node texts and resource-id words once, and its captions), most frequent first (ties
alphabetical), `vocab_size` ids in all with `<pad> <bos> <eos> <unk>` (10,000 as Li et al.).
Unknown words are `<unk>` in texts and dropped from captions (Li et al.: no `<unk>` target),
not from `references`, which the metrics score against (as Li et al.'s `compute_score`, which
reads each reference whole from its raw string). A training widget none of whose captions
keeps a vocabulary word is skipped (`nodes_without_words`, as one whose captions have no word
at all); a validation or test one is kept, its `captions` all padding (no loss, nothing to
teacher-force), scored against its references (`kept_without_training_words`), so that the
scored split does not depend on the training vocabulary.
It is stored in the build's `metadata.json` (`vocabulary(name, data_dir)` reads it back; the
captioning task decodes with it), with the counts of what was skipped (also logged): screens
without a json, captioned nodes not in their tree or without a word left.
Objects: every node of the tree in pre-order (Li et al. use all as context); a screen of more
than 32 keeps the target and the first 31 others, still in pre-order.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
import os
import re

import numpy as np
import tensorflow_datasets as tfds
from absl import logging

from lfpe.data import base, screens
from lfpe.data.screen_layouts import MAX_OBJECTS
from lfpe.data.screens import BOS, CAPTION_LEN, EOS, MAX_TEXT, NUM_REFS, PAD, SPECIAL, UNK
from lfpe.errors import DatasetMissingError

TYPES = (
  "pad", "IMAGEVIEW", "BUTTON", "IMAGEBUTTON", "VIEW", "COMPOUNDBUTTON", "CHECKBOX",
  "RADIOBUTTON", "FLOATINGACTIONBUTTON", "TOGGLEBUTTON", "SWITCH", "UNKNOWN",
)  # fmt: skip
SPLITS = {"train": "train", "validation": "dev", "test": "test"}  # TFDS split -> split file
SCREEN_SIZE = (1440, 2560)  # RICO's width, height
MAX_WORDS = CAPTION_LEN - 2  # Li et al.'s max_token_per_label
MAX_REFERENCES, REFERENCE_LEN = 8, 24  # `references`: every caption, whole (module doc)
MAX_TOKEN_CHARS = 30
MANUAL = "widget_caption"  # the folder under `{data_dir}/downloads/manual/`
INSTRUCTIONS = """\
Download the two parts of Li et al.'s widget-caption data and put them in {root}/:
  1. widget_captions.csv and split/ (train.txt, dev.txt, test.txt) from
     https://github.com/google-research-datasets/widget-caption
  2. RICO's "UI Screenshots and View Hierarchies" (unique_uis.tar.gz) from
     http://interactionmining.org/rico; extract its combined/ folder there
     (combined/<screenId>.json are read; the screenshots are not needed).
Then build it (offline, no TensorFlow):
  python -c "from lfpe import data; data.prepare('widget_caption/full', '{data_dir}')"
(or train with configs/widget_caption.py, which builds it on first use)."""
_NAMED = TYPES[1:-1]
_RESOURCE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")  # camelCase and snake_case words


def tokenize(text: str) -> list[str]:
  """Lower-case ASCII alphanumeric runs of `text`, at most 30 characters each."""
  text = text.lower().encode("ascii", "ignore").decode()
  return [t for t in re.findall(r"[a-z0-9]+", text) if len(t) <= MAX_TOKEN_CHARS]


def resource_words(resource_id: str | None) -> list[str]:
  """`com.app:id/backButton` -> `['back', 'button']` (the name after `/`, camel/snake case)."""
  name = (resource_id or "").strip().rsplit("/", 1)[-1]
  return [w.lower() for w in _RESOURCE.findall(name)]


def node_words(node: dict) -> list[str]:
  """The first non-empty tokens of `text` and `content-desc`, else the resource-id's words."""
  desc = node.get("content-desc") or []
  for text in [node.get("text"), *([desc] if isinstance(desc, str) else desc)]:
    if text and (tokens := tokenize(str(text))):
      return tokens
  return resource_words(node.get("resource-id"))


def node_type(node: dict) -> int:
  """Index into `TYPES`: the class's last dotted part, else the first ancestor's that matches."""
  for name in [node.get("class") or "", *(node.get("ancestors") or [])]:
    last = str(name).rsplit(".", 1)[-1].upper()
    if last in _NAMED:
      return TYPES.index(last)
  return TYPES.index("UNKNOWN")


def preorder(root: dict | None) -> list[tuple[str, dict]]:
  """`(node id, node)` of every node in pre-order; ids are child-index paths from `0`."""
  out, stack = [], [("0", root)] if root else []  # (id, node) still to visit
  while stack:
    node_id, node = stack.pop()
    out.append((node_id, node))
    children = list(enumerate(node.get("children") or []))
    stack.extend((f"{node_id}.{i}", c) for i, c in reversed(children) if c)
  return out


def quantise(bounds) -> np.ndarray:
  """`[x1, y1, x2, y2]` on RICO's 1440 x 2560 screen -> (top, left, bottom, right) bins."""
  (w, h), (x1, y1, x2, y2) = SCREEN_SIZE, np.asarray(bounds, np.float64)
  return screens.to_bins([y1 / h, x1 / w, y2 / h, x2 / w])


@dataclasses.dataclass
class Screen:
  """The nodes of one screen in pre-order, and its captioned nodes `{row: [tokens, ...]}`."""

  screen_id: int
  boxes: np.ndarray  # [n, 4] bins
  types: np.ndarray  # [n]
  words: list[list[str]]  # per node: `node_words`
  captions: dict[int, list[list[str]]]


def read_screen(path: str, screen_id: str, labels: dict[str, list[str]], skipped) -> Screen:
  """One RICO json with its captioned nodes; counts captioned ids not in the tree."""
  with open(path) as f:
    nodes = preorder((json.load(f).get("activity") or {}).get("root"))
  row = {node_id: i for i, (node_id, _) in enumerate(nodes)}
  captions = {}
  for node_id, texts in labels.items():
    if node_id not in row:
      skipped["nodes_not_in_tree"] += 1
      continue
    captions[row[node_id]] = [t for t in map(tokenize, texts) if t]  # cut after the vocabulary
  return Screen(
    int(screen_id),
    np.asarray([quantise(n.get("bounds") or (0, 0, 0, 0)) for _, n in nodes], np.int32),
    np.asarray([node_type(n) for _, n in nodes], np.int32),
    [node_words(n) for _, n in nodes],
    dict(sorted(captions.items())),
  )


def build_vocabulary(parsed: list[Screen], size: int | None, texts: bool = True) -> tuple[str, ...]:
  """`SPECIAL` then the most frequent words of `parsed` (ties alphabetical), `size` in all
  (None: every word); the nodes' texts too unless `texts=False` (captions only)."""
  counts = collections.Counter()
  for s in parsed:
    if texts:
      counts.update(w for words in s.words for w in words)
    counts.update(w for refs in s.captions.values() for ref in refs for w in ref)
  words = sorted(counts, key=lambda w: (-counts[w], w))
  return SPECIAL + tuple(words[: None if size is None else size - len(SPECIAL)])


def encode(
  screen: Screen,
  target: int,
  word_id: dict[str, int],
  reference_id: dict[str, int],
  counts,
  train: bool = True,
) -> dict | None:
  """One example as stored (module doc); `counts` gets what was skipped or cut. None when
  its captions have no word, or (`train`) none keeps a vocabulary word: an evaluation split
  keeps such a widget, with all-padding `captions`, to be scored against its references."""
  written = screen.captions[target]
  refs = [[word_id[w] for w in ref if w in word_id][:MAX_WORDS] for ref in written]
  refs = [r for r in refs if r][:NUM_REFS]
  if not written or (train and not refs):
    counts["nodes_without_words"] += 1
    return None
  counts["kept_without_training_words"] += not refs
  references = np.full((MAX_REFERENCES, REFERENCE_LEN), PAD, np.int32)
  counts["references_cut"] += max(len(written) - MAX_REFERENCES, 0)
  for r, words in enumerate(written[:MAX_REFERENCES]):
    counts["reference_words_cut"] += max(len(words) - REFERENCE_LEN, 0)
    ids = [reference_id[w] for w in words[:REFERENCE_LEN]]
    references[r, : len(ids)] = ids
  others = [i for i in range(len(screen.types)) if i != target][: MAX_OBJECTS - 1]
  keep = sorted([target, *others])
  n = len(keep)
  boxes, types = np.zeros((MAX_OBJECTS, 4), np.int32), np.zeros(MAX_OBJECTS, np.int32)
  boxes[:n], types[:n] = screen.boxes[keep], screen.types[keep]
  texts = np.zeros((MAX_OBJECTS, MAX_TEXT), np.int32)
  for row, i in enumerate(keep):
    ids = [word_id.get(w, UNK) for w in screen.words[i][:MAX_TEXT]]
    texts[row, : len(ids)] = ids
  captions = np.full((NUM_REFS, CAPTION_LEN), PAD, np.int32)
  for r, ids in enumerate(refs):
    captions[r, : len(ids) + 2] = [BOS, *ids, EOS]
  ints = dict(num_objects=n, target=keep.index(target), unseen=0)  # unseen: set by `load`
  return dict(screen_id=np.int64(screen.screen_id), boxes=boxes, types=types, texts=texts,
              captions=captions, references=references,
              **{k: np.int32(v) for k, v in ints.items()})  # fmt: skip


def check_manual(root: str, data_dir: str) -> None:
  """DatasetMissingError with `INSTRUCTIONS` when a part of the download is not in `root`."""
  parts = ["widget_captions.csv", *(f"split/{f}.txt" for f in SPLITS.values()), "combined"]
  missing = [p for p in parts if not os.path.exists(os.path.join(root, p))]
  if missing:
    raise DatasetMissingError(
      f"Dataset 'widget_caption' needs a manual download; {root} lacks {', '.join(missing)}.\n"
      + INSTRUCTIONS.format(root=root, data_dir=data_dir)
    )


def load(root: str, vocab_size: int) -> tuple[dict, dict[str, tuple[str, ...]], dict]:
  """`({split: arrays}, {"vocabulary": ..., "reference_vocabulary": ...}, {split: counts of
  what was skipped or cut})` from the manual folder `root`."""
  labels = collections.defaultdict(dict)
  with open(os.path.join(root, "widget_captions.csv"), newline="") as f:
    for row in csv.DictReader(f):
      labels[row["screenId"].strip()][row["nodeId"].strip()] = row["captions"].split("|")
  parsed, skipped = {}, {}
  for split, name in SPLITS.items():
    with open(os.path.join(root, "split", f"{name}.txt")) as f:
      ids = [i for i in dict.fromkeys(line.strip() for line in f) if i in labels]
    counts = skipped[split] = collections.Counter()
    parsed[split] = []
    for i in ids:
      path = os.path.join(root, "combined", f"{i}.json")
      if not os.path.exists(path):
        counts["screens_without_json"] += 1
        continue
      parsed[split].append(read_screen(path, i, labels[i], counts))
  vocab = build_vocabulary(parsed["train"], vocab_size)
  every_screen = [s for screens_ in parsed.values() for s in screens_]
  vocabularies = dict(
    vocabulary=vocab, reference_vocabulary=build_vocabulary(every_screen, None, texts=False)
  )
  word_id, reference_id = (
    {w: i for i, w in enumerate(v) if i >= len(SPECIAL)} for v in vocabularies.values()
  )
  arrays, seen = {}, None
  for split in SPLITS:  # train first: `seen` is the bins of its objects, per side
    rows = [
      encode(s, t, word_id, reference_id, skipped[split], train=split == "train")
      for s in parsed[split]
      for t in s.captions
    ]
    rows = [r for r in rows if r is not None]
    if not rows:
      raise DatasetMissingError(f"widget_caption: no {split} example in {root}: {skipped}.")
    out = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    if seen is None:
      seen = seen_bins(out["boxes"], out["num_objects"])
    else:
      out["unseen"] = unseen(out["boxes"][np.arange(len(rows)), out["target"]], seen)
    arrays[split] = out
    if any(skipped[split].values()):
      logging.warning("widget_caption %s: skipped or cut %s", split, dict(skipped[split]))
  return arrays, vocabularies, {k: dict(+v) for k, v in skipped.items()}


def seen_bins(boxes: np.ndarray, num_objects: np.ndarray) -> list[set[int]]:
  """Per side (top, left, bottom, right), the bins that occur in training: those of every
  real object of every training screen (`boxes` [N, 32, 4], `num_objects` [N]), targets and
  context alike, since Embed-4D's row for a bin is trained by any object that has it."""
  real = np.arange(boxes.shape[1])[None, :] < num_objects[:, None]  # [N, 32]
  return [set(boxes[..., side][real].tolist()) for side in range(4)]


def unseen(targets: np.ndarray, seen: list[set[int]]) -> np.ndarray:
  """[N] int32: 1 where one of a target's four bins (`targets` [N, 4]) never occurs on that
  side in training (`seen_bins`): 002 Fig. 4's per-dimension notion of an unseen position."""
  new = np.stack([~np.isin(targets[:, side], list(seen[side])) for side in range(4)], -1)
  return new.any(-1).astype(np.int32)


@dataclasses.dataclass(eq=False)
class WidgetCaptionConfig(tfds.core.BuilderConfig):
  """The vocabulary size: ids in all, the 4 special ones included."""

  vocab_size: int = 10_000


class WidgetCaption(base.ArrayBuilder):
  """TFDS builder of the module doc from the manual folder `{manual_dir}/widget_caption/`."""

  VERSION = tfds.core.Version("1.2.0")
  RELEASE_NOTES = {
    "1.0.0": "Li et al.'s widget captions on RICO, in layout_screens' layout.",
    "1.1.0": "`unseen` against every training object's bins, not the training targets' only.",
    "1.2.0": "`references`: every caption whole, to score against; evaluation widgets with no "
    "training word kept.",
  }
  DESCRIPTION = __doc__
  HOMEPAGE = "https://github.com/google-research-datasets/widget-caption"
  MANUAL_DOWNLOAD_INSTRUCTIONS = INSTRUCTIONS
  BUILDER_CONFIGS = [WidgetCaptionConfig(name="full", description="Vocabulary of 10,000.")]

  def _info(self) -> tfds.core.DatasetInfo:
    return base.LocalInfo(
      builder=self,
      description=self.DESCRIPTION,
      features=tfds.features.FeaturesDict(self._features()),
      homepage=self.HOMEPAGE,
      metadata=tfds.core.MetadataDict(),  # vocabularies and `skipped`, saved as metadata.json
    )

  def _features(self):
    return {
      **screens.features(screen_id="RICO screen id.", unseen="A bin no training object has."),
      "references": tfds.features.Tensor(shape=(MAX_REFERENCES, REFERENCE_LEN), dtype=np.int32),
    }

  def _split_generators(self, dl_manager):
    try:
      manual = os.fspath(dl_manager.manual_dir)
    except AssertionError:  # missing or empty: name TFDS's default place in the message
      manual = os.path.join(os.fspath(self.data_dir_root), "downloads", "manual")
    self._root = os.path.join(manual, MANUAL)
    check_manual(self._root, os.fspath(self.data_dir_root))
    return super()._split_generators(dl_manager)

  def _load_arrays(self):
    arrays, vocabularies, skipped = load(self._root, self.builder_config.vocab_size)
    self.info.metadata.update({k: list(v) for k, v in vocabularies.items()}, skipped=skipped)
    return arrays


def vocabulary(name: str, data_dir: str, key: str = "vocabulary") -> tuple[str, ...]:
  """The words of the ids of `name` (e.g. `widget_caption/full`) built in `data_dir`: of
  `captions` and `texts`, or with `key="reference_vocabulary"` of `references`."""
  path = os.path.join(data_dir, name, str(WidgetCaption.VERSION), "metadata.json")
  if not os.path.exists(path):
    root = os.path.join(data_dir, "downloads", "manual", MANUAL)
    text = INSTRUCTIONS.format(root=root, data_dir=data_dir)
    raise DatasetMissingError(f"{path} is missing: build {name!r} first.\n{text}")
  with open(path) as f:
    return tuple(json.load(f)[key])


# For the data registry (`lfpe.data.builders`): `widget_caption/full`.
SPEC = base.DatasetSpec(
  name="widget_caption/full",
  num_classes=WidgetCaption.BUILDER_CONFIGS[0].vocab_size,  # caption (and text) ids
  image_shape=None,
  fields=(
    "screen_id",
    "boxes",
    "types",
    "texts",
    "num_objects",
    "target",
    "captions",
    "unseen",
    "references",
  ),  # fmt: skip
  preprocess="",
  builder=WidgetCaption,
  sizes=dict(
    text_vocab=WidgetCaption.BUILDER_CONFIGS[0].vocab_size, num_types=len(TYPES), bins=screens.BINS
  ),
)
