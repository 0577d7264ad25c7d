"""predictions.png's run: the lowest seed whose predictions results.json keeps, else one whose
checkpoints remain; drawn from kept predictions alone."""

import types

import numpy as np

from experiments.detection import picture, run


def _record(tmp_path, seeds=3):
  key = lambda seed: f"heldout/fourier/gamma=4/{seed}"
  return {
    key(s): types.SimpleNamespace(key=key(s), workdir=str(tmp_path / str(s)), config=None)
    for s in range(seeds)
  }


def test_the_lowest_seed_with_kept_predictions_is_pictured(tmp_path, monkeypatch):
  monkeypatch.setattr(picture, "predict", lambda *a: ["from checkpoints"])
  record = _record(tmp_path)
  results = {"heldout/fourier/gamma=4/2": {"predictions": ["kept 2"]}}
  find = lambda res: run.pictured(record, res, "heldout/fourier", "fourier", 4.0, 3)
  found, predicted = find(results)
  assert (found.key, predicted) == ("heldout/fourier/gamma=4/2", ["kept 2"])
  results["heldout/fourier/gamma=4/1"] = {"predictions": ["kept 1"]}
  assert find(results)[1] == ["kept 1"]
  (tmp_path / "0" / "checkpoints" / "4000").mkdir(parents=True)  # scored before runs kept them
  assert find(results)[1] == ["from checkpoints"]
  assert find({})[1] == ["from checkpoints"]  # nothing kept: the run with checkpoints
  empty = _record(tmp_path / "none")  # no predictions kept, no checkpoints
  assert run.pictured(empty, {}, "heldout/fourier", "fourier", 4.0, 3) is None


def test_draw_boxes_the_n_best_scoring_predictions_n_the_true_objects(tmp_path, monkeypatch):
  drawn = []
  rectangle = picture.plt.Rectangle
  record = lambda xy, w, h, **kw: (
    drawn.append((xy, w, h, kw.get("ec"))) or rectangle(xy, w, h, **kw)
  )
  monkeypatch.setattr(picture.plt, "Rectangle", record)
  scene = {
    "image": np.zeros((8, 8, 3)),
    "true_boxes": np.array([[1.0, 1.0, 4.0, 4.0]]),  # one object: one prediction drawn
    "scores": np.array([0.2, 0.9]),
    "labels": np.array([0, 1]),
    "boxes": np.array([[2.0, 2.0, 6.0, 6.0], [1.0, 1.0, 5.0, 4.0]]),
  }
  path = tmp_path / "predictions.png"
  picture.draw({"heldout (seed 4)": [scene]}, str(path))
  assert path.stat().st_size > 0
  assert [d for d in drawn if d[3] == "red"] == [((1.0, 1.0), 4.0, 3.0, "red")]  # the 0.9 one
  assert [d for d in drawn if d[3] == "w"] == [((1.0, 1.0), 3.0, 3.0, "w")]  # the truth
