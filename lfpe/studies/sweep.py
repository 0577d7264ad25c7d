"""One configuration of a red-green study, all its seeds trained by the one trainer at once.

A `Config` names a red-green task, a position encoding and any other ViT fields (depth,
injection, hooks, ...). `trainer_config` turns it, a `TrainSpec` and a seed count into the
trainer's config: the study's ViT, `red_green/TASK` from memory, AdamW with warmup and cosine
decay, `config.seeds` (every seed in one vmapped program, each with its own initialisation
and data order), the validation split as the eval and the test split as the named
evaluation `test`. `run` trains it in a workdir (resuming there), then reads back per-seed
scores, the parameters before and after training (for probes, similarity maps, transfers)
and the loss per epoch. Starting from another run (pretrained positions, a trained body) and
training some parameters only are the trainer's own `init_from`, `init_skip` and
`optim.trainable`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import ml_collections
import numpy as np

from lfpe import encodings
from lfpe.data import default_config, redgreen
from lfpe.models import vit
from lfpe.train import trainer
from lfpe.train.config_lib import base_config

# The 1-block ViT of 003 Sec. 4.1 at this scale: width 32, 2 heads, MLP 128, 4x4 patches of
# 32x32 images (an 8x8 grid), global average pooling (see experiments/position_study), and a
# classifier drawn from N(0, 0.2²) instead of zeros.
BASE_MODEL = {"variant": "mu/4", "pool": "gap", "head_init_std": 0.2}
# The study's initial scales of the parameters that set the size of a learned position
# signal, so that it is not lost next to a square's patch embedding (norm ~3): at lfpe's
# defaults `embed_1d`, `fourier` and `gabor_edge` vary by ~0.1 across positions and left
# seeds at chance on `direction` (experiments/position_study/README.md, "Initialisation").
# Each encoding receives the options it takes: learned tables (`embed_1d`, `embed_2d`,
# `rel_bias_2d`) `init_std`, the Fourier-family MLP output layer `out_init_std`, the Gabor
# and edge weights `w_std`.
POSITION_INIT = {"init_std": 0.2, "out_init_std": 1.0, "w_std": 0.2}
# Parameter paths (`init_skip`, `optim.trainable`) of the position encodings and the rest.
POSITIONS = r"^params/Transformer/pos(_\d+)?/"
NOT_POSITIONS = r"^(?!params/Transformer/pos(_\d+)?/)"


@dataclasses.dataclass(frozen=True)
class TrainSpec:
  """How long and how to train every seed (AdamW, linear warmup, cosine decay to 0)."""

  epochs: int = 30
  batch_size: int = 100
  lr: float = 1e-3
  weight_decay: float = 1e-4
  warmup_epochs: int = 2

  def __post_init__(self):
    if self.epochs < 1 or self.batch_size < 1:
      raise ValueError("TrainSpec: epochs and batch_size must be positive.")


@dataclasses.dataclass(frozen=True)
class Config:
  """One study configuration; `model` holds ViT fields beyond `BASE_MODEL`.

  `position_init` are the initial-scale options given to the encoding (those it takes);
  pass `{}` for lfpe's defaults.
  """

  task: str
  posemb: str
  model: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  train_size: int | None = None
  position_init: Mapping[str, float] = dataclasses.field(default_factory=lambda: POSITION_INIT)

  def model_config(self, base: Mapping[str, Any] = BASE_MODEL) -> dict[str, Any]:
    name, options = encodings.parse(self.posemb)
    posemb = encodings.spec(name, **{**self.position_init, **options})
    return {**base, "posemb": posemb, **self.model}


@dataclasses.dataclass
class Result:
  """Per-seed scores and parameters of one trained configuration."""

  config: Config
  seeds: list[int]
  test: np.ndarray  # [S] accuracy or R^2
  validation: np.ndarray  # [S]
  history: dict[str, Any]  # "loss": mean over seeds at each epoch's end; "seconds": the
  # wall time of the invocation that finished training (a resumed run: its last part)
  init_params: Any  # [S, ...]
  params: Any  # [S, ...]
  model: vit.ViT

  def summary(self) -> dict[str, Any]:
    """JSON-able scores, timing and the configuration."""
    return {
      "task": self.config.task,
      "posemb": self.config.posemb,
      "model": dict(self.config.model),
      "train_size": self.config.train_size,
      "seeds": self.seeds,
      "test": self.test.tolist(),
      "validation": self.validation.tolist(),
      "seconds": self.history["seconds"],
      "loss": self.history["loss"],
    }


def kind(task: str) -> str:
  """`mse` for the regression task `distance`, else `xent`."""
  return "mse" if task == "distance" else "xent"


def metric(task: str) -> str:
  """The score of `task`: R² for `distance`, else accuracy."""
  return "r2" if kind(task) == "mse" else "accuracy"


@functools.cache
def target_stats(data_dir: str) -> tuple[list[float], list[float]]:
  """Mean and std of the `distance` targets over its whole training split (standardised
  targets leave R² unchanged and keep the loss at the learning rate's scale)."""
  distance = redgreen.load("distance", "train", data_dir)["distance"]
  return distance.mean(0).tolist(), distance.std(0).tolist()


def steps_per_epoch(config: Config, spec: TrainSpec) -> int:
  size = config.train_size or redgreen.RedGreenConfig(name="default").num_train
  return max(size // spec.batch_size, 1)


def trainer_config(
  config: Config,
  spec: TrainSpec,
  seeds: Sequence[int],
  data_dir: str,
  *,
  base: Mapping[str, Any] = BASE_MODEL,
  init_from: str = "",
  init_skip: Sequence[str] = (),
  trainable: Sequence[str] = (),
) -> ml_collections.ConfigDict:
  """The trainer's config of `config`: seeds `seeds` (consecutive) as one vmapped program."""
  seeds = list(seeds)
  if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
    raise ValueError(f"trainer_config: seeds must be consecutive, got {seeds}.")
  per_epoch = steps_per_epoch(config, spec)
  out = base_config()
  out.update(seed=seeds[0], seeds=len(seeds), batch_size=spec.batch_size, progress=False)
  # eval batch 200: divides the 1,000 validation and test images and an 8-way data axis
  out.update(total_steps=spec.epochs * per_epoch, log_every=per_epoch, eval_batch_size=200)
  out.update(eval_every=out.total_steps, checkpoint_every=per_epoch, keep_checkpoints=1)
  out.update(init_from=init_from, init_skip=tuple(init_skip))
  out.data = default_config(f"red_green/{config.task}")
  out.data.update(data_dir=data_dir, cache=True, eval_split="validation")
  if config.train_size:
    out.data.train_split = f"train[:{config.train_size}]"
  out.evals = {"test": {"data": {"eval_split": "test"}}}
  if kind(config.task) == "mse":
    mean, std = target_stats(data_dir)
    out.task = dict(name="regression", target="distance", num_outputs=2)
    out.task.update(target_mean=tuple(mean), target_std=tuple(std))
  out.model_name = "vit"
  out.model = config.model_config(base)
  out.optim.update(lr=spec.lr, weight_decay=spec.weight_decay, grad_clip_norm=0.0)
  out.optim.trainable = tuple(trainable)
  out.schedule.warmup_steps = min(spec.warmup_epochs, spec.epochs - 1) * per_epoch
  return out


def run(
  config: Config,
  seeds: Sequence[int],
  spec: TrainSpec,
  data_dir: str,
  workdir: str,
  **options: Any,
) -> Result:
  """Trains `config` for all `seeds` in `workdir` (resuming what it holds) and scores them.

  `options` are `trainer_config`'s (`base`, `init_from`, `init_skip`, `trainable`).
  """
  settings = trainer_config(config, spec, seeds, data_dir, **options)
  summary = trainer.train_and_evaluate(settings, workdir)
  prog, variables = trainer.restore(settings, workdir)
  initial = prog.init_state()  # the same start as training's (init_from included)
  name = metric(config.task)
  return Result(
    config,
    list(seeds),
    np.asarray(summary["eval/test"]["seeds"][name]),
    np.asarray(summary["eval"]["seeds"][name]),
    {"loss": _epoch_losses(workdir), "seconds": summary.get("wall_s", 0.0)},
    jax.device_get(initial.params),
    jax.device_get(variables["params"]),
    prog.model,
  )


def _epoch_losses(workdir: str) -> list[float]:
  """The training loss (mean over seeds) logged at the end of each epoch."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    lines = [json.loads(line) for line in f]
  return [line["loss"] for line in lines if line["split"] == "train"]
