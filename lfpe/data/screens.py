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

Every screen draws from its own generator, `numpy.random.default_rng([seed, split, row])`:
the build is deterministic from the config's `seed`. Configs: `full` (20,000 train / 2,000
test) and `small` (512 / 128, for tests and CI).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import PIL.Image
import PIL.ImageDraw
import tensorflow_datasets as tfds

from lfpe.data import base

TYPES = (
  "pad", "text", "image", "icon", "button", "checkbox", "switch", "fab", "toolbar", "nav_item",
  "container", "dialog",
)  # fmt: skip
BINS = 100
HELD_OUT = (5, 13, 21, 29, 37, 45, 53, 61, 62, 63, 64, 65, 66, 74, 83, 91)
MAX_OBJECTS = 32
MAX_TEXT = 4
NUM_REFS = 4
CAPTION_LEN = 12  # <bos>, up to 10 words, <eos>
SPLITS = ("train", "test")
SQUARE = 16 / 9  # width of a square per unit of its height, on a 9:16 portrait screen

TITLES = ("settings", "gallery", "messages", "music", "calendar", "contacts", "store", "news")
NAV_LABELS = ("home", "search", "explore", "library", "profile", "inbox", "favorites", "alerts")
ROW_LABELS = (
  "wifi", "bluetooth", "airplane mode", "dark mode", "location", "sound", "vibration",
  "battery saver", "notifications", "auto sync", "backup", "privacy", "storage", "display",
  "language", "accounts", "security", "mobile data", "hotspot", "do not disturb",
)  # fmt: skip
HEADERS = ("general", "network", "advanced", "recent")
BUTTONS = ("ok", "cancel", "save", "delete", "share", "more", "allow", "deny", "done", "send")
PHOTOS = ("sunset", "beach", "mountain", "city", "forest", "lake", "garden", "bridge")
MESSAGES = ("discard changes", "are you sure", "allow access to photos", "delete this item")
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
)  # fmt: skip
# Captions copy screen words (labels, titles, button texts), so those are caption words too.
CAPTION_VOCAB = ("<pad>", "<bos>", "<eos>", "<unk>", *dict.fromkeys(CAPTION_WORDS + TEXT_VOCAB[1:]))
PAD, BOS, EOS, UNK = range(4)
ORD = ("first", "second", "third", "fourth", "fifth", "sixth")
_TEXT_ID = {w: i for i, w in enumerate(TEXT_VOCAB)}
_CAPTION_ID = {w: i for i, w in enumerate(CAPTION_VOCAB)}
_ALLOWED = np.setdiff1d(np.arange(BINS), HELD_OUT)
# Training quantisation: each bin to the nearest allowed one, ties downwards (monotone).
SNAP = _ALLOWED[np.abs(np.arange(BINS)[:, None] - _ALLOWED[None]).argmin(1)]


@dataclasses.dataclass(eq=False)
class ScreensConfig(tfds.core.BuilderConfig):
  """One screens dataset: split sizes and the seed."""

  num_train: int = 20_000
  num_test: int = 2_000
  seed: int = 0


@dataclasses.dataclass
class _Object:
  kind: str
  box: tuple[float, float, float, float]  # top, left, bottom, right in [0, 1]
  words: str = ""
  refs: tuple[str, ...] = ()  # caption templates filled in; empty: not a target


class _Layout:
  """The objects of one screen as they are placed, with the generator that places them."""

  def __init__(self, rng: np.random.Generator):
    self.rng, self.objects = rng, []
    self.margin = rng.uniform(0.02, 0.06)  # left and right, per screen as in real apps

  def add(self, kind, top, left, bottom, right, words="", refs=()):
    self.objects.append(_Object(kind, (top, left, bottom, right), words, tuple(refs)))

  def pick(self, choices, n=None):
    index = self.rng.choice(len(choices), n, replace=False)
    return choices[index] if n is None else [choices[i] for i in index]


def _toolbar(lay: _Layout) -> float:
  """Top bar with a menu icon, the title and 0-3 action icons; returns its bottom."""
  rng, h = lay.rng, lay.rng.uniform(0.08, 0.11)
  size, title = 0.55 * h, lay.pick(TITLES)
  top, width = (h - size) / 2, size * SQUARE
  lay.add("toolbar", 0, 0, h, 1)
  menu, actions = rng.uniform() < 0.8, int(rng.integers(0, 4))
  left, m = lay.margin, lay.margin
  if menu:
    refs = ("icon at the top left", "top left icon", "icon in the top left corner",
            "icon left of the title", f"icon left of {title}",
            "first icon in the top bar")  # fmt: skip
    lay.add("icon", top, left, top + size, left + width, refs=refs)
    left += width + m
  lay.add("text", 0.25 * h, left, 0.75 * h, left + 0.06 + 0.11 * len(title.split()), title)
  for k in range(actions):  # k-th from the right
    o, n = ORD[k], ORD[menu + actions - 1 - k]  # from the right, from the left
    refs = (
      ("icon at the top right", "top right icon", "icon in the top right corner",
       "last icon in the top bar", "rightmost icon in the top bar")
      if k == 0
      else (f"{o} icon from the right in the top bar", f"{o} icon from the right at the top",
            f"{n} icon in the top bar", f"{n} icon at the top")
      + (("icon next to the top right icon",) if k == 1 else ())
    )  # fmt: skip
    right = 1 - m - k * (width + 0.03)
    lay.add("icon", top, right - width, top + size, right, refs=refs)
  return h


def _bottom_bar(lay: _Layout) -> float:
  """Bottom navigation bar of 3-5 evenly spaced tabs, labelled or not; returns its top."""
  rng, h = lay.rng, lay.rng.uniform(0.08, 0.11)
  n, top = int(rng.integers(3, 6)), 1 - h
  labels = lay.pick(NAV_LABELS, n) if rng.uniform() < 0.7 else [""] * n
  lay.add("container", top, 0, 1, 1)
  for i, label in enumerate(labels):
    o = ORD[i]
    refs = [f"{o} tab in the bottom bar", f"{o} item in the bottom bar", f"{o} tab from the left",
            f"{o} navigation tab"]  # fmt: skip
    refs += ["last tab in the bottom bar", "tab at the bottom right"] if i == n - 1 else []
    refs += ["tab at the bottom left"] if i == 0 else []
    refs += ["middle tab in the bottom bar"] if n % 2 and i == n // 2 else []
    refs += [f"{label} tab in the bottom bar"] if label else []
    lay.add("nav_item", top + 0.12 * h, (i + 0.15) / n, 1 - 0.12 * h, (i + 0.85) / n, label, refs)
  return top


def _list(lay: _Layout, top: float, bottom: float, budget: int) -> float:
  """Aligned rows: leading icon, label, trailing switch / checkbox / arrow; returns the end."""
  rng, row, m = lay.rng, lay.rng.uniform(0.065, 0.09), lay.margin
  if rng.uniform() < 0.5 and budget > 1:
    lay.add("text", top, m, top + 0.045, m + 0.25, lay.pick(HEADERS))
    top, budget = top + 0.055, budget - 1
  lead, trail = rng.uniform() < 0.6, lay.pick(("switch", "checkbox", "arrow", "none"))
  per_row = 1 + lead + (trail != "none")
  n = min(int(rng.integers(2, 7)), int((bottom - top) / row), budget // per_row)
  for j, label in enumerate(lay.pick(ROW_LABELS, n)):
    o, mid = ORD[j], top + (j + 0.5) * row
    left = m
    if lead:
      refs = (f"icon left of {label}", f"{label} icon", f"icon in the row of {label}",
              f"icon in the {o} row")  # fmt: skip
      lay.add("icon", mid - 0.025, left, mid + 0.025, left + 0.05 * SQUARE, refs=refs)
      left += 0.05 * SQUARE + m
    lay.add("text", mid - 0.0225, left, mid + 0.0225, left + 0.06 + 0.1 * len(label.split()), label)
    if trail == "switch":
      refs = (f"switch in the row of {label}", f"switch next to {label}", f"toggle {label}",
              f"{label} switch", f"switch in the {o} row", f"{o} switch in the list")  # fmt: skip
      lay.add("switch", mid - 0.0225, 1 - m - 0.12, mid + 0.0225, 1 - m, refs=refs)
    elif trail == "checkbox":
      refs = (f"checkbox for {label}", f"check {label}", f"checkbox in the row of {label}",
              f"checkbox next to {label}", f"{o} checkbox in the list")  # fmt: skip
      lay.add("checkbox", mid - 0.0225, 1 - m - 0.08, mid + 0.0225, 1 - m, refs=refs)
    elif trail == "arrow":
      refs = (f"icon right of {label}", f"open {label}", f"arrow in the row of {label}",
              f"arrow next to {label}", f"icon at the end of the {o} row")  # fmt: skip
      lay.add("icon", mid - 0.0225, 1 - m - 0.08, mid + 0.0225, 1 - m, refs=refs)
  return top + n * row


def _card(lay: _Layout, top: float, index: int, buttons: int) -> float:
  """Card: an image, its caption below, `buttons` buttons at the bottom right; returns the end."""
  rng, c, m = lay.rng, ORD[index], lay.margin
  image_bottom = top + 0.015 + rng.uniform(0.12, 0.2)
  caption = lay.pick(PHOTOS)
  end = image_bottom + 0.07 + (0.065 if buttons else 0)
  lay.add("container", top, m, end, 1 - m)
  refs = (f"image above {caption}", f"picture above {caption}", f"image in the {c} card",
          f"image at the top of the {c} card")  # fmt: skip
  lay.add("image", top + 0.015, m + 0.03, image_bottom, 0.97 - m, refs=refs)
  lay.add("text", image_bottom + 0.015, m + 0.03, image_bottom + 0.06, m + 0.33, caption)
  for k, word in enumerate(lay.pick(BUTTONS, buttons)):
    right = 0.97 - m - (buttons - 1 - k) * 0.28
    where = ("only" if buttons == 1 else ("left", "right")[k]) + f" button in the {c} card"
    refs = (f"{word} button in the card", f"{word} button below {caption}",
            f"{word} button under the image", where)  # fmt: skip
    lay.add("button", end - 0.065, right - 0.25, end - 0.015, right, word, refs)
  return end


def _grid(lay: _Layout, top: float, count: int) -> float:
  """A row of `count` equal images, tops aligned; returns its bottom."""
  m = lay.margin
  width = (1 - 2 * m - (count - 1) * 0.03) / count
  bottom = top + width / SQUARE * lay.rng.uniform(0.8, 1.2)
  for k in range(count):
    side = "on the left" if k == 0 else "on the right" if k == count - 1 else "in the middle"
    o = ORD[k]
    refs = (f"{o} image in the row", f"{o} image from the left", f"{o} picture in the grid",
            f"image {side}", f"picture {side}")  # fmt: skip
    left = m + k * (width + 0.03)
    lay.add("image", top, left, bottom, left + width, refs=refs)
  return bottom


def _dialog(lay: _Layout, buttons: int) -> None:
  """A dialog over the content: title, message, 1-2 buttons at its bottom right. Objects it
  hides wholly are dropped (they are not on screen)."""
  rng = lay.rng
  top, side = rng.uniform(0.25, 0.45), rng.uniform(0.06, 0.14)
  bottom = top + rng.uniform(0.22, 0.3)
  hidden = lambda b: b[0] >= top and b[1] >= side and b[2] <= bottom and b[3] <= 1 - side
  lay.objects = [o for o in lay.objects if not hidden(o.box)]
  lay.add("dialog", top, side, bottom, 1 - side)
  lay.add("text", top + 0.02, side + 0.05, top + 0.07, 0.6, lay.pick(TITLES))
  lay.add("text", top + 0.09, side + 0.05, top + 0.14, 1 - side - 0.05, lay.pick(MESSAGES))
  for k, word in enumerate(lay.pick(BUTTONS, buttons)):
    right = 1 - side - 0.04 - (buttons - 1 - k) * 0.26
    where = "only" if buttons == 1 else ("left", "right")[k]
    refs = (f"{word} button in the dialog", f"{word} button inside the dialog",
            f"{word} in the dialog", f"{where} button in the dialog",
            f"{ORD[k]} button in the dialog")  # fmt: skip
    lay.add("button", bottom - 0.07, right - 0.23, bottom - 0.02, right, word, refs)


def _screen(rng: np.random.Generator) -> list[_Object]:
  """One screen's objects in placing order (containers before what they hold)."""
  lay = _Layout(rng)
  content_top = _toolbar(lay) + rng.uniform(0.01, 0.04)
  content_bottom = _bottom_bar(lay) if rng.uniform() < 0.7 else 1.0
  fab, dialog = rng.uniform() < 0.3, int(rng.integers(1, 3)) if rng.uniform() < 0.2 else 0
  budget = MAX_OBJECTS - len(lay.objects) - fab - (3 + dialog if dialog else 0)
  y, cards, first = content_top, 0, len(lay.objects)
  for block in lay.pick(("list", "card", "card", "grid"), 4):
    room, used = content_bottom - y - 0.02, len(lay.objects)
    if block == "list" and room > 0.15 and budget >= 4:
      y = _list(lay, y, content_bottom - 0.02, budget)
    elif block == "card" and room > 0.36 and budget >= 5:
      y, cards = _card(lay, y, cards, int(rng.integers(0, 3))), cards + 1
    elif block == "grid" and room > 0.34 and budget >= 3:
      y = _grid(lay, y, int(rng.integers(2, 4)))
    budget -= len(lay.objects) - used
    y += rng.uniform(0.01, 0.04)
  if dialog:  # The content under it is no target: its captions could name hidden objects.
    for o in lay.objects[first:]:
      o.refs = ()
    _dialog(lay, dialog)
  if fab:
    refs = ("floating button at the bottom right", "button in the bottom right corner",
            "action button at the bottom right", "bottom right floating button")  # fmt: skip
    refs += ("floating button above the bottom bar",) if content_bottom < 1 else ()
    size = rng.uniform(0.06, 0.08)
    bottom, right = content_bottom - 0.025, 1 - lay.margin - 0.02
    lay.add("fab", bottom - size, right - size * SQUARE, bottom, right, refs=refs)
  return lay.objects


def _caption(text: str) -> list[int]:
  words = text.split()
  assert len(words) <= CAPTION_LEN - 2, text
  ids = [BOS, *(_CAPTION_ID.get(w, UNK) for w in words), EOS]
  return ids + [PAD] * (CAPTION_LEN - len(ids))


def sample_example(rng: np.random.Generator, train: bool) -> dict[str, np.ndarray]:
  """One (screen, target) example as stored, without `screen_id` (module doc)."""
  objects = _screen(rng)
  while not any(o.refs for o in objects):  # rare: nothing clickable (e.g. plain text rows)
    objects = _screen(rng)
  kinds = sorted({o.kind for o in objects if o.refs}, key=TYPES.index)
  kind = kinds[rng.integers(len(kinds))]
  candidates = [i for i, o in enumerate(objects) if o.kind == kind and o.refs]
  target = candidates[rng.integers(len(candidates))]
  refs = rng.choice(objects[target].refs, NUM_REFS, replace=False)
  order = rng.permutation(len(objects))  # stored order: random
  n = len(objects)
  boxes = np.zeros((MAX_OBJECTS, 4), np.int32)
  boxes[:n] = np.rint(np.clip([objects[i].box for i in order], 0, 1) * (BINS - 1))
  if train:
    boxes[:n] = SNAP[boxes[:n]]
  types, texts = np.zeros(MAX_OBJECTS, np.int32), np.zeros((MAX_OBJECTS, MAX_TEXT), np.int32)
  for row, i in enumerate(order):
    types[row] = TYPES.index(objects[i].kind)
    words = [_TEXT_ID[w] for w in objects[i].words.split()]
    texts[row, : len(words)] = words
  row = int(np.flatnonzero(order == target)[0])
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
    sample_example(np.random.default_rng([cfg.seed, index, i]), split == "train") for i in range(n)
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
  ]

  def _features(self):
    ints = lambda *shape: tfds.features.Tensor(shape=shape, dtype=np.int32)
    return {
      "screen_id": tfds.features.Scalar(np.int64, doc="Row in generation order."),
      "boxes": ints(MAX_OBJECTS, 4),
      "types": ints(MAX_OBJECTS),
      "texts": ints(MAX_OBJECTS, MAX_TEXT),
      "num_objects": tfds.features.Scalar(np.int32, doc="Real objects (the first rows)."),
      "target": tfds.features.Scalar(np.int32, doc="Row of the object to caption."),
      "captions": ints(NUM_REFS, CAPTION_LEN),
      "unseen": tfds.features.Scalar(np.int32, doc="Target has a held-out coordinate."),
    }

  def _load_arrays(self):
    return {split: generate(self.builder_config, split) for split in SPLITS}


class _ConfigBuilder(LayoutScreens, skip_registration=True):
  """`LayoutScreens` defaulting to one config: what `builders.prepare` instantiates."""

  CONFIG = "full"

  def __init__(self, **kwargs):
    kwargs.setdefault("config", self.CONFIG)
    super().__init__(**kwargs)


def _spec(cfg: ScreensConfig) -> base.DatasetSpec:
  builder = type(
    f"LayoutScreens_{cfg.name}",
    (_ConfigBuilder,),
    {"name": "layout_screens", "CONFIG": cfg.name},
    skip_registration=True,
  )
  return base.DatasetSpec(
    name=f"layout_screens/{cfg.name}",
    num_classes=len(CAPTION_VOCAB),  # the words a caption decoder predicts
    image_shape=None,
    fields=("screen_id", "boxes", "types", "texts", "num_objects", "target", "captions", "unseen"),
    preprocess="",  # integer features as stored
    builder=builder,
  )


# For the data registry (`lfpe.data.builders`): `layout_screens/full` and `/small`.
SPECS = tuple(_spec(c) for c in LayoutScreens.BUILDER_CONFIGS)
