"""What the model families share: factories, field checks (one wording), encoder and decoder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe.nn.decoder import Decoder
from lfpe.nn.transformer import Encoder

DTYPES = ("float32", "bfloat16", "float16")  # what a model may compute in


def check_dtype(model: Any) -> None:
  """ValueError naming `model.dtype` unless it is one of DTYPES."""
  if model.dtype not in DTYPES:
    raise ValueError(f"model.dtype={model.dtype!r} is unknown; use one of {DTYPES}.")


def lecun_kernel(axes: tuple[str | None, ...]) -> nn.initializers.Initializer:
  """Flax's default Dense / Conv kernel init (LeCun normal) with logical axis names, so that
  `lfpe.train.sharding` can split it (FSDP); the values are those of the unnamed init."""
  return nn.with_logical_partitioning(nn.initializers.lecun_normal(), axes)


def encoder(model: Any, *, grid_shape: tuple[int, ...], **kwargs: Any) -> Encoder:
  """The transformer encoder of an encoder-decoder family (DETR, the layout captioner) from
  its fields `encoder_depth`, `width`, `num_heads`, `mlp_dim`, dropouts and `dtype`."""
  return Encoder(
    depth=model.encoder_depth,
    width=model.width,
    num_heads=model.num_heads,
    mlp_dim=model.mlp_dim,
    grid_shape=grid_shape,
    dropout=model.dropout,
    attention_dropout=model.attention_dropout,
    dtype=jnp.dtype(model.dtype),
    **kwargs,
  )


def decoder(model: Any, **kwargs: Any) -> Decoder:
  """The decoder of an encoder-decoder family from its `decoder_depth`, ... (as `encoder`)."""
  return Decoder(
    depth=model.decoder_depth,
    num_heads=model.num_heads,
    mlp_dim=model.mlp_dim,
    dropout=model.dropout,
    attention_dropout=model.attention_dropout,
    dtype=jnp.dtype(model.dtype),
    **kwargs,
  )


def positive_int(value) -> bool:
  """A positive int that is not a bool."""
  return isinstance(value, int) and not isinstance(value, bool) and value > 0


def variant_fields(
  family: str,
  variant: Any,
  variants: Mapping[str, Mapping[str, Any]],
  kwargs: Mapping[str, Any],
  fields: Sequence[str],
  shown: Sequence[str],
) -> dict[str, Any]:
  """The fields of `variant` updated by `kwargs` (`config.model` less the variant).

  ValueError naming the first key of `kwargs` not in `fields` (the message lists `shown`,
  the keys a config may set), or an unknown `variant`.
  """
  unknown = sorted(set(kwargs) - set(fields))
  if unknown:
    raise ValueError(
      f"model.{unknown[0]} is not a {family} field; valid fields: {', '.join(shown)}."
    )
  if variant is not None and (not isinstance(variant, str) or variant not in variants):
    raise ValueError(f"model.variant={variant!r} is unknown; use one of {tuple(variants)}.")
  return {**variants.get(variant, {}), **kwargs}
