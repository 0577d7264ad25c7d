"""A fake widget_caption download (RICO trees, Li et al.'s captions) and a split reader.

`write_manual` writes the layout the builder's manual download has: widget_captions.csv,
split/*.txt and combined/<id>.json, for four screens whose expected encodings the tests
spell out.
"""

import csv
import json
import os

import numpy as np
import tensorflow_datasets as tfds

VIEW = ["android.view.View", "java.lang.Object"]
GROUP = ["android.view.ViewGroup", *VIEW]


def node(cls, bounds, ancestors=VIEW, children=None, **attrs):
  """One view of a RICO tree, visible, as the combined/<id>.json files hold it."""
  fields = {"class": cls, "ancestors": ancestors, "bounds": bounds, "clickable": False, **attrs}
  fields.update({"visibility": "visible", "visible-to-user": True})
  return fields if children is None else {**fields, "children": children}


def screen(*children):
  """A screen's JSON: its views under the DecorView root of a 1440x2560 phone."""
  decor = "com.android.internal.policy.PhoneWindow$DecorView"
  root = node(decor, [0, 0, 1440, 2560], ["android.widget.FrameLayout", *GROUP], list(children))
  return {"activity_name": "com.app/.Main", "activity": {"root": root}}


SCREENS = {
  "101": screen(  # train
    node(
      "android.widget.LinearLayout",
      [0, 84, 1440, 252],
      GROUP,
      [
        node("android.widget.ImageButton", [0, 84, 168, 252], **{"resource-id": "a:id/backButton"}),
        node("android.widget.TextView", [200, 120, 700, 220], text="Settings!"),
      ],
    ),
    None,  # a null child keeps its index: the next one is 0.2
    node(
      "android.support.v7.widget.AppCompatImageView",
      [1180, 2300, 1500, 2600],  # beyond the screen: clipped
      ["android.widget.ImageView", *VIEW],
      **{"content-desc": ["", "Profile photo"]},
    ),
  ),
  "102": screen(  # train
    node(
      "android.widget.Switch",
      [1180, 400, 1400, 500],
      text="",
      **{"resource-id": "a:id/wifi_switch"},
    ),
    node("android.widget.CheckBox", [60, 600, 700, 700], **{"content-desc": "Remember me"}),
    node(
      "com.foo.CustomWidget",
      [0, 800, 1440, 900],
      ["com.foo.Base", "java.lang.Object"],
      text="Hello",
    ),
  ),
  "103": screen(node("android.widget.Button", [100, 2000, 700, 2200], text="Send")),  # dev
  "104": screen(  # test
    node(
      "android.support.design.widget.FloatingActionButton",
      [1180, 2200, 1400, 2400],
      ["android.widget.ImageButton", "android.widget.ImageView", *VIEW],
    ),
    node("android.widget.ImageButton", [0, 84, 168, 252]),
  ),
}
LONG = "tap here to open the profile of the user in a new window"  # 13 words
CAPTIONS = [
  ("101", "0.0.0", "Go back|Navigate to the previous page.|Back!"),
  ("101", "0.2", "open profile|Profile picture|" + LONG),
  ("102", "0.0", "turn on wifi"),
  ("102", "0.9", "ghost"),  # no such node
  ("102", "0.1", "!!!"),  # no word
  ("103", "0.0", "send message|Back"),
  ("104", "0.0", "add new item|add item"),
  ("104", "0.1", "go back|previous"),
  ("105", "0.0", "no json"),  # test screen without combined/105.json
]  # fmt: skip
# round(99 * (y1 / 2560, x1 / 1440, y2 / 2560, x2 / 1440)) of screen 101's nodes, clipped first
BOXES_101 = [[0, 0, 99, 99], [3, 0, 10, 99], [3, 0, 10, 12], [5, 14, 9, 48], [89, 81, 99, 99]]
SPLITS = {"train": ["101", "102"], "dev": ["103"], "test": ["104", "105"]}


def write_manual(root):
  """The download layout: widget_captions.csv, split/*.txt, combined/<id>.json."""
  os.makedirs(os.path.join(root, "split"))
  os.makedirs(os.path.join(root, "combined"))
  with open(os.path.join(root, "widget_captions.csv"), "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["screenId", "nodeId", "captions"])
    writer.writerows(CAPTIONS)
  for name, ids in SPLITS.items():
    with open(os.path.join(root, "split", f"{name}.txt"), "w") as f:
      f.write("\n".join(ids) + "\n")
  for screen_id, tree in SCREENS.items():
    with open(os.path.join(root, "combined", f"{screen_id}.json"), "w") as f:
      json.dump(tree, f)


def read_split(data_dir, split, name="widget_caption/full"):
  """A built split's examples, stacked per feature, by (screen, target)."""
  source = tfds.data_source(name, split=split, data_dir=data_dir)
  rows = sorted(
    (source[i] for i in range(len(source))), key=lambda r: (r["screen_id"], r["target"])
  )
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}
