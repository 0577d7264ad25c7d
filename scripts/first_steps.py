"""The full-scale configs' first train steps, at their real model size, on real-format data.

  python scripts/first_steps.py [--configs vit_b16_imagenet,detr_coco,reformer_imagenet64]
      [--steps 2] [--batch 2] [--out /tmp/first_steps]

For each config, a stand-in for its catalog dataset is written where the config reads it
(`data_dir` under `--out`), in the format TFDS's own builder writes (array_record; same
name, version and the features lfpe reads): imagenet2012 as JPEGs of ImageNet's sizes;
coco/2017 built by lfpe's `CocoFolder` from a COCO-format folder (JPEGs up to 640 px,
instances JSONs, one box of zero height as real train2017 has); downsampled_imagenet/64x64
as 64x64 images. The config is then trained unchanged except for its loop (`--steps`,
`--batch`, one device, no workers, the whole eval split) through `lfpe.main`'s own trainer:
the model at its real size, the real ops (crop decoding, DETR's canvas, ...). Prints a
Markdown row per config (variables, wall time from data to summary, last train loss). No
GPU or network needed; on a 2-core CPU the three take several minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import time

import jax
import numpy as np
import PIL.Image
import tensorflow_datasets as tfds

from lfpe.data import base, standins
from lfpe.data.coco import CocoFolder
from lfpe.train import sharding, trainer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _photos(sizes, seed: int) -> list[np.ndarray]:
  return [standins.photo(h, w, seed=seed * 1000 + i) for i, (h, w) in enumerate(sizes)]


def coco_folder(root: str) -> CocoFolder:
  """A COCO-format folder (JPEGs up to 640 px, instances JSONs with COCO's 80 category ids,
  one zero-height box as real train2017 has) and lfpe's builder of coco/2017 from it."""
  sizes = [(480, 640), (640, 427), (427, 640), (512, 512)]
  boxes = [  # COCO's pixel [x, y, w, h]
    [[100, 50, 200, 150], [300, 200, 250, 180]],
    [[50, 60, 200, 300], [100, 320, 120, 0]],  # zero height
    [[0, 0, 640, 427]],
    [[80, 80, 120, 300], [300, 40, 180, 160]],
  ]
  categories = [{"id": i + 1 + i // 10, "name": f"c{i}"} for i in range(80)]  # gaps, as COCO
  for split in ("train2017", "val2017"):
    os.makedirs(os.path.join(root, split), exist_ok=True)
    images, annotations = [], []
    for i, (photo, image_boxes) in enumerate(zip(_photos(sizes, 1), boxes, strict=True)):
      name = f"{i + 1:012d}.jpg"
      PIL.Image.fromarray(photo).save(os.path.join(root, split, name), quality=90)
      images.append(
        {"id": i + 1, "file_name": name, "height": photo.shape[0], "width": photo.shape[1]}
      )
      for box in image_boxes:
        annotations.append(
          dict(
            id=len(annotations) + 1,
            image_id=i + 1,
            category_id=categories[7 * len(annotations) % 80]["id"],
            bbox=box,
            area=box[2] * box[3],
            iscrowd=0,
          )
        )
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    with open(os.path.join(root, "annotations", f"instances_{split}.json"), "w") as f:
      json.dump({"images": images, "annotations": annotations, "categories": categories}, f)
  return CocoFolder


class DownsampledImagenet64(base.ArrayBuilder, skip_registration=True):
  """downsampled_imagenet/64x64's one feature: 64x64 images."""

  name = "downsampled_imagenet"
  VERSION = tfds.core.Version("2.0.0")
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="64x64")]

  def _features(self):
    return {"image": tfds.features.Image(shape=(64, 64, 3))}

  def _load_arrays(self):
    split = {"image": _photos([(64, 64)] * 8, 2)}
    return {"train": split, "validation": split}


DATASETS = ("vit_b16_imagenet", "detr_coco", "reformer_imagenet64")


def config_of(name: str, data_dir: str, steps: int, batch: int):
  """The config file's full-scale config with only its loop shrunk to `steps` of `batch`."""
  path = os.path.join(ROOT, "configs", f"{name}.py")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config("")
  with config.unlocked():
    config.update(total_steps=steps, batch_size=batch, eval_batch_size=batch)
    config.update(log_every=1, eval_every=steps, checkpoint_every=steps)
    config.mesh.data = 1
    config.data.update(data_dir=data_dir, worker_count=0)
    if config.data.eval_split:  # the stand-in's whole split, not a slice of the real one
      config.data.eval_split = config.data.eval_split.split("[")[0]
    config.progress = False
  return config


def first_steps(name: str, out: str, steps: int, batch: int) -> dict:
  """Builds `name`'s dataset stand-in under `out`, trains `steps` steps; timings and size."""
  data_dir = os.path.join(out, "tfds")
  if name == "vit_b16_imagenet":
    standins.Imagenet2012(data_dir=data_dir).download_and_prepare()
  elif name == "detr_coco":
    root = os.path.join(out, "coco_folder")
    coco_folder(root)(root=root, data_dir=data_dir).download_and_prepare()
  else:
    DownsampledImagenet64(data_dir=data_dir, config="64x64").download_and_prepare()
  config = config_of(name, data_dir, steps, batch)
  workdir = os.path.join(out, name)
  start = time.perf_counter()
  summary = trainer.train_and_evaluate(config, workdir, devices=jax.devices()[:1])
  total = time.perf_counter() - start
  _, variables = trainer.restore(config, workdir, devices=jax.devices()[:1])
  count = sum(math.prod(x.shape) for x in jax.tree.leaves(sharding.unbox(variables)))
  return dict(name=name, params=count, seconds=total, summary=summary)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--configs", default=",".join(DATASETS))
  parser.add_argument("--steps", type=int, default=2)
  parser.add_argument("--batch", type=int, default=2)
  parser.add_argument("--out", default="/tmp/first_steps")
  args = parser.parse_args()
  print("| config | variables | steps x batch | wall time (s), data to summary | last train loss |")
  print("|---|---|---|---|---|")
  for name in args.configs.split(","):
    r = first_steps(name, args.out, args.steps, args.batch)
    loss = r["summary"]["train"].get("loss", float("nan"))
    print(
      f"| `{name}` | {r['params'] / 1e6:.1f} M | {args.steps} x {args.batch} "
      f"| {r['seconds']:.0f} | {loss:.3f} |",
      flush=True,
    )


if __name__ == "__main__":
  main()
