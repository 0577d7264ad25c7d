"""`layout_screens`: synthetic mobile screens for widget captioning (paper 002, Sec. 4.4).

A screen is a set of up to `MAX_OBJECTS` interface objects laid out with real regularities:
a top bar (`toolbar`: a menu icon at the left, the title, 0-3 action icons at the right),
often a bottom navigation bar (a `container` of 3-5 evenly spaced `nav_item`s, labelled or
not), a list of aligned rows (leading icon, label, trailing switch / checkbox / arrow icon),
cards (image, its caption, 0-2 buttons), a row of 2-3 images, sometimes a floating action
button (bottom right) and a `dialog` over the content (title, message, 1-2 buttons; what it
hides wholly is dropped). Objects are stored in random order: order carries no information,
so which row, tab or card an object is in can only come from the boxes.

One example is one (screen, target) pair. The target is a clickable object (icon, button,
checkbox, switch, fab, nav_item or image; first a type, then an object of it, uniformly;
not under a dialog); its `NUM_REFS` distinct reference captions paraphrase, by templates,
a description that needs the positions: absolute regions ("icon at the top right"), order
("third tab in the bottom bar", "second switch in the list"), alignment ("switch in the row
of wifi", "icon left of the title") and containment ("ok button in the dialog"; card
buttons use the same words). Icons, switches, checkboxes, images and the fab have no text.

Positions: a box is (top, left, bottom, right), each quantised to one of `BINS` = 100 bins,
`round(v * 99)` for v in [0, 1] (y down); the float position is `bin / 99`. Held-out
positions (paper 002, Table 4 and Fig. 4): the bins `HELD_OUT` (10 scattered ones and the
band 61-66, the same for all four coordinates) never occur in `train`: a training screen
snaps every coordinate to the nearest allowed bin (`SNAP`, ties downwards: monotone, so
order, equal coordinates and nesting are kept; a box at the band's edge may shrink by up
to 3 bins). `test` screens are quantised plainly. A test example is `unseen=1` if at least
one of its target's four coordinates is a held-out bin (the per-dimension notion), else 0
(seen, though some of its values may be rare in training); the other objects of the screen
do not count. About half the test targets are unseen.

Features:
  screen_id [] int64: row in generation order, unique within the split.
  boxes [MAX_OBJECTS, 4] int32: (top, left, bottom, right) bins; zero rows pad.
  types [MAX_OBJECTS] int32: index into `TYPES` (0 = padding, then 11 object types).
  texts [MAX_OBJECTS, MAX_TEXT] int32: indices into `TEXT_VOCAB` (0 = padding; 75 in all).
  num_objects [] int32: real objects (the first `num_objects` rows).
  target [] int32: row of the object to caption.
  captions [NUM_REFS, CAPTION_LEN] int32: references, `<bos> w1 .. wk <eos>` (k <= 10) then
    padding, indices into `CAPTION_VOCAB` (0 pad, 1 bos, 2 eos, 3 unk; 127 in all).
  unseen [] int32: 1 if the target has a held-out coordinate (test only; 0 in train).

Captions (the config's `captions`): `templates`, the paraphrases above, which the regular
layouts make easy to learn (a tiny model reaches CIDEr ~300, the ceiling of the metric for
these references); or `grid`, references that name the target's place on a 10 x 10 grid of
the screen, "icon in row three column seven" (`grid_refs`: the row and column of the
centre of the stored box, `floor(10 * (top + bottom) / 2 / 99) + 1`, likewise for the
column), so a caption is right only if the model resolves the box to a tenth of the screen
at every position, the held-out ones included.

Every screen draws from its own generator, `numpy.random.default_rng([seed, split, row])`:
the build is deterministic from the config's `seed`. Configs: `full` (20,000 train / 2,000
test) and `small` (512 / 128, for tests and CI) with template captions; `grid` and
`grid_small`, the same screens with grid captions.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import PIL.Image
import PIL.ImageDraw
import tensorflow_datasets as tfds

from lfpe.data import base
from lfpe.data.screen_layouts import (
  BUTTONS,
  HEADERS,
  MAX_OBJECTS,
  MESSAGES,
  NAV_LABELS,
  PHOTOS,
  ROW_LABELS,
  TITLES,
  screen,
)

TYPES = (
  "pad", "text", "image", "icon", "button", "checkbox", "switch", "fab", "toolbar", "nav_item",
  "container", "dialog",
)  # fmt: skip
BINS = 100
HELD_OUT = (5, 13, 21, 29, 37, 45, 53, 61, 62, 63, 64, 65, 66, 74, 83, 91)
MAX_TEXT = 4
NUM_REFS = 4
CAPTION_LEN = 12  # <bos>, up to 10 words, <eos>
SPLITS = ("train", "test")
TEXT_VOCAB = (
  "<pad>",
  *dict.fromkeys(
    w for p in (*TITLES, *NAV_LABELS, *ROW_LABELS, *HEADERS, *BUTTONS, *PHOTOS, *MESSAGES)
    for w in p.split()
  ),
)  # fmt: skip
CAPTION_WORDS = (
  "the", "at", "in", "of", "on", "to", "from", "next", "inside", "above", "below", "under",
  "left", "right", "top", "bottom", "middle", "corner", "end", "row", "list", "bar", "tab",
  "item", "navigation", "title", "dialog", "card", "grid", "image", "picture", "icon",
  "button", "checkbox", "switch", "toggle", "check", "arrow", "floating", "action", "open",
  "only", "rightmost", "for", "first", "second", "third", "fourth", "fifth", "sixth", "last",
  "column", "and",
)  # fmt: skip
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
GRID = len(NUMBERS)  # rows and columns of the `grid` captions' screen grid
KIND_WORDS = {"fab": "floating button", "nav_item": "tab"}  # else the kind is its own word
CAPTIONS = ("templates", "grid")
# Captions copy screen words (labels, titles, button texts), so those are caption words too.
SPECIAL = ("<pad>", "<bos>", "<eos>", "<unk>")  # the first caption ids (also widget_caption's)
CAPTION_VOCAB = (*SPECIAL, *dict.fromkeys(CAPTION_WORDS + NUMBERS + TEXT_VOCAB[1:]))
PAD, BOS, EOS, UNK = range(len(SPECIAL))
_TEXT_ID = {w: i for i, w in enumerate(TEXT_VOCAB)}
_CAPTION_ID = {w: i for i, w in enumerate(CAPTION_VOCAB)}
_ALLOWED = np.setdiff1d(np.arange(BINS), HELD_OUT)
# Training quantisation: each bin to the nearest allowed one, ties downwards (monotone).
SNAP = _ALLOWED[np.abs(np.arange(BINS)[:, None] - _ALLOWED[None]).argmin(1)]


def to_bins(coords) -> np.ndarray:
  """Coordinates in [0, 1] (clipped) -> the nearest of the `BINS` bins, int32."""
  return np.rint(np.clip(np.asarray(coords, np.float64), 0, 1) * (BINS - 1)).astype(np.int32)


@dataclasses.dataclass(eq=False)
class ScreensConfig(tfds.core.BuilderConfig):
  """One screens dataset: split sizes and the seed."""

  num_train: int = 20_000
  num_test: int = 2_000
  seed: int = 0
  captions: str = "templates"

  def __post_init__(self):
    if self.captions not in CAPTIONS:
      raise ValueError(f"ScreensConfig: captions={self.captions!r}; use one of {CAPTIONS}.")


def _caption(text: str) -> list[int]:
  words = text.split()
  assert len(words) <= CAPTION_LEN - 2, text
  ids = [BOS, *(_CAPTION_ID.get(w, UNK) for w in words), EOS]
  return ids + [PAD] * (CAPTION_LEN - len(ids))


def grid_refs(kind: str, box: np.ndarray) -> tuple[str, ...]:
  """The `grid` captions of an object of `kind` whose stored box is `box` (bins)."""
  top, left, bottom, right = np.asarray(box, np.float64) / (BINS - 1)
  cell = lambda lo, hi: NUMBERS[min(int(GRID * (lo + hi) / 2), GRID - 1)]
  row, col = cell(top, bottom), cell(left, right)
  name = KIND_WORDS.get(kind, kind)
  return (
    f"{name} in row {row} column {col}",
    f"{name} at row {row} and column {col}",
    f"the {name} in column {col} of row {row}",
    f"{name} at column {col} row {row}",
  )


def sample_example(
  rng: np.random.Generator, train: bool, captions: str = "templates"
) -> dict[str, np.ndarray]:
  """One (screen, target) example as stored, without `screen_id` (module doc)."""
  objects = screen(rng)
  while not any(o.refs for o in objects):  # rare: nothing clickable (e.g. plain text rows)
    objects = screen(rng)
  kinds = sorted({o.kind for o in objects if o.refs}, key=TYPES.index)
  kind = kinds[rng.integers(len(kinds))]
  candidates = [i for i, o in enumerate(objects) if o.kind == kind and o.refs]
  target = candidates[rng.integers(len(candidates))]
  refs = rng.choice(objects[target].refs, NUM_REFS, replace=False)
  order = rng.permutation(len(objects))  # stored order: random
  n = len(objects)
  boxes = np.zeros((MAX_OBJECTS, 4), np.int32)
  boxes[:n] = to_bins([objects[i].box for i in order])
  if train:
    boxes[:n] = SNAP[boxes[:n]]
  types, texts = np.zeros(MAX_OBJECTS, np.int32), np.zeros((MAX_OBJECTS, MAX_TEXT), np.int32)
  for row, i in enumerate(order):
    types[row] = TYPES.index(objects[i].kind)
    words = [_TEXT_ID[w] for w in objects[i].words.split()]
    texts[row, : len(words)] = words
  row = int(np.flatnonzero(order == target)[0])
  if captions == "grid":
    refs = grid_refs(objects[target].kind, boxes[row])
  return {
    "boxes": boxes,
    "types": types,
    "texts": texts,
    "num_objects": np.int32(n),
    "target": np.int32(row),
    "captions": np.asarray([_caption(r) for r in refs], np.int32),
    "unseen": np.int32(not train and np.isin(boxes[row], HELD_OUT).any()),
  }


def generate(cfg: ScreensConfig, split: str) -> dict[str, np.ndarray]:
  """The examples of `split` as stacked arrays, each from its generator `[seed, split, row]`."""
  n, index = {"train": cfg.num_train, "test": cfg.num_test}[split], SPLITS.index(split)
  rows = [
    sample_example(np.random.default_rng([cfg.seed, index, i]), split == "train", cfg.captions)
    for i in range(n)
  ]
  out = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
  return {"screen_id": np.arange(n, dtype=np.int64), **out}


def decode(ids) -> str:
  """Caption ids as words: stops at `<eos>`, drops `<bos>` and padding."""
  ids = np.asarray(ids).tolist()
  ids = ids[: ids.index(EOS)] if EOS in ids else ids
  return " ".join(CAPTION_VOCAB[i] for i in ids if i not in (PAD, BOS))


COLORS = {
  "text": (60, 60, 60), "image": (120, 170, 220), "icon": (90, 90, 200), "button": (40, 140, 90),
  "checkbox": (200, 120, 40), "switch": (160, 60, 160), "fab": (40, 170, 170),
  "toolbar": (200, 210, 235), "nav_item": (120, 120, 140), "container": (235, 235, 235),
  "dialog": (250, 245, 225),
}  # fmt: skip


def render(example: dict, height: int = 320) -> PIL.Image.Image:
  """The screen drawn with one colour per type (`COLORS`), larger boxes first and dialogs over
  the rest, words in text boxes, the target outlined in red: RGB, `height` x `9 / 16 height`."""
  width = round(height * 9 / 16)
  image = PIL.Image.new("RGB", (width, height), (255, 255, 255))
  draw = PIL.ImageDraw.Draw(image)
  n, target = int(example["num_objects"]), int(example["target"])
  boxes = np.asarray(example["boxes"][:n], np.float64) / (BINS - 1)
  pixels = boxes * [height, width, height, width]
  area = (pixels[:, 2] - pixels[:, 0]) * (pixels[:, 3] - pixels[:, 1])
  dialogs = boxes[np.asarray(example["types"][:n]) == TYPES.index("dialog")][None]
  inside = (boxes[:, None, :2] >= dialogs[..., :2]) & (boxes[:, None, 2:] <= dialogs[..., 2:])
  inside = inside.all(-1).any(-1)
  for i in np.lexsort((-area, inside)):
    top, left, bottom, right = pixels[i]
    kind = TYPES[int(example["types"][i])]
    filled = kind in ("container", "dialog", "toolbar", "image")
    color = COLORS[kind]
    draw.rectangle((left, top, right, bottom), fill=color if filled else None, outline=color)
    words = " ".join(TEXT_VOCAB[w] for w in np.asarray(example["texts"][i]) if w)
    if words:
      draw.text((left + 2, top + 1), words, fill=(0, 0, 0))
  top, left, bottom, right = pixels[target]
  draw.rectangle((left - 1, top - 1, right + 1, bottom + 1), outline=(255, 0, 0), width=2)
  return image


def features(*, screen_id: str, unseen: str) -> dict:
  """The TFDS features of a screen dataset (`widget_caption` has these and `references`);
  `screen_id` and `unseen` document what those two mean there."""
  ints = lambda *shape: tfds.features.Tensor(shape=shape, dtype=np.int32)
  return {
    "screen_id": tfds.features.Scalar(np.int64, doc=screen_id),
    "boxes": ints(MAX_OBJECTS, 4),
    "types": ints(MAX_OBJECTS),
    "texts": ints(MAX_OBJECTS, MAX_TEXT),
    "num_objects": tfds.features.Scalar(np.int32, doc="Real objects (the first rows)."),
    "target": tfds.features.Scalar(np.int32, doc="Row of the object to caption."),
    "captions": ints(NUM_REFS, CAPTION_LEN),
    "unseen": tfds.features.Scalar(np.int32, doc=unseen),
  }


class LayoutScreens(base.ArrayBuilder):
  """TFDS builder of the synthetic screens; one config per dataset size (module doc)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Screens of up to 32 objects, one target and 4 captions each."}
  DESCRIPTION = __doc__
  BUILDER_CONFIGS = [
    ScreensConfig(name="full", description="20,000 train / 2,000 test examples."),
    ScreensConfig(
      name="small", description="512 / 128 examples (tests, CI).", num_train=512, num_test=128
    ),
    ScreensConfig(name="grid", description="`full` with grid captions.", captions="grid"),
    ScreensConfig(
      name="grid_small",
      description="`small` with grid captions (tests, CI).",
      num_train=512,
      num_test=128,
      captions="grid",
    ),
  ]

  def _features(self):
    return features(
      screen_id="Row in generation order.", unseen="Target has a held-out coordinate."
    )

  def _load_arrays(self):
    return {split: generate(self.builder_config, split) for split in SPLITS}


def _spec(cfg: ScreensConfig) -> base.DatasetSpec:
  builder = base.with_config(LayoutScreens, cfg.name)
  return base.DatasetSpec(
    name=f"layout_screens/{cfg.name}",
    num_classes=len(CAPTION_VOCAB),  # the words a caption decoder predicts
    image_shape=None,
    fields=("screen_id", "boxes", "types", "texts", "num_objects", "target", "captions", "unseen"),
    preprocess="",  # integer features as stored
    builder=builder,
    sizes=dict(text_vocab=len(TEXT_VOCAB), num_types=len(TYPES), bins=BINS),
  )


# For the data registry (`lfpe.data.builders`): `layout_screens/full` and `/small`.
SPECS = tuple(_spec(c) for c in LayoutScreens.BUILDER_CONFIGS)
