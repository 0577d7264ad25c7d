"""One configuration of a red-green study: its data, its ViT, all its seeds trained at once.

A `Config` names a red-green task, a position encoding and any other ViT fields (depth,
injection, hooks, ...). `run` builds the study's ViT for it, initialises every seed,
trains them together with `multiseed.train` and scores them on the test split (accuracy,
or R^2 for `distance`). Parameters before and after training stay in memory for probes,
similarity maps and transfers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lfpe import encodings
from lfpe.data import redgreen
from lfpe.models import vit
from lfpe.studies import multiseed as ms

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
  history: dict[str, Any]
  init_params: Any
  params: Any
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
      "loss": np.asarray(self.history["loss"])[:, :].mean(1).tolist(),
    }


def kind(task: str) -> str:
  """`mse` for the regression task `distance`, else `xent`."""
  return "mse" if task == "distance" else "xent"


@functools.cache
def splits(task: str, data_dir: str) -> dict[str, ms.Data]:
  """Train / validation / test `Data` of a red-green task (built once under `data_dir`)."""
  arrays = {s: redgreen.load(task, s, data_dir) for s in redgreen.SPLITS}
  stats = ms.target_stats(arrays["train"]) if kind(task) == "mse" else None
  return {s: ms.Data.from_arrays(a, kind(task), stats) for s, a in arrays.items()}


def build_model(config: Config, base: Mapping[str, Any] = BASE_MODEL) -> vit.ViT:
  """The study's ViT for `config` (2 outputs for `distance`)."""
  outputs = redgreen.NUM_CLASSES[config.task] or 2
  return vit.Model(outputs, image_size=32, **config.model_config(base))


def run(
  config: Config,
  seeds: Sequence[int],
  spec: ms.TrainSpec,
  data_dir: str,
  *,
  base: Mapping[str, Any] = BASE_MODEL,
  init: Callable[[Any], Any] | None = None,
  trainable: Callable[[tuple[str, ...]], bool] | None = None,
  strategy: str = "vmap",
) -> Result:
  """Trains `config` for all `seeds` and scores it on the test split.

  Args:
    init: maps the fresh parameters `[S, ...]` to the starting ones (e.g. a transplant of
      pretrained position parameters, or a trained model whose encoding is replaced).
    trainable: which parameter paths train (all by default).
  """
  data = splits(config.task, data_dir)
  train = data["train"] if config.train_size is None else data["train"].take(config.train_size)
  model = build_model(config, base)
  params = ms.init_params(model, seeds, train.images.shape[1:])
  params = init(params) if init is not None else params
  spec = dataclasses.replace(spec, loss=kind(config.task))
  final, history = ms.train(
    model,
    params,
    train,
    spec,
    seeds,
    trainable=trainable,
    validation=data["validation"],
    strategy=strategy,
  )
  test = ms.evaluate(model, final, data["test"], spec.loss)
  return Result(
    config, list(seeds), test, history["validation"][-1][1], history, params, final, model
  )
