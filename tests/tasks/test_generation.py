"""The generation task: tokens in raster order, bits per dim, exact evaluation sums."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.tasks.generation import Generation, bits_per_dim, image_tokens


def test_uniform_logits_score_exactly_eight_bits_per_dim():
  targets = jax.random.randint(jax.random.key(0), (3, 48), 0, 256)
  assert float(bits_per_dim(jnp.zeros((3, 48, 256)), targets)) == pytest.approx(8.0, abs=1e-6)


def test_bits_per_dim_against_numpy():
  rng = np.random.default_rng(0)
  logits, targets = rng.normal(size=(2, 5, 256)), rng.integers(0, 256, (2, 5))
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  expected = -np.take_along_axis(logp, targets[..., None], -1).mean() / math.log(2)
  got = bits_per_dim(jnp.asarray(logits, jnp.float32), jnp.asarray(targets))
  assert float(got) == pytest.approx(expected, rel=1e-5)


def test_tokens_are_raster_order_with_consecutive_channels():
  image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(1, 2, 3, 3)
  tokens = np.asarray(image_tokens(jnp.asarray(image)))
  y, x, c = 1, 2, 1
  assert tokens[0, (y * 3 + x) * 3 + c] == image[0, y, x, c]
  assert tokens.dtype == np.int32


def test_eval_sums_skip_padding_rows_and_finalize_to_bits_per_dim():
  task = Generation()
  images = np.random.default_rng(1).integers(0, 256, (4, 2, 2, 3)).astype(np.uint8)
  logits = jnp.asarray(np.random.default_rng(2).normal(size=(4, 12, 256)), jnp.float32)
  batch = {"image": jnp.asarray(images), "mask": jnp.asarray([True, True, True, False])}
  metrics = task.finalize(jax.device_get(task.eval_sums(logits, batch)))
  expected = bits_per_dim(logits[:3], image_tokens(jnp.asarray(images[:3])))
  assert metrics["bits_per_dim"] == pytest.approx(float(expected), rel=1e-5)
  assert metrics["count"] == 3


@pytest.mark.parametrize("dataset, vocab", [("photo_crops/8x8", 256), ("digit_images/16x16", 8)])
def test_the_model_predicts_the_datasets_token_values(dataset, vocab):
  from configs import reformer_crops

  config = reformer_crops.get_config("small=1")
  with config.unlocked():
    config.data.name = dataset
  model = Generation().create_model(config)
  assert (model.vocab, model.image_shape[-1]) == (vocab, 1 if vocab == 8 else 3)
