"""ViT: variants, every encoding and injection mode, resolution changes, validation."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from vit_fixtures import CLASSES, IMAGE, init_variables, random_images

from lfpe import encodings
from lfpe.models import vit as vit_lib
from lfpe.models.vit import Model, ViT

PATCH = 4  # a 2x2 grid of patches (IMAGE = 8)
NEW_IMAGE = (12, 8)  # a 3x2 grid at evaluation


def _model(**kwargs):
  return Model(CLASSES, **{"image_size": IMAGE, "variant": f"mu/{PATCH}", **kwargs})


def _swap_corner_patches(images):
  """Exchange the top-left and bottom-right patches (a permutation of the tokens)."""
  images = np.array(images)
  a, b = images[:, :PATCH, :PATCH].copy(), images[:, -PATCH:, -PATCH:].copy()
  images[:, :PATCH, :PATCH], images[:, -PATCH:, -PATCH:] = b, a
  return jnp.asarray(images)


def _count(tree):
  return sum(int(np.prod(a.shape)) for a in jax.tree.leaves(tree))


def _output_shapes(model, *sizes):
  """Logits at each image size, traced only (jax.eval_shape: nothing is computed)."""

  def run(*images):
    variables = model.init(jax.random.key(0), images[0], train=False)
    return [model.apply(variables, im, train=False) for im in images]

  return jax.eval_shape(run, *[random_images(s) for s in sizes])


@pytest.mark.parametrize("name", encodings.NAMES)
def test_every_encoding_builds_at_the_train_and_a_new_image_size(name):
  outs = _output_shapes(_model(posemb=name, depth=2), (IMAGE, IMAGE), NEW_IMAGE)
  assert [(o.shape, o.dtype) for o in outs] == [((2, CLASSES), jnp.float32)] * 2


FAST = (
  "embed_1d",
  "embed_2d",
  "fourier",
  "sine_2d",
  "gabor_edge",
  "rel_attn_2d",
  "rope_axial",
  "none",
  "index",
)


@pytest.mark.parametrize(
  "name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in encodings.NAMES]
)
def test_only_positions_tell_a_permutation_of_the_patches_apart(name):
  """Attention is permutation-equivariant and the class token sees the patches as a set.

  `index` and `unit` add one value to all channels, which pre-LN removes: they are invisible
  at the stem. Also runs at a new image size (learned tables resample).
  """
  model = _model(posemb=name, depth=2)
  variables = init_variables(model)
  images = random_images()
  out = model.apply(variables, images, train=False)
  swapped = model.apply(variables, _swap_corner_patches(images), train=False)
  assert np.allclose(out, swapped, atol=1e-3) == (name in ("none", "index", "unit"))
  assert np.all(np.isfinite(model.apply(variables, random_images(NEW_IMAGE), train=False)))


@pytest.mark.parametrize("name", ["rel_bias_2d", "rel_attn_2d"])
def test_one_block_with_class_token_cannot_see_relative_positions(name):
  """The class token has no grid position, so relative terms leave its row untouched: in a
  1-block ViT only patch tokens carry relative information, and only `gap` reads them."""
  images = random_images()
  for pool, blind in (("token", True), ("gap", False)):
    model = _model(posemb=name, pool=pool)
    variables = init_variables(model)
    out = model.apply(variables, images, train=False)
    swapped = model.apply(variables, _swap_corner_patches(images), train=False)
    assert np.allclose(out, swapped, atol=1e-3) == blind


@pytest.mark.parametrize("name", ["index", "unit"])
def test_channel_constant_encodings_are_seen_through_the_attention_hooks(name):
  model = _model(posemb=name, pos_injection="attention", pos_hook="qk")
  variables = init_variables(model)
  images = random_images()
  out = model.apply(variables, images, train=False)
  assert not np.allclose(
    out, model.apply(variables, _swap_corner_patches(images), train=False), atol=1e-3
  )


INJECTIONS = [
  ("embed_1d", "stem", "qk"),
  ("fourier", "every_layer", "qk"),
  ("fourier", "every_layer_shared", "qk"),
  ("sine_2d", "attention", "qk"),
  ("gabor_edge", "attention", "v"),
  ("fourier", "attention", "qkv"),
  ("fourier", "attention_shared", "k"),
  ("sine_2d", "attention", "concat"),
  ("rel_bias_2d", "attention_shared", "qk"),
  ("rel_attn_2d", "attention", "qk"),
  ("rope_mixed", "attention", "qk"),
]


@pytest.mark.parametrize("name, injection, hook", INJECTIONS)
def test_each_injection_mode_with_a_class_token(name, injection, hook):
  model = _model(depth=2, posemb=name, pos_injection=injection, pos_hook=hook, concat_channels=2)
  variables = init_variables(model)
  apply = lambda v, x: model.apply(v, x, train=False)
  images = random_images()
  out = apply(variables, images)
  assert out.shape == (2, CLASSES)
  assert apply(variables, random_images(NEW_IMAGE)).shape == (2, CLASSES)
  assert not np.allclose(out, apply(variables, _swap_corner_patches(images)), atol=1e-3)
  pos = sorted(k for k in variables["params"]["Transformer"] if k.startswith("pos"))
  per_layer = injection in ("every_layer", "attention")
  assert pos == (["pos_0", "pos_1"] if per_layer else ["pos"])


def test_class_token_has_its_own_learned_position_added_before_the_blocks():
  model = _model(posemb="embed_1d")
  variables = init_variables(model)
  raw = nn.meta.unbox(model.init(jax.random.key(0), random_images(), train=False))["params"]
  assert not np.any(raw["head"]["kernel"])  # zero-initialised head, as big_vision
  _, state = model.apply(
    variables, random_images(), train=False, capture_intermediates=True, mutable=["intermediates"]
  )
  table = state["intermediates"]["Transformer"]["pos"]["__call__"][0]["add"]  # [1 + N, D]
  pos = variables["params"]["Transformer"]["pos"]
  assert pos["prefix"].shape == (1, 32) and pos["encoding"]["table"].shape == (4, 32)
  np.testing.assert_array_equal(table[:1], pos["prefix"])
  np.testing.assert_array_equal(table[1:], pos["encoding"]["table"])  # same size: the table
  gap = jax.eval_shape(
    functools.partial(_model(posemb="embed_1d", pool="gap").init, train=False),
    jax.random.key(0),
    random_images(),
  )["params"]
  assert "cls" not in gap and "prefix" not in gap["Transformer"]["pos"]


def test_learned_table_resamples_at_a_new_image_size():
  model = _model(posemb="embed_1d")
  variables = init_variables(model)
  _, state = model.apply(
    variables,
    random_images(NEW_IMAGE),
    train=False,
    capture_intermediates=True,
    mutable=["intermediates"],
  )
  table = state["intermediates"]["Transformer"]["pos"]["__call__"][0]["add"]
  pos = variables["params"]["Transformer"]["pos"]
  assert table.shape == (1 + 6, 32)
  np.testing.assert_array_equal(table[:1], pos["prefix"])
  expected = encodings.resample(pos["encoding"]["table"], (2, 2), (3, 2))
  np.testing.assert_allclose(table[1:], expected, rtol=1e-6)
  # The first column of the 3x2 grid interpolates rows 0 and 2 of the 2x2 table's column 0.
  assert not np.allclose(table[1:], np.resize(pos["encoding"]["table"], (6, 32)))


def test_every_layer_shared_has_one_set_of_position_params():
  def pos_params(injection):
    model = _model(depth=2, posemb="embed_1d", pos_injection=injection)
    shapes = jax.eval_shape(
      functools.partial(model.init, train=False), jax.random.key(0), random_images()
    )
    return _count({k: v for k, v in shapes["params"]["Transformer"].items() if k.startswith("pos")})

  one = (1 + 4) * 32  # class row + 2x2 table
  assert pos_params("every_layer_shared") == pos_params("stem") == one
  assert pos_params("every_layer") == 2 * one  # depth 2


def test_variant_strings():
  assert vit_lib.decode_variant("B/16") == dict(
    width=768, depth=12, num_heads=12, mlp_dim=3072, patch_size=16
  )
  assert vit_lib.decode_variant("Ti/16")["width"] == 192
  assert vit_lib.decode_variant("S/16")["num_heads"] == 6
  assert vit_lib.decode_variant("L/16")["depth"] == 24
  assert vit_lib.decode_variant("L")["patch_size"] is None
  with pytest.raises(ValueError, match="variant='X/16' is unknown"):
    vit_lib.decode_variant("X/16")
  with pytest.raises(ValueError, match="variant='B/x' is unknown"):
    vit_lib.decode_variant("B/x")


def test_vit_b16_has_86m_parameters_without_allocating():
  model = ViT(num_classes=1000, image_size=224, posemb="embed_1d")  # B/16 is the default
  shapes = jax.eval_shape(
    functools.partial(model.init, train=False), jax.random.key(0), jnp.zeros((1, 224, 224, 3))
  )
  d, mlp, layers, n = 768, 3072, 12, 196
  block = 2 * 2 * d + 4 * (d * d + d) + (d * mlp + mlp) + (mlp * d + d)
  expected = (16 * 16 * 3 * d + d) + d + (n + 1) * d + layers * block + 2 * d + (d * 1000 + 1000)
  assert _count(shapes) == expected == 86_567_656


def test_model_from_config_with_bfloat16_and_logical_axes():
  config = ml_collections.ConfigDict(
    dict(
      variant="mu",
      patch_size=PATCH,
      posemb="fourier(fourier_dim=8, hidden_dim=4)",
      pool="gap",
      dtype="bfloat16",
    )
  )
  model = Model(CLASSES, image_size=IMAGE, **config)
  assert model.patch_size == PATCH and model.width == 32 and model.depth == 1
  boxed = jax.eval_shape(
    functools.partial(model.init, train=False), jax.random.key(0), random_images()
  )["params"]
  assert boxed["embedding"]["kernel"].names == ("patch", "embed")
  assert boxed["head"]["kernel"].names == ("embed", "classes")
  assert boxed["Transformer"]["encoderblock_0"]["mlp"]["fc1"]["kernel"].names == ("embed", "mlp")
  params = nn.meta.unbox(boxed)
  assert params["Transformer"]["pos"]["encoding"]["wr"].shape == (4, 2)  # [F/2, M]
  assert all(a.dtype == jnp.float32 for a in jax.tree.leaves(params))
  logits = jax.eval_shape(
    functools.partial(model.apply, train=False), {"params": params}, random_images()
  )
  assert logits.dtype == jnp.float32 and logits.shape == (2, CLASSES)


def test_dropout_only_in_training():
  model = _model(posemb="sine_2d", dropout=0.5)
  variables = init_variables(model)
  images = random_images()
  eval_out = model.apply(variables, images, train=False)
  np.testing.assert_array_equal(eval_out, model.apply(variables, images, train=False))
  train_out = model.apply(variables, images, train=True, rngs={"dropout": jax.random.key(2)})
  assert not np.allclose(eval_out, train_out)


@pytest.mark.parametrize(
  "overrides, match",
  [
    (dict(patch_size=3), r"image_size=\(8, 8\) is not divisible by model.patch_size"),
    (dict(num_heads=3), "model.num_heads=3 must divide model.width=32"),
    (dict(posemb="fourrier"), "Unknown positional encoding 'fourrier'"),
    (dict(pos_injection="everywhere"), "pos_injection='everywhere' is unknown"),
    (dict(posemb="rope_axial", pos_injection="stem"), "cannot inject posemb='rope_axial'"),
    (dict(pos_hook="qq"), "pos_hook='qq'"),
    (dict(pool="max"), "model.pool='max' is unknown"),
    (dict(variant="Q/16"), "variant='Q/16' is unknown"),
    (dict(variant="mu", patch_size=None), "model.patch_size is needed"),
    (dict(depth="2"), "model.depth must be a positive int"),
    (dict(pos_layers=0), "model.pos_layers must be None or a positive int"),
    (dict(dropout=1.5), r"model.dropout must be a rate in \[0, 1\)"),
    (dict(dtype="float8"), "model.dtype='float8' is unknown"),
    (dict(posemb_kwargs=3), "model.posemb_kwargs is not a ViT field; the encoding and its"),
    (dict(widht=8), "model.widht is not a ViT field"),
    (dict(posemb="fourier(gama=2.0)"), "'gama' is not an option of encoding 'fourier'"),
    (dict(posemb="fourier(dim=8)"), "option 'dim' of encoding 'fourier' is set by the model"),
    (dict(posemb="fourier(gamma=)"), "is not 'name' or 'name"),
    (dict(posemb={"gamma": 2.0}), "needs a 'name' key"),
    (dict(width=24, num_heads=4, posemb="rope_axial"), "head_dim"),
    (dict(head_init_std=-1.0), "model.head_init_std must be >= 0"),
    (dict(activation="swish"), "model.activation='swish' is unknown"),
  ],
)
def test_validation_names_the_field(overrides, match):
  config = ml_collections.ConfigDict({"variant": f"mu/{PATCH}", **overrides})
  with pytest.raises(ValueError, match=match):
    Model(CLASSES, image_size=IMAGE, **config)


def test_activation_reaches_every_block():
  """'gelu_exact' (timm's erf GELU) in every MLP, no tanh form left; the default is flax's."""
  images = jnp.zeros((1, IMAGE, IMAGE, 3))

  def program(model):
    variables = jax.eval_shape(
      functools.partial(model.init, train=False), jax.random.key(0), images
    )
    return str(jax.make_jaxpr(lambda v: model.apply(v, images, train=False))(variables))

  exact, default = _model(activation="gelu_exact"), _model()
  assert program(exact).count("erf") == exact.depth and "tanh" not in program(exact)
  assert program(default).count("tanh") == default.depth and "erf" not in program(default)


def test_model_rejects_a_bad_number_of_classes():
  with pytest.raises(ValueError, match="num_classes must be a positive int"):
    Model(0, image_size=IMAGE, variant=f"mu/{PATCH}")


def test_input_size_not_divisible_by_patch_fails_at_trace_time():
  model = _model(posemb="sine_2d")
  variables = init_variables(model)
  with pytest.raises(ValueError, match=r"images .* is not divisible by model.patch_size"):
    model.apply(variables, random_images((10, 8)), train=False)


def test_an_image_without_a_batch_axis_is_named_as_such():
  net = ViT(num_classes=3, image_size=16, patch_size=4, width=8, depth=1, num_heads=1, mlp_dim=8)
  with pytest.raises(ValueError, match=r"ViT takes images \[B, H, W, C\].*got shape \(16, 16, 3\)"):
    net.init(jax.random.key(0), jnp.zeros((16, 16, 3)), train=False)
