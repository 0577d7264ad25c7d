"""A trained run tested at other image sizes, under each policy of its arm, without fine-tuning.

The test images are drawn natively at each size (`redgreen.generate`: the squares and their
grid scale with the image, `size // 8` pixels, so the scene is the same at every size and
only its resolution changes; at 32 px it is the trainer's own test split). The model is the
run's, rebuilt with the policy's encoding options (same parameters) and applied to the whole
test split; the ViT's grid follows the input, so a 64 px image is a 16x16 grid.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from lfpe import encodings
from lfpe.data import redgreen
from lfpe.train import trainer


@functools.cache
def test_split(task: str, size: int) -> tuple[np.ndarray, np.ndarray]:
  """Images `[N, size, size, 3]` in [0, 1] and labels of `task`'s test split at `size` px."""
  side = size // 8
  config = redgreen.RedGreenConfig(
    name=f"{task}_{size}px", task=task, image_size=size, square_size=side, stride=side
  )
  arrays = redgreen.generate(config, "test")
  return arrays["image"].astype(np.float32) / 255.0, arrays["label"]


def accuracy(model, variables, images: np.ndarray, labels: np.ndarray, chunk: int = 250) -> float:
  """Top-1 accuracy of `model` on `images`, in chunks of `chunk` (one compilation per size)."""
  apply = jax.jit(lambda v, x: model.apply(v, x, train=False).argmax(-1))
  hits = sum(
    int(np.sum(np.asarray(apply(variables, images[i : i + chunk])) == labels[i : i + chunk]))
    for i in range(0, len(images), chunk)
  )
  return hits / len(images)


def at_sizes(config, workdir: str, task: str, policies: dict, sizes) -> dict:
  """`{policy: {size: accuracy}}` of the run in `workdir` (trained from `config`)."""
  prog, variables = trainer.restore(config, workdir)
  scores = {}
  for policy, options in policies.items():
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.model.posemb = encodings.with_options(config.model.posemb, **options)
    model = prog.task.create_model(variant)
    scores[policy] = {
      str(size): accuracy(model, variables, *test_split(task, size)) for size in sizes
    }
  return scores
