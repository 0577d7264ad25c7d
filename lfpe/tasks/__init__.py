"""Tasks: the model-specific half of training (model, loss, metrics, evaluation).

`get(task_config)` builds the task named `task_config.name` with the remaining
fields as keyword arguments; `register(name, factory)` adds one (DETR-lite,
Reformer-lite, ...). See lfpe/tasks/base.py for the interface. `check_option` and
`check_model_field` say what `config.task` and `config.model` may hold beyond what a config
file sets (the command line's and named evaluations' one check).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from lfpe import models
from lfpe.errors import ConfigError, did_you_mean
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


def options(name: str) -> tuple[str, ...]:
  """The keyword options of task `name` (what `config.task` may hold besides `name`)."""
  params = inspect.signature(REGISTRY[name]).parameters.values()
  return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def check_option(task_config: Any, option: str, where: str) -> None:
  """ConfigError naming `where` unless the task `task_config.name` takes `option`: also one
  the config file leaves at its default (`task.bbox_weight` on a detection config)."""
  name = task_config.get("name")
  known = list(options(name)) if name in REGISTRY else sorted(task_config.keys())
  if option not in known:
    raise ConfigError(
      f"{where}: task {name!r} has no option {option!r}{did_you_mean(option, known)}; "
      f"its options: {', '.join(known)}."
    )


# What every task gives its model from the data and config.compute_dtype, not config.model.
MODEL_FIELDS_FROM_TASK = {
  "num_classes": "config.data",
  "image_size": "config.data.image_size",
  "image_shape": "config.data",
  "dtype": "config.compute_dtype",
}


def check_model_field(config: Any, field: str, where: str) -> None:
  """ConfigError naming `where` unless `config.model` may set `field`: a field of the family's
  model (`lfpe.models.config_fields`), also one the config file leaves at its default, other
  than those the task fills."""
  if field in MODEL_FIELDS_FROM_TASK:
    raise ConfigError(
      f"{where}: the task sets the model's {field} from {MODEL_FIELDS_FROM_TASK[field]}; set that."
    )
  family = config.get("model_name")
  own = models.config_fields(family) if family in models.MODELS else ()
  known = [f for f in own if f not in MODEL_FIELDS_FROM_TASK] or sorted(config.model.keys())
  if field not in known:
    raise ConfigError(
      f"{where}: the {family} model has no field {field!r}{did_you_mean(field, known)}; "
      f"its fields: {', '.join(known)}."
    )


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
