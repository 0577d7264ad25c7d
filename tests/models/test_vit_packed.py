"""NaFlex-style packed batches: one ViT step over examples of different sizes and aspect
ratios equals each example's own forward pass, and trains."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lfpe import resolution
from lfpe.models import vit

SIZES = [(16, 16), (8, 24), (24, 16), (8, 8)]  # 4x4 grid (training), 2x6, 6x4, 2x2 cells
PATCH, TOKENS = (4, 4), 36


def images(seed=0):
  rng = np.random.default_rng(seed)
  return [rng.normal(size=(h, w, 3)).astype(np.float32) for h, w in SIZES]


def model(posemb, pool="token", **fields):
  return vit.ViT(
    num_classes=5,
    image_size=16,
    patch_size=4,
    width=32,
    depth=2,
    num_heads=2,
    mlp_dim=64,
    posemb=posemb,
    pool=pool,
    head_init_std=0.1,
    **fields,
  )


@pytest.mark.parametrize(
  ("posemb", "pool"),
  [
    ("fourier", "token"),
    ("embed_1d(resample_method='bicubic')", "token"),
    ("embed_2d", "gap"),
    ("sine_2d", "gap"),
    ("rope_axial", "token"),
    ("rope_mixed", "gap"),
    ("none", "token"),
    ("rel_cpb_2d(hidden_dim=16)", "token"),
    ("rel_cpb_2d(hidden_dim=16, span=4.0)", "gap"),
    ("rel_bias_2d", "token"),
    ("rel_attn_2d(resample_method='bilinear')", "gap"),
    ("embed_1d(resample_method='bicubic_pytorch')", "gap"),
  ],
)
def test_packed_batch_equals_each_examples_own_forward(posemb, pool):
  net = model(posemb, pool)
  params = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  batch = resolution.pack(images(), PATCH, TOKENS)
  assert batch["valid"].sum(1).tolist() == [16, 12, 24, 4]
  packed = jax.jit(lambda p, b: net.apply(p, b, train=False))(params, batch)
  for b, image in enumerate(images()):
    alone = net.apply(params, image[None], train=False)[0]
    np.testing.assert_allclose(packed[b], alone, rtol=2e-5, atol=2e-6, err_msg=f"example {b}")


@pytest.mark.parametrize(
  ("posemb", "fields"),
  [
    ("fourier", {"pos_injection": "every_layer"}),
    ("sine_2d", {"pos_injection": "attention", "pos_hook": "concat", "pos_layers": 1}),
    ("embed_2d", {"pos_injection": "attention_shared", "pos_hook": "qkv"}),
    ("rope_axial(scaling='pi', trained_grid=(4, 4))", {}),
    ("rope_axial(scaling='yarn', ntk_factor=2.0, trained_grid=(4, 4))", {}),
  ],
)
def test_packed_batch_equals_each_examples_own_forward_in_each_injection_and_policy(posemb, fields):
  """Where the encoding enters (every layer, the attention's q/k or concatenated channels, some
  layers) and RoPE's scaling policies at sizes above the trained grid, packed as alone."""
  net = model(posemb, **fields)
  params = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  packed = net.apply(params, resolution.pack(images(), PATCH, TOKENS), train=False)
  for b, image in enumerate(images()):
    alone = net.apply(params, image[None], train=False)[0]
    np.testing.assert_allclose(packed[b], alone, rtol=2e-5, atol=2e-6, err_msg=f"example {b}")


def test_a_zero_one_valid_mask_reads_as_the_boolean_one():
  """`valid` from a user's own pipeline may be 0/1 integers or floats: read as booleans (a
  bitwise NOT of int32 1s gave -2, 'padding' for every key, and uniform attention)."""
  net = model("rope_axial")
  params = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  batch = resolution.pack(images(), PATCH, TOKENS)
  want = net.apply(params, batch, train=False)
  for dtype in (np.int32, np.float32):
    got = net.apply(params, {**batch, "valid": batch["valid"].astype(dtype)}, train=False)
    np.testing.assert_array_equal(got, want)


def test_a_packed_step_trains():
  net = model("fourier")
  params = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  batch, labels = resolution.pack(images(), PATCH, TOKENS), jnp.arange(4)
  tx = optax.adam(1e-2)

  @jax.jit
  def step(params, opt):
    loss = lambda p: optax.softmax_cross_entropy_with_integer_labels(
      net.apply(p, batch, train=False), labels
    ).mean()
    value, grads = jax.value_and_grad(loss)(params)
    updates, opt = tx.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt, value

  opt = tx.init(params)
  losses = []
  for _ in range(20):
    params, opt, value = step(params, opt)
    losses.append(float(value))
  assert losses[-1] < 0.5 * losses[0]


def test_packing_keeps_fitting_images_and_resizes_the_rest():
  batch = resolution.pack([np.ones((10, 40, 3)), np.ones((16, 16, 3))], PATCH, 16)
  assert batch["shape"].tolist()[1] == [4, 4]  # fits: kept
  h, w = batch["shape"].tolist()[0]  # 10 x 40 is not whole patches: resized to the budget
  assert h * w <= 16 and w > h
  assert resolution.naflex_size((10, 40), PATCH, 16) == (h * 4, w * 4)
  assert resolution.naflex_size((100, 100), (16, 16), 256) == (256, 256)  # enlarged to fit
  assert resolution.naflex_size((64, 512), (16, 16), 64) == (48, 336)  # 3 x 21 = 63 <= 64
  # 1 x 10^7 px needs 10 one-pixel patches a side even at the smallest scale: refused, not
  # returned over budget for `pack` to fail on with numpy's broadcast error.
  with pytest.raises(ValueError, match=r"does not fit max_tokens=4 patches of \(1, 1\)"):
    resolution.naflex_size((1, 10**7), (1, 1), 4)
  for hw, grid in (((10, 40), (h, w)), ((16, 16), (4, 4)), ((32, 32), (4, 4))):
    assert resolution.packed_grid(hw, PATCH, 16) == grid  # the grid `pack` gives it


def test_a_policy_with_no_per_example_version_is_refused():
  net = model("rel_bias_2d(resample_method='beit_geometric')")
  params = net.init(jax.random.key(0), jnp.zeros((1, 16, 16, 3)), train=False)
  with pytest.raises(ValueError, match="cannot take packed batches: resample_method"):
    net.apply(params, resolution.pack(images(), PATCH, TOKENS), train=False)
