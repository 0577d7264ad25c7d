"""A picture of predicted boxes on test images, beside the ground truth.

`run.py` draws `predictions.png`: one row per protocol, the first test scenes at the
protocol's largest test size, with Learnable-Fourier+MLP's n highest-scoring boxes (the
lowest seed whose checkpoints are kept, named in the row's title; a protocol with none is
left out), n the number of true objects (score: DETR's, the best class probability with
no-object excluded), labelled with class and score; ground-truth boxes are dashed. Top-n
rather than a score threshold, so that a weak model's guesses are shown too.
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


def predictions(config, workdir: str, count: int) -> list[dict]:
  """Image, ground truth (xyxy pixels) and scored predictions (xyxy pixels) of the first
  `count` test scenes at the largest test size of `config`, by the run in `workdir`.

  The scenes go through the evaluation pipeline's own ops (`resolve(config.data).ops`:
  targets, the size, preprocessing, padding), then one forward pass.
  """
  size = max(config.data.detection.test_sizes)
  prog, variables = trainer.restore(config, workdir)
  data = data_config.resolve(config.data)
  source = builders.data_source(config.data.name, "test", config.data.data_dir)
  examples = [
    ops.apply(data.ops(train=False), {**source[i], "size": np.int32(size)}) for i in range(count)
  ]
  batch = {k: np.stack([e[k] for e in examples]) for k in ("image", "mask", "image_size")}
  result = prog.model.apply(variables, batch["image"], batch["mask"], train=False)
  scores, labels, boxes = postprocess(
    result["logits"][-1], result["boxes"][-1], batch["image_size"]
  )
  return [
    {
      "image": e["image"][:size, :size],
      "true_boxes": np.asarray(box_cxcywh_to_xyxy(e["boxes"][e["target_valid"]])) * size,
      "scores": np.asarray(scores[i]),
      "labels": np.asarray(labels[i]),
      "boxes": np.asarray(boxes[i]),
    }
    for i, e in enumerate(examples)
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
      keep = np.argsort(-scene["scores"])[: len(scene["true_boxes"])]
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
