"""What the ViT tests share: a tiny image batch and variables whose zero-initialised parts
(head, class token) are drawn at random, so that they cannot hide a difference."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

IMAGE, CLASSES = 8, 3


def random_images(hw=(IMAGE, IMAGE), seed=0, b=2):
  return jnp.asarray(np.random.default_rng(seed).normal(size=(b, *hw, 3)), jnp.float32)


def init_variables(model, hw=(IMAGE, IMAGE)):
  """Variables with a random head and class token (zero at init, they would hide differences:
  a zero class token has zero queries, so it attends uniformly)."""
  variables = nn.meta.unbox(model.init(jax.random.key(0), random_images(hw), train=False))
  params = variables["params"]  # other collections (e.g. fixed Fourier `constants`) stay
  params["head"]["kernel"] = jax.random.normal(jax.random.key(1), params["head"]["kernel"].shape)
  if "cls" in params:
    params["cls"] = jax.random.normal(jax.random.key(2), params["cls"].shape)
  return variables
