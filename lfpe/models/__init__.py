"""lfpe.models: the model families of the papers' experiments.

`MODELS[config.model_name](num_classes, **config.model)` is the one hop from a config to a
model (each family decodes its variant strings and checks its fields once).
"""

from lfpe.models import vit
from lfpe.models.vit import VARIANTS, ViT, decode_variant

MODELS = {"vit": vit.Model}

__all__ = ["MODELS", "VARIANTS", "ViT", "decode_variant", "vit"]
