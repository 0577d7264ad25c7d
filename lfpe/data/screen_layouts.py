"""How `layout_screens` places the objects of one screen (see `lfpe.data.screens`).

`screen(rng)` returns the objects of one screen in placing order, each with its type, box
(top, left, bottom, right in [0, 1], y down, on a 9:16 portrait screen), words and the
caption templates filled in for it (empty: not a target). Parts: a top bar, a bottom
navigation bar, lists of aligned rows, cards, a grid of images, a dialog and a floating
action button; `lfpe.data.screens` turns the objects into stored examples.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MAX_OBJECTS = 32
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
ORD = ("first", "second", "third", "fourth", "fifth", "sixth")


@dataclasses.dataclass
class Object:
  kind: str
  box: tuple[float, float, float, float]  # top, left, bottom, right in [0, 1]
  words: str = ""
  refs: tuple[str, ...] = ()  # caption templates filled in; empty: not a target


class Layout:
  """The objects of one screen as they are placed, with the generator that places them."""

  def __init__(self, rng: np.random.Generator):
    self.rng, self.objects = rng, []
    self.margin = rng.uniform(0.02, 0.06)  # left and right, per screen as in real apps

  def add(self, kind, top, left, bottom, right, words="", refs=()):
    self.objects.append(Object(kind, (top, left, bottom, right), words, tuple(refs)))

  def pick(self, choices, n=None):
    index = self.rng.choice(len(choices), n, replace=False)
    return choices[index] if n is None else [choices[i] for i in index]


def _toolbar(lay: Layout) -> float:
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


def _bottom_bar(lay: Layout) -> float:
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


def _list(lay: Layout, top: float, bottom: float, budget: int) -> float:
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


def _card(lay: Layout, top: float, index: int, buttons: int) -> float:
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


def _grid(lay: Layout, top: float, count: int) -> float:
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


def _dialog(lay: Layout, buttons: int) -> None:
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


def screen(rng: np.random.Generator) -> list[Object]:
  """One screen's objects in placing order (containers before what they hold)."""
  lay = Layout(rng)
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
