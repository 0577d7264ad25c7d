"""The core install (`pip install lfpe`, no extras) works: encodings, NNX, layers and models.

CI (.ci/run, the "core" leg) runs this in a fresh virtual environment holding lfpe and its
core dependencies only. It fails if an extra's package is installed, if any part of the core
imports one, or if a model does not run; and it checks that the training side says which
extra to install.
"""

import importlib.util
import sys

EXTRA_PACKAGES = (
  "tensorflow_datasets",
  "grain",
  "pycocotools",
  "pycocoevalcap",
  "sklearn",
  "matplotlib",
  "ml_collections",
  "tensorboardX",
  "turbojpeg",
  "cv2",
)


def main() -> None:
  present = [p for p in EXTRA_PACKAGES if importlib.util.find_spec(p) is not None]
  assert not present, f"the core install brought extras' packages: {present}"

  import jax
  import jax.numpy as jnp
  import numpy as np
  from flax import nnx

  from lfpe import encodings, models
  from lfpe import nnx as pe
  from lfpe.extras import MissingExtraError

  # Every encoding, linen and NNX, on a 4x6 grid.
  context = dict(dim=16, grid_shape=(4, 6), num_heads=2, head_dim=8)
  for name in encodings.NAMES:
    pe.build(name, rngs=nnx.Rngs(0), **context)
  pos = pe.LearnableFourierMLP(dim=16, rngs=nnx.Rngs(0))
  assert pos.grid((4, 6)).shape == (24, 16)

  # Changing resolution from a user's own loop (lfpe.resolution is core).
  from lfpe import resolution

  assert resolution.draw_size((8, 16), seed=0, step=3) in (8, 16)
  rope = encodings.create("rope_axial", head_dim=8)
  augmented = resolution.train_coords(rope, (4, 6), jax.random.key(0), **encodings.coords.DINOV3)
  assert augmented.shape == (24, 2)
  rng = np.random.default_rng(0)
  views = resolution.multi_crop(np.ones((24, 24, 3)), rng, ((16, 1, (0.5, 1)),))
  assert resolution.pack(views, (8, 8), max_tokens=4)["shape"].tolist() == [[2, 2]]

  # Each model family: init and a forward pass; ViT training steps with optax, with an
  # absolute encoding, a relative bias and 2-D RoPE in its attention layers (lfpe.nn).
  for posemb in ("fourier", "rel_bias_2d", "rope_mixed"):
    vit_step(models, posemb)

  detr = models.MODELS["detr"](3, variant="tiny", width=32, posemb="sine_2d")
  pixels, mask = jnp.ones((1, 32, 32, 3)), jnp.zeros((1, 32, 32), bool)
  out = detr.apply(
    detr.init(jax.random.key(0), pixels, mask, train=False), pixels, mask, train=False
  )
  assert out["logits"].shape[-1] == 4 and out["boxes"].shape[-1] == 4  # 3 classes + none

  reformer = models.MODELS["reformer"](
    image_shape=(4, 4, 3), width=16, channel_dim=4, depth=2, num_heads=2, mlp_dim=32, chunk_len=8
  )
  tokens = jnp.zeros((1, 48), jnp.int32)
  rngs = {"params": jax.random.key(0), "lsh": jax.random.key(1)}
  reformer_vars = reformer.init(rngs, tokens, train=False)
  logits = reformer.apply(reformer_vars, tokens, train=False, rngs={"lsh": jax.random.key(2)})
  assert logits.shape[:2] == (1, 48)

  # The training side names the extra to install.
  try:
    import lfpe.train  # noqa: F401
  except MissingExtraError as e:
    assert 'pip install "lfpe[train]"' in str(e), e
  else:
    raise AssertionError("lfpe.train imported without the train extra")
  print(
    "core install: encodings, lfpe.nnx, attention, ViT/DETR/Reformer OK on", sys.version.split()[0]
  )


def vit_step(models, posemb: str) -> None:
  import jax
  import jax.numpy as jnp
  import optax

  vit = models.MODELS["vit"](
    10, image_size=16, patch_size=4, width=32, depth=1, num_heads=2, mlp_dim=64, posemb=posemb
  )
  images, labels = jnp.ones((2, 16, 16, 3)), jnp.asarray([1, 2])
  params = vit.init(jax.random.key(0), images, train=False)["params"]
  tx = optax.adamw(1e-3)
  state = tx.init(params)

  def loss(p):
    logits = vit.apply({"params": p}, images, train=False)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

  value, grads = jax.jit(jax.value_and_grad(loss))(params)
  updates, state = tx.update(grads, state, params)
  assert jnp.isfinite(value) and jnp.isfinite(loss(optax.apply_updates(params, updates)))


if __name__ == "__main__":
  main()
