"""lfpe.models: the model families of the papers' experiments."""

from lfpe.models.vit import VARIANTS, ViT, create_model, decode_variant, validate_model_config

__all__ = ["VARIANTS", "ViT", "create_model", "decode_variant", "validate_model_config"]
