"""lfpe.models: the model families of the papers' experiments.

`MODELS[config.model_name](num_classes, **config.model)` is the one hop from a config to a
model (each family decodes its variant strings and checks its fields once).
"""

import inspect

from lfpe.models import detr, layout, reformer, vit
from lfpe.models.detr import DETR
from lfpe.models.vit import VARIANTS, ViT, decode_variant

MODELS = {"vit": vit.Model, "detr": detr.Model, "reformer": reformer.Model, "layout": layout.Model}
# The task (lfpe.tasks) that trains each family: the one list of which family serves which task.
TASKS = {
  "vit": "classification",
  "detr": "detection",
  "reformer": "generation",
  "layout": "captioning",
}


def config_fields(model_name: str) -> tuple[str, ...]:
  """Every key `config.model` may hold for the family `model_name`: its `Model`'s own
  keywords (`variant`, ...) and its module's fields (a field left at its default is
  absent from a config file, yet a command line may set it)."""
  model = MODELS[model_name]
  own = [p.name for p in inspect.signature(model).parameters.values() if p.kind == p.KEYWORD_ONLY]
  module = inspect.getmodule(model)
  return tuple(dict.fromkeys([*own, *module.FIELDS]))


__all__ = [
  "DETR",
  "MODELS",
  "TASKS",
  "VARIANTS",
  "ViT",
  "config_fields",
  "decode_variant",
  "detr",
  "layout",
  "reformer",
  "vit",
]
