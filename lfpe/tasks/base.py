"""What the trainer asks of a task: its model, forward pass, loss and evaluation.

The training loop knows nothing model-specific; a task (classification, detection,
generation, ...) supplies it. A task is any object with these methods:

  validate(config) -> None
      raises ValueError naming the bad field of `config.model` (or of the data
      fields the task reads), before anything is built.
  create_model(config) -> nn.Module
      the model of `config.model` for the data of `config.data`.
  example_batch(config) -> dict[str, np.ndarray]
      one example (batch dimension 1) with the keys and dtypes the loader yields;
      the trainer initialises the model from it.
  init_variables(model, rng, batch) -> {'params': ..., other collections}
      `model.init` on such a batch; collections other than 'params' are kept as
      constants (nothing updates them).
  augment_batch(batch, rng) -> batch   (optional)
      a training batch transformed inside the jitted step before `forward` (e.g. Mixup /
      CutMix); `rng` is the step's own.
  forward(model, variables, batch, *, train, rng) -> outputs
      the model applied to a batch (`rng` feeds dropout and other noise when training).
  loss(outputs, batch) -> (loss [], metrics {name: []})
      the scalar training loss (mean over the batch) and per-batch metrics.
  eval_sums(outputs, batch) -> {name: [] or [B, ...]}
      sums over the valid examples of the batch (`batch['mask']` marks padding),
      including 'count'; the trainer adds scalars up over the whole eval split and
      concatenates arrays (per-example outputs, e.g. detections for COCO evaluation).
  finalize(sums) -> {name: float}
      eval metrics from the summed (and concatenated) values.
  HEADLINE: str (class attribute)
      the eval metric a run reports in its last line (e.g. "accuracy"); optional.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import flax.linen as nn
import jax
import numpy as np

from lfpe import models


def model_family(config: Any, task: str) -> Callable[..., nn.Module]:
  """The `Model` factory of `config.model_name`, a family that `task` trains (lfpe.models'
  MODELS and TASKS); ValueError naming `config.model_name` otherwise."""
  families = tuple(f for f, t in models.TASKS.items() if t == task)
  if config.model_name not in families:
    raise ValueError(
      f"config.model_name={config.model_name!r} is not a {task} model; use one of {families}."
    )
  return models.MODELS[config.model_name]


class Task(Protocol):
  """The interface above (structural: tasks need not inherit from it)."""

  def validate(self, config: Any) -> None: ...

  def create_model(self, config: Any) -> nn.Module: ...

  def example_batch(self, config: Any) -> dict[str, np.ndarray]: ...

  def init_variables(
    self, model: nn.Module, rng: jax.Array, batch: dict[str, Any]
  ) -> dict[str, Any]: ...

  def forward(
    self,
    model: nn.Module,
    variables: dict[str, Any],
    batch: dict[str, jax.Array],
    *,
    train: bool,
    rng: jax.Array,
  ) -> Any: ...

  def loss(
    self, outputs: Any, batch: dict[str, jax.Array]
  ) -> tuple[jax.Array, dict[str, jax.Array]]: ...

  def eval_sums(self, outputs: Any, batch: dict[str, jax.Array]) -> dict[str, jax.Array]: ...

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]: ...
