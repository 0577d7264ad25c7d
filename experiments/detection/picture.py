"""A picture of predicted boxes on test images, beside the ground truth.

`run.py` keeps, as it scores each record run of the pictured encoding, that run's
predictions on the first test scenes at the protocol's largest test size (`predict`: the
`BOXES` highest-scoring boxes of each, in its results entry), so that `predictions.png` is
drawn from results.json alone, long after the run's checkpoints are gone: one row per
protocol, Learnable-Fourier+MLP's n highest-scoring boxes (as tuned: its lowest seed with
kept predictions, or, for runs scored before they were kept, with checkpoints; `run.pictured`;
the seed in the row's title), n the number of true objects (score: DETR's, the
best class probability with no-object excluded), labelled with class and score;
ground-truth boxes are dashed. Top-n rather than a score threshold, so that a weak model's
guesses are shown too.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lfpe.data import builders, ops, shapes  # noqa: E402
from lfpe.data import config as data_config  # noqa: E402
from lfpe.tasks.detection_ops import box_cxcywh_to_xyxy, postprocess  # noqa: E402
from lfpe.train import trainer  # noqa: E402

COUNT = 4  # scenes per protocol
BOXES = 10  # predictions kept per scene: at least the scenes' most objects (8)


def _examples(config, count: int) -> tuple[int, list[dict]]:
  """The largest test size of `config` and its first `count` test scenes through the
  evaluation pipeline's own ops (`resolve(config.data).ops`: targets, the size,
  preprocessing, padding)."""
  size = max(config.data.detection.test_sizes)
  data = data_config.resolve(config.data)
  source = builders.data_source(config.data.name, "test", config.data.data_dir)
  ops_ = data.ops(train=False)
  return size, [ops.apply(ops_, {**source[i], "size": np.int32(size)}) for i in range(count)]


def predict(config, workdir: str, count: int = COUNT) -> list[dict]:
  """The run in `workdir`'s `BOXES` best-scoring predictions (xyxy pixels, labels, scores,
  best first) on each of the first `count` test scenes at its largest test size, as JSON
  lists for its results entry: one forward pass."""
  _, examples = _examples(config, count)
  prog, variables = trainer.restore(config, workdir)
  batch = {k: np.stack([e[k] for e in examples]) for k in ("image", "mask", "image_size")}
  result = prog.model.apply(variables, batch["image"], batch["mask"], train=False)
  found = postprocess(result["logits"][-1], result["boxes"][-1], batch["image_size"])
  scores, labels, boxes = (np.asarray(a) for a in found)
  best = np.argsort(-scores, axis=-1, kind="stable")[:, :BOXES]  # [count, BOXES]
  return [
    {"scores": s[b].tolist(), "labels": c[b].tolist(), "boxes": x[b].tolist()}
    for s, c, x, b in zip(scores, labels, boxes, best, strict=True)
  ]


def scenes(config, predicted: list[dict]) -> list[dict]:
  """`predicted` (`predict`'s, for a run of `config`) beside each scene's image and
  ground truth (xyxy pixels), as `draw` takes them; only the data is read again."""
  size, examples = _examples(config, len(predicted))
  return [
    {
      "image": e["image"][:size, :size],
      "true_boxes": np.asarray(box_cxcywh_to_xyxy(e["boxes"][e["target_valid"]])) * size,
      **{k: np.asarray(v) for k, v in p.items()},
    }
    for e, p in zip(examples, predicted, strict=True)
  ]


def draw(scenes: dict[str, list[dict]], path: str) -> None:
  """One row of scenes per key of `scenes` (a protocol), each with its top-n predictions."""
  rows, cols = len(scenes), max(len(v) for v in scenes.values())
  fig, axes = plt.subplots(rows, cols, figsize=(2.4 * cols, 2.5 * rows), squeeze=False)
  for row, (name, row_scenes) in zip(axes, scenes.items(), strict=True):
    for ax, scene in zip(row, row_scenes, strict=False):
      ax.imshow(scene["image"])
      for x0, y0, x1, y1 in scene["true_boxes"]:
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ls="--", ec="w"))
      keep = np.argsort(-scene["scores"], kind="stable")[: len(scene["true_boxes"])]
      for (x0, y0, x1, y1), label, score in zip(
        scene["boxes"][keep], scene["labels"][keep], scene["scores"][keep], strict=True
      ):
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="red"))
        ax.text(x0, y0, f"{shapes.SHAPES[label]} {score:.2f}", color="red", fontsize=6)
      ax.set_title(f"protocol {name}", fontsize=7)
    for ax in row:
      ax.set_axis_off()
  fig.suptitle("red: the n best-scoring predictions (n true objects); dashed: truth", fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=130)
  plt.close(fig)
