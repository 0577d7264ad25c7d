"""Autoregressive image generation: next-sub-pixel cross-entropy, bits per dim.

Batches hold `image [B, H, W, C]` uint8 (`photo_crops`, `digit_images`; no preprocessing);
eval batches also `mask [B]` marking real examples. Images are read in raster order with the
channels of a pixel as consecutive tokens (002 Sec. 4.1: 64 x 64 x 3 = 12,288 tokens,
vocabulary 256). The vocabulary V is the dataset spec's `num_classes` (256 sub-pixel values
for photographs, 8 grey levels for `digit_images`). The model (`config.model_name=
'reformer'`) maps the tokens `[B, H*W*C]` to logits `[B, H*W*C, V]`, the logit at t
predicting token t from the tokens before it.

Training loss: mean cross-entropy per sub-pixel (nats). Evaluation: bits per dim over the
held-out split, `sum(bits) / (count * H*W*C)`, exact over the split (padding rows of
the last batch are masked out). LSH hashing is random: training draws it from the step's
key, evaluation from a fixed key (`EVAL_KEY`), so an evaluation is repeatable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe.data import get_spec
from lfpe.tasks.base import model_family

EVAL_KEY = 0  # seed of the hashing key used when evaluating


def image_tokens(images: jax.Array) -> jax.Array:
  """`[B, H, W, C]` uint8 -> `[B, H*W*C]` int32 tokens: raster order, channels consecutive."""
  return images.reshape(images.shape[0], -1).astype(jnp.int32)


def token_bits(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """Negative log-likelihood in bits `[...]` of integer `targets` under `logits [..., V]`.

  Computed in base 2 (`log2 sum 2^(z / ln 2)` with `z` the max-shifted logits) so that
  uniform logits give exactly `log2 V` (8.0 for 256 values) in float32.
  """
  z = logits.astype(jnp.float32)
  z = (z - jax.lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))) * (1 / math.log(2.0))
  log2_norm = jnp.log2(jnp.sum(jnp.exp2(z), axis=-1))
  return log2_norm - jnp.take_along_axis(z, targets[..., None], axis=-1)[..., 0]


def bits_per_dim(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """Mean negative log-likelihood per sub-pixel in bits (`logits [..., V]`, `targets [...]`
  int); uniform logits give exactly log2 V (8.0 for 256 values)."""
  return jnp.mean(token_bits(logits, targets))


@dataclasses.dataclass(frozen=True)
class Generation:
  """The generation task (see lfpe/tasks/base.py for the interface); no options yet."""

  HEADLINE: ClassVar[str] = "bits_per_dim"

  def image_shape(self, config: Any) -> tuple[int, int, int]:
    """`(H, W, C)` of `config.data` (a dataset of fixed-size images)."""
    spec = get_spec(config.data.name)
    if spec.image_shape is None:
      raise ValueError(
        f"config.data.name={spec.name!r}: generation needs images of one size; "
        "use a dataset such as 'photo_crops/8x8'."
      )
    return tuple(spec.image_shape)

  def validate(self, config: Any) -> None:
    model_family(config, "generation")
    if config.data.get("image_size") is not None:
      raise ValueError(
        "config.data.image_size must be None for generation: the model predicts the "
        "stored pixels (choose the crop size with the dataset, e.g. 'photo_crops/16x16')."
      )

  def create_model(self, config: Any) -> nn.Module:
    """`Model(image_shape=..., vocab=..., **config.model)` (the dataset's image shape and
    number of token values), computing in config.compute_dtype."""
    vocab = get_spec(config.data.name).num_classes
    model_config = {"vocab": vocab, **config.model.to_dict(), "dtype": config.compute_dtype}
    return model_family(config, "generation")(image_shape=self.image_shape(config), **model_config)

  def example_batch(self, config: Any) -> dict[str, np.ndarray]:
    return {"image": np.zeros((1, *self.image_shape(config)), np.uint8)}

  def init_variables(self, model: nn.Module, rng: jax.Array, batch: dict[str, Any]) -> Any:
    rngs = {"params": rng, "lsh": rng, "dropout": rng}
    return model.init(rngs, image_tokens(batch["image"]), train=False)

  def forward(self, model, variables, batch, *, train: bool, rng: jax.Array | None) -> jax.Array:
    if rng is None:
      rng = jax.random.key(EVAL_KEY)
    rngs = {"lsh": rng, "dropout": rng} if train else {"lsh": rng}
    return model.apply(variables, image_tokens(batch["image"]), train=train, rngs=rngs)

  def loss(self, outputs, batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    bits = bits_per_dim(outputs, image_tokens(batch["image"]))
    return bits * math.log(2.0), {"bits_per_dim": bits}

  def eval_sums(self, outputs, batch) -> dict[str, jax.Array]:
    """Summed bits of the real examples, their count and their number of sub-pixels."""
    valid = batch.get("mask", jnp.ones(outputs.shape[:1], jnp.bool_))
    per_example = jnp.sum(token_bits(outputs, image_tokens(batch["image"])), axis=-1)
    return {
      "bits": jnp.sum(jnp.where(valid, per_example, 0.0)),
      "count": jnp.sum(valid),
      "dims": jnp.sum(valid) * outputs.shape[1],
    }

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]:
    bits = float(sums["bits"]) / max(float(sums["dims"]), 1.0)
    return {"loss": bits * math.log(2.0), "bits_per_dim": bits, "count": float(sums["count"])}
