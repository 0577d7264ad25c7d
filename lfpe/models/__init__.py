"""lfpe.models: the model families of the papers' experiments.

`MODELS[config.model_name](num_classes, **config.model)` is the one hop from a config to a
model (each family decodes its variant strings and checks its fields once).
"""

from lfpe.models import detr, layout, reformer, vit
from lfpe.models.detr import DETR
from lfpe.models.vit import VARIANTS, ViT, decode_variant

MODELS = {"vit": vit.Model, "detr": detr.Model, "reformer": reformer.Model, "layout": layout.Model}

__all__ = [
  "DETR",
  "MODELS",
  "VARIANTS",
  "ViT",
  "decode_variant",
  "detr",
  "layout",
  "reformer",
  "vit",
]
