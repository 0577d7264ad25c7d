"""lfpe.models: the model families of the papers' experiments.

`MODELS[config.model_name](num_classes, **config.model)` is the one hop from a config to a
model (each family decodes its variant strings and checks its fields once).
"""

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

__all__ = [
  "DETR",
  "MODELS",
  "TASKS",
  "VARIANTS",
  "ViT",
  "decode_variant",
  "detr",
  "layout",
  "reformer",
  "vit",
]
