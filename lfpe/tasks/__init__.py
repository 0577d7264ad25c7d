"""Tasks: the model-specific half of training (model, loss, metrics, evaluation).

`get(task_config)` builds the task named `task_config.name` with the remaining
fields as keyword arguments; `register(name, factory)` adds one (DETR-lite,
Reformer-lite, ...). See lfpe/tasks/base.py for the interface.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lfpe.tasks.base import Task
from lfpe.tasks.captioning import Captioning
from lfpe.tasks.classification import Classification
from lfpe.tasks.detection import Detection
from lfpe.tasks.generation import Generation
from lfpe.tasks.regression import Regression

REGISTRY: dict[str, Callable[..., Task]] = {
  "captioning": Captioning,
  "classification": Classification,
  "detection": Detection,
  "generation": Generation,
  "regression": Regression,
}


def register(name: str, factory: Callable[..., Task]) -> None:
  """Makes `factory(**kwargs)` available as task `name`."""
  REGISTRY[name] = factory


def get(task_config: Any) -> Task:
  """The task `task_config.name`, built with the config's other fields."""
  kwargs = dict(task_config)
  name = kwargs.pop("name", None)
  if name not in REGISTRY:
    raise ValueError(f"`task.name`={name!r} is unknown; registered tasks: {sorted(REGISTRY)}.")
  try:
    return REGISTRY[name](**kwargs)
  except TypeError as e:
    raise ValueError(f"`task`: bad options {sorted(kwargs)} for task {name!r}: {e}") from e


__all__ = [
  "REGISTRY",
  "Captioning",
  "Classification",
  "Detection",
  "Generation",
  "Regression",
  "Task",
  "get",
  "register",
]
