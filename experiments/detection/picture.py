"""A picture of predicted boxes on test images, beside the ground truth.

`run.py` draws `predictions.png`: one row per protocol, the first test scenes at the
protocol's largest test size, with Learnable-Fourier+MLP seed 0's n highest-scoring boxes,
n the number of true objects (score: DETR's, the best class probability with no-object
excluded), labelled with class and score; ground-truth boxes are dashed. Top-n rather than
a score threshold, so that a weak model's guesses are shown too.
"""

from __future__ import annotations

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lfpe.data import builders, shapes  # noqa: E402
from lfpe.tasks.detection_ops import postprocess  # noqa: E402
from lfpe.train import trainer  # noqa: E402


def predictions(config, workdir: str, count: int) -> list[dict]:
  """Image, ground truth (xyxy pixels) and scored predictions (xyxy pixels) of the first
  `count` test scenes drawn at the largest test size of `config`, by the run in `workdir`."""
  size = max(config.data.detection.test_sizes)
  prog, variables = trainer.restore(config, workdir)
  source = builders.data_source(config.data.name, "test", config.data.data_dir)
  pad = config.data.detection.max_size
  apply = jax.jit(lambda v, img, mask: prog.model.apply(v, img, mask, train=False))
  out = []
  for i in range(count):
    example = source[i]
    image = np.zeros((1, pad, pad, 3), np.float32)
    image[0, :size, :size] = np.asarray(example[f"image_{size}"], np.float32) / 255
    mask = np.ones((1, pad, pad), bool)
    mask[0, :size, :size] = False
    result = apply(variables, image, mask)
    scores, labels, boxes = postprocess(
      result["logits"][-1], result["boxes"][-1], np.array([[size, size]])
    )
    ymin, xmin, ymax, xmax = np.asarray(example["objects"]["bbox"]).T * size
    out.append(
      {
        "image": image[0, :size, :size],
        "true_boxes": np.stack([xmin, ymin, xmax, ymax], -1),
        "scores": np.asarray(scores[0]),
        "labels": np.asarray(labels[0]),
        "boxes": np.asarray(boxes[0]),
      }
    )
  return out


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
