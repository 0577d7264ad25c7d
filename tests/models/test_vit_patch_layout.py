"""A ViT's parameters laid out at another patch size or grid than the images are cut at
(FlexiViT): the PI-resized kernel and `posemb_grid`, each against the model holding the
resized parameters."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from vit_fixtures import CLASSES, init_variables, random_images

from lfpe import encodings
from lfpe.encodings.learned import resample_table
from lfpe.models.vit import ViT
from lfpe.nn.patches import resize_patch_kernel


@pytest.mark.parametrize("posemb", ["sine_2d", "rope_mixed", "embed_1d"])
def test_another_patch_size_with_the_trained_kernel_equals_the_resized_model(posemb):
  """`trained_patch_size`: images cut into 2x2 patches by a model trained at 4x4 (its
  parameters as they are: the table stays at the trained 4x4 grid) give the logits of a 2x2
  model holding the PI-resized kernel and the table resampled to 8x8 by its own policy."""
  small = dict(num_classes=CLASSES, image_size=16, width=16, depth=1, num_heads=2, mlp_dim=32)
  trained = ViT(patch_size=4, posemb=posemb, **small)
  variables = init_variables(trained, hw=(16, 16))
  flexible = ViT(patch_size=2, trained_patch_size=4, posemb=posemb, **small)
  init = functools.partial(flexible.init, train=False)
  shapes = nn.meta.unbox(jax.eval_shape(init, jax.random.key(0), random_images((16, 16))))
  assert jax.tree.map(jnp.shape, shapes) == jax.tree.map(jnp.shape, variables)
  params = variables["params"]
  kernel = resize_patch_kernel(params["embedding"]["kernel"], (4, 4), (2, 2))
  resized = {**params, "embedding": {**params["embedding"], "kernel": kernel}}
  if posemb == "embed_1d":
    pos = params["Transformer"]["pos"]
    table = resample_table(
      encodings.create("embed_1d", dim=16, grid_shape=(4, 4)),
      pos["encoding"]["table"],
      (4, 4),
      (8, 8),
    )
    resized["Transformer"] = {**params["Transformer"], "pos": {**pos, "encoding": {"table": table}}}
  images = random_images((16, 16), seed=3)
  np.testing.assert_allclose(
    flexible.apply(variables, images, train=False),
    ViT(patch_size=2, posemb=posemb, **small).apply(
      {**variables, "params": resized}, images, train=False
    ),
    atol=1e-5,
  )


def test_posemb_grid_lays_the_table_out_at_its_own_grid():
  """`posemb_grid`: FlexiViT's layout, a table at a grid no image size / kernel patch gives
  (here 3x3 under 20 px images and a 4x4 kernel cutting 5x5 patches): the table has that grid,
  and the logits equal a model whose table is that table resampled to the 4x4 grid seen."""
  small = dict(num_classes=CLASSES, image_size=20, width=16, depth=1, num_heads=2, mlp_dim=32)
  flexible = ViT(patch_size=5, trained_patch_size=4, posemb_grid=3, posemb="embed_1d", **small)
  variables = init_variables(flexible, hw=(20, 20))
  params = variables["params"]
  pos = params["Transformer"]["pos"]
  assert pos["encoding"]["table"].shape == (9, 16)
  table = resample_table(
    encodings.create("embed_1d", dim=16, grid_shape=(3, 3)),
    pos["encoding"]["table"],
    (3, 3),
    (4, 4),
  )
  kernel = resize_patch_kernel(params["embedding"]["kernel"], (4, 4), (5, 5))
  resized = {
    **params,
    "embedding": {**params["embedding"], "kernel": kernel},
    "Transformer": {**params["Transformer"], "pos": {**pos, "encoding": {"table": table}}},
  }
  images = random_images((20, 20), seed=3)
  np.testing.assert_allclose(
    flexible.apply(variables, images, train=False),
    ViT(patch_size=5, posemb="embed_1d", **small).apply(
      {**variables, "params": resized}, images, train=False
    ),
    atol=1e-5,
  )
  with pytest.raises(ValueError, match=r"^model\.posemb_grid must be a positive int"):
    ViT(patch_size=5, posemb_grid=(3, 0), **small).check()
  with pytest.raises(ValueError, match=r"^model\.trained_patch_size must be a positive int"):
    ViT(patch_size=5, trained_patch_size=0, posemb_grid=3, **small).check()
