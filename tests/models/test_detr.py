"""DETR-lite: shapes for every absolute encoding, padding invariance, where positions enter,
pre/post-LN, object queries, the no-object logit, DETR-R50's size, config checks."""

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from lfpe import encodings
from lfpe.models import MODELS, detr
from lfpe.models.backbones import BACKBONES, FrozenBatchNorm, SmallBackbone
from lfpe.models.detr import DETR, Model

CLASSES = 3
# Smaller than `tiny` where a test compiles the model (CPU time); sizes stay DETR-like.
SMALL = dict(
  variant="tiny", width=32, num_heads=2, mlp_dim=64, num_queries=6, encoder_depth=1, dropout=0.0
)
ABSOLUTE = [n for n in encodings.NAMES if encodings.kind(n) == "absolute"]


def _images(hw, b=1, seed=0):
  return np.random.default_rng(seed).normal(size=(b, *hw, 3)).astype(np.float32)


def _padded(images, hw):
  """Zero-pad images `[B, h, w, 3]` at the bottom and right to `hw`; mask True on padding."""
  b, h, w, _ = images.shape
  out, mask = np.zeros((b, *hw, 3), np.float32), np.ones((b, *hw), bool)
  out[:, :h, :w], mask[:, :h, :w] = images, False
  return out, mask


def _unpadded(images):
  return images, np.zeros(images.shape[:3], bool)


@functools.cache
def _variables(posemb):
  """Initialised variables of a SMALL model (cached: compiling init is the slow part)."""
  model = Model(CLASSES, **SMALL, posemb=posemb)
  init = jax.jit(functools.partial(model.init, train=False))
  return nn.meta.unbox(init(jax.random.key(0), *_unpadded(_images((32, 32)))))


@functools.cache
def _inputs():
  """Images a (24x32: a 3x4 feature map) and b (40x16: 5x2) padded together in one batch,
  then each alone: (images, mask) three times. Tests share them to share compilations."""
  a, b = _images((24, 32), seed=1), _images((40, 16), seed=2)
  batch, mask = np.zeros((2, 40, 48, 3), np.float32), np.ones((2, 40, 48), bool)
  batch[0, :24, :32], batch[1, :40, :16] = a[0], b[0]
  mask[0, :24, :32], mask[1, :40, :16] = False, False
  return (batch, mask, *_unpadded(a), *_unpadded(b))


@functools.partial(jax.jit, static_argnums=0)
def _apply(model, variables, *inputs):
  """`model` on each (images, mask) pair of `inputs`, one compilation."""
  pairs = zip(inputs[::2], inputs[1::2], strict=True)
  return [model.apply(variables, im, mk, train=False) for im, mk in pairs]


@pytest.mark.parametrize("name", ABSOLUTE)
def test_output_shapes_for_every_absolute_encoding(name):
  model = Model(CLASSES, variant="tiny", posemb=name)
  images, mask = _padded(_images((24, 40), b=2), (32, 40))

  def run(images, mask):
    variables = model.init(jax.random.key(0), images, mask, train=False)
    return model.apply(variables, images, mask, train=False)

  out = jax.eval_shape(run, images, mask)
  assert out["logits"].shape == (2, 2, 20, CLASSES + 1)  # [L, B, Q, K + 1]
  assert out["boxes"].shape == (2, 2, 20, 4)
  assert out["logits"].dtype == out["boxes"].dtype == jnp.float32


@pytest.mark.parametrize(
  "posemb, normalize",
  [
    ("detr_sine", True),
    ("detr_sine", False),
    ("fourier", True),
    ("fourier", False),
    ("embed_2d", False),  # tables read indices either way
  ],
)
def test_padded_images_predict_like_the_unpadded_images(posemb, normalize):
  model = Model(CLASSES, **SMALL, posemb=posemb, normalize_positions=normalize)
  out, alone_a, alone_b = _apply(model, _variables(posemb), *_inputs())
  for key in ("logits", "boxes"):
    np.testing.assert_allclose(out[key][:, :1], alone_a[key], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[key][:, 1:], alone_b[key], rtol=1e-4, atol=1e-4)
  assert not np.allclose(alone_a["boxes"], alone_b["boxes"], atol=1e-3)


def _with_zero_query_key_kernels(params):
  """Every attention's query and key kernels zeroed: attention is uniform over valid keys."""
  flat = traverse_util.flatten_dict(params)
  blind = lambda path: path[-1] == "kernel" and path[-2] in ("query", "key")
  zeroed = {k: jnp.zeros_like(v) if blind(k) else v for k, v in flat.items()}
  assert sum(map(blind, flat)) == 2 * (1 + 2 * 2)  # encoder 1 block, decoder 2 blocks x 2
  return traverse_util.unflatten_dict(zeroed)


def _perturb_positions(params, seed):
  """New feature-map encoding parameters and object-query positions."""
  rng = np.random.default_rng(seed)
  noise = lambda a: a + jnp.asarray(rng.normal(size=a.shape), a.dtype)
  return {
    **params,
    "pos": jax.tree.map(noise, params["pos"]),
    "query_pos": noise(params["query_pos"]),
  }


def test_positions_enter_queries_and_keys_never_values():
  model = Model(CLASSES, **SMALL, posemb="fourier")
  params = _variables("fourier")["params"]
  run = lambda p: _apply(model, {"params": p}, *_inputs())[0]["boxes"]
  # Positions matter through queries and keys ...
  assert not np.allclose(run(params), run(_perturb_positions(params, 1)), atol=1e-3)
  # ... and only there: with no query and key projections nothing can read them.
  blind = _with_zero_query_key_kernels(params)
  np.testing.assert_allclose(run(blind), run(_perturb_positions(blind, 1)), rtol=1e-5, atol=1e-6)


def test_no_position_control_adds_no_feature_map_positions():
  model = Model(CLASSES, **SMALL, posemb="none")
  params = _variables("none")["params"]
  assert "pos" not in params  # no encoding to learn; the object queries stay (DETR's)
  out, alone_a, _ = _apply(model, {"params": params}, *_inputs())
  np.testing.assert_allclose(out["boxes"][:, :1], alone_a["boxes"], rtol=1e-4, atol=1e-4)
  flat = traverse_util.flatten_dict(params)
  flat[("query_pos",)] = flat[("query_pos",)] + 1.0  # the query positions still matter
  moved = _apply(model, {"params": traverse_util.unflatten_dict(flat)}, *_inputs())[0]
  assert not np.allclose(out["boxes"], moved["boxes"], atol=1e-3)


def test_post_and_pre_norm_both_run_and_differ():
  post, pre = Model(CLASSES, **SMALL), Model(CLASSES, **SMALL, norm="pre")
  assert post.norm == "post"  # DETR's default
  init = lambda model: model.init(jax.random.key(0), *_inputs()[:2], train=False)
  assert "encoder_norm" not in jax.eval_shape(lambda: init(post))["params"]["encoder"]  # DETR
  params = _variables("detr_sine")["params"]
  norm = {"scale": jnp.ones(SMALL["width"]), "bias": jnp.zeros(SMALL["width"])}
  pre_params = {**params, "encoder": {**params["encoder"], "encoder_norm": norm}}
  out_post = _apply(post, {"params": params}, *_inputs())[0]
  out_pre, alone_a, _ = _apply(pre, {"params": pre_params}, *_inputs())
  assert np.all(np.isfinite(out_pre["logits"])) and np.all(np.isfinite(out_pre["boxes"]))
  assert not np.allclose(out_post["boxes"], out_pre["boxes"], atol=1e-3)
  np.testing.assert_allclose(out_pre["boxes"][:, :1], alone_a["boxes"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("activation, op", [("gelu", "tanh"), ("gelu_exact", "erf")])
def test_activation_reaches_every_feed_forward_layer(activation, op):
  """One GELU per encoder and decoder layer; `activation='relu'` (DETR's) leaves none."""
  images, mask = _inputs()[:2]

  def program(model):
    variables = jax.eval_shape(lambda: model.init(jax.random.key(0), images, mask, train=False))
    return str(jax.make_jaxpr(lambda v: model.apply(v, images, mask, train=False))(variables))

  model = Model(CLASSES, **SMALL, activation=activation)
  assert program(model).count(op) == model.encoder_depth + model.decoder_depth
  relu = program(Model(CLASSES, **SMALL, activation="relu"))
  assert relu.count("tanh") == relu.count("erf") == 0


def test_object_queries_are_distinct_at_init():
  variables = _variables("detr_sine")
  query_pos = np.asarray(variables["params"]["query_pos"])  # [Q, D]
  assert query_pos.shape == (SMALL["num_queries"], SMALL["width"])
  assert 0.8 < query_pos.std() < 1.2  # DETR's nn.Embedding: N(0, 1)
  boxes = np.asarray(_apply(Model(CLASSES, **SMALL), variables, *_inputs())[0]["boxes"][-1, 0])
  gaps = np.abs(boxes[:, None] - boxes[None]).max(-1) + np.eye(len(boxes))  # [Q, Q]
  assert gaps.min() > 1e-3


def test_reference_points_offset_each_query_box_in_logit_space():
  """boxes = sigmoid(head + logit([r, 1/2, 1/2])): with the box head's last layer zeroed,
  every layer's boxes are the query's own centre r with width and height 1/2."""
  model = Model(CLASSES, **SMALL, reference_points=True)
  variables = nn.meta.unbox(model.init(jax.random.key(0), *_inputs()[:2], train=False))
  centre = np.asarray(variables["params"]["reference_points"])  # [Q, 2]
  assert centre.shape == (SMALL["num_queries"], 2) and 0.1 <= centre.min() < centre.max() <= 0.9
  last = variables["params"]["box_head_2"]
  zeroed = {**variables["params"], "box_head_2": jax.tree.map(jnp.zeros_like, last)}
  boxes = np.asarray(model.apply({"params": zeroed}, *_inputs()[:2], train=False)["boxes"])
  expected = np.concatenate([centre, np.full_like(centre, 0.5)], -1)
  np.testing.assert_allclose(boxes, np.broadcast_to(expected, boxes.shape), atol=1e-6)
  assert "reference_points" not in _variables("detr_sine")["params"]  # off by default (DETR)
  # A centre an update moved outside (0, 1) is read at the clamp, as Deformable DETR's clamped
  # inverse_sigmoid: boxes stay finite instead of NaN.
  moved = {**zeroed, "reference_points": jnp.asarray(centre).at[0].set(jnp.asarray([-0.2, 1.3]))}
  boxes = np.asarray(model.apply({"params": moved}, *_inputs()[:2], train=False)["boxes"])
  assert np.isfinite(boxes).all()
  np.testing.assert_allclose(
    boxes[..., 0, :2], np.broadcast_to([1e-5, 1 - 1e-5], boxes[..., 0, :2].shape), atol=1e-6
  )


def test_no_object_logit_is_the_last():
  model = Model(CLASSES, variant="tiny")
  out = jax.eval_shape(
    lambda im, mk: model.init_with_output(jax.random.key(0), im, mk, train=False)[0],
    *_unpadded(_images((32, 32))),
  )
  assert model.no_object_class == CLASSES == out["logits"].shape[-1] - 1


def test_full_config_has_detr_r50_parameter_count():
  model = Model(91)  # DETR-R50 on COCO: 91 classes + no object
  images, mask = _unpadded(_images((64, 64)))
  variables = jax.eval_shape(lambda: model.init(jax.random.key(0), images, mask, train=False))
  count = lambda tree: sum(math.prod(a.shape) for a in jax.tree.leaves(nn.meta.unbox(tree)))
  # DETR prints 41,302,368 trainable parameters; it also freezes the ResNet stem and layer1
  # (222,400 parameters), which count here. Frozen batch norms hold constants only.
  assert count(variables["params"]) == 41_302_368 + 222_400
  assert count(variables["constants"]) == 4 * 26_560  # scale, bias, mean, var per channel
  assert count(variables["params"]["backbone"]) == 23_454_912  # torchvision resnet50, no fc
  out = jax.eval_shape(lambda v: model.apply(v, images, mask, train=False), variables)
  assert out["logits"].shape == (6, 1, 100, 92) and out["boxes"].shape == (6, 1, 100, 4)


def test_train_mode_traces_with_dropout():
  model = Model(CLASSES, variant="tiny")
  images, mask = _padded(_images((24, 32), b=2), (32, 40))

  def run():
    variables = model.init(jax.random.key(0), images, mask, train=False)
    rngs = {"dropout": jax.random.key(1)}
    return model.apply(variables, images, mask, train=True, rngs=rngs)

  assert jax.eval_shape(run)["boxes"].shape == (2, 2, 20, 4)


def test_feature_positions_follow_detr_and_read_tables_by_zero_based_index():
  mask = np.ones((1, 5, 6), bool)
  mask[:, :3, :4] = False  # a 3x4 image padded to 5x6
  mask = jnp.asarray(mask)
  build = lambda name: encodings.build(name, dim=8, grid_shape=(5, 6), parent=None)
  valid = ~np.asarray(mask).reshape(-1)
  rows, cols = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
  index = np.stack([rows.ravel(), cols.ravel()], -1)  # 0-based (y, x) of the image
  for normalize in (True, False):  # tables: 0-based indices either way
    pos = detr.feature_positions(mask, build("embed_2d"), normalize)[0]
    np.testing.assert_array_equal(pos[valid], index)
    np.testing.assert_array_equal(pos[~valid], 0)
  sine = detr.feature_positions(mask, build("detr_sine"), True)[0]
  detr_coords = encodings.coords.detr(mask).reshape(30, 2)  # (0, 2π]
  np.testing.assert_allclose(sine[valid], detr_coords[valid], rtol=1e-6)
  fourier = detr.feature_positions(mask, build("fourier"), True)[0]  # [N, G=1, 2]
  np.testing.assert_allclose(fourier[valid, 0], (index + 1) / [3, 4], rtol=1e-5)
  raw = detr.feature_positions(mask, build("fourier"), False)[0]
  np.testing.assert_array_equal(raw[valid, 0], index + 1)  # DETR's normalize=False: 1-based
  flat = detr.feature_positions(mask, build("sine_1d"), False)[0]
  np.testing.assert_array_equal(flat[valid, 0], np.arange(1, 13))  # raster order, 1-based
  unit = detr.feature_positions(mask, build("unit"), True)[0]
  np.testing.assert_allclose(unit[valid, 0], np.arange(1, 13) / 12, rtol=1e-6)


def test_mask_is_downsampled_by_nearest_interpolation_as_detr():
  mask = np.zeros((1, 10, 7), bool)
  mask[:, 6:] = True
  mask[:, :, 5:] = True
  small = np.asarray(detr.downsample_mask(jnp.asarray(mask), (4, 3)))
  # PyTorch's nearest: output i reads input floor(i * in / out).
  rows, cols = np.floor(np.arange(4) * 10 / 4).astype(int), np.floor(np.arange(3) * 7 / 3)
  np.testing.assert_array_equal(small, mask[:, rows][:, :, cols.astype(int)])


def test_small_backbone_zeroes_padding_and_frozen_batch_norm_has_no_params():
  images, mask = _padded(_images((16, 8)), (24, 24))
  backbone = SmallBackbone()
  variables = backbone.init(jax.random.key(0), images, mask)
  features = np.asarray(backbone.apply(variables, images, mask))
  assert features.shape == (1, 3, 3, 128)
  assert np.all(features[:, 2:] == 0) and np.all(features[:, :, 1:] == 0)
  x = _images((2, 2))
  bn = FrozenBatchNorm()
  variables = bn.init(jax.random.key(0), x)
  assert set(variables) == {"constants"}
  constants = {"scale": 2.0, "bias": 1.0, "mean": 0.5, "var": 3.0}
  constants = {k: jnp.full((3,), v) for k, v in constants.items()}
  out = bn.apply({"constants": constants}, x)
  np.testing.assert_allclose(out, (x - 0.5) / np.sqrt(3.0 + 1e-5) * 2.0 + 1.0, rtol=1e-6)


def test_embed_tables_reject_feature_maps_beyond_max_grid():
  model = Model(CLASSES, variant="tiny", posemb="embed_2d", max_grid=(2, 2))
  images, mask = _unpadded(_images((24, 16)))
  with pytest.raises(ValueError, match=r"feature map \(3, 2\) larger than model.max_grid"):
    jax.eval_shape(lambda: model.init(jax.random.key(0), images, mask, train=False))


def test_registry_and_variants():
  model = MODELS["detr"](CLASSES, variant="tiny", width=32)
  assert isinstance(model, DETR) and model.width == 32 and model.backbone == "small"
  assert Model(CLASSES) == Model(CLASSES, variant="R50")


@pytest.mark.parametrize(
  "variant, size, grid", [("tiny", 100, (13, 13)), ("R50", (800, 1333), (25, 42))]
)
def test_image_size_sets_max_grid_to_the_feature_map(variant, size, grid):
  model = Model(CLASSES, variant=variant, image_size=size)
  assert model.max_grid == grid  # DETR-R50's largest COCO image: 002's 42 columns
  assert Model(CLASSES, variant=variant, image_size=size, max_grid=(7, 7)).max_grid == (7, 7)
  hw = (size, size) if isinstance(size, int) else size
  images, mask = jnp.zeros((1, *hw, 3)), jnp.zeros((1, *hw), bool)
  backbone = BACKBONES[model.backbone]()
  features = jax.eval_shape(lambda: backbone.init_with_output(jax.random.key(0), images, mask))
  assert features[0].shape[1:3] == grid


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(width=30, num_heads=4), "model.num_heads=4 must divide model.width=30"),
    (dict(backbone="vgg"), "model.backbone='vgg' is unknown"),
    (dict(posemb="rel_bias_2d"), "model.posemb='rel_bias_2d' is a 'bias' encoding"),
    (dict(posemb="rope_axial"), "model.posemb='rope_axial' is a 'rotary' encoding"),
    (dict(posemb="fourrier"), "model.posemb: Unknown positional encoding 'fourrier'"),
    (dict(posemb="fourier(gamma=-1.0)"), r"model.posemb='fourier\(gamma=-1.0\)'.*gamma"),
    (dict(posemb="detr_sine(normalize=False)"), "set model.normalize_positions instead"),
    (dict(norm="middle"), "model.norm='middle' is unknown"),
    (dict(activation="swish"), "model.activation='swish' is unknown"),
    (dict(input_dropout=0), "model.input_dropout must be True or False"),
    (dict(max_grid=(0, 4)), "model.max_grid must be a"),
    (dict(num_queries=0), "model.num_queries must be a positive int"),
    (dict(query_groups=0), "model.query_groups must be a positive int"),
    (dict(dropout=1.5), r"model.dropout must be a rate in \[0, 1\)"),
    (dict(normalize_positions="yes"), "model.normalize_positions must be True or False"),
    (dict(reference_points=1), "model.reference_points must be True or False"),
    (dict(posemb_kwargs={}), "model.posemb_kwargs is not a DETR field"),
    (dict(variant="R101"), "model.variant='R101' is unknown"),
    (dict(image_size=(0, 32)), r"image_size must be a positive int or a pair"),
  ],
)
def test_check_errors_name_the_field(kwargs, match):
  with pytest.raises(ValueError, match=match):
    Model(CLASSES, **kwargs)


def test_query_groups_train_apart_and_eval_runs_group_0_alone():
  """Group DETR: G·Q queries in training, group g in rows g·Q onwards, no attention across
  groups (changing group 1's query positions leaves group 0 unchanged); eval runs group 0
  alone and equals its training output (no dropout)."""
  q, groups = SMALL["num_queries"], 3
  model = Model(CLASSES, **SMALL, reference_points=True, query_groups=groups, attention_dropout=0.0)
  images, mask = _inputs()[:2]
  variables = nn.meta.unbox(model.init(jax.random.key(0), images, mask, train=False))
  params = variables["params"]
  assert params["query_pos"].shape[0] == params["reference_points"].shape[0] == groups * q
  train = lambda p: model.apply({"params": p}, images, mask, train=True)
  out = train(params)
  assert out["logits"].shape[2] == out["boxes"].shape[2] == groups * q
  evaluated = model.apply(variables, images, mask, train=False)
  assert evaluated["logits"].shape[2] == q
  for key in ("logits", "boxes"):
    np.testing.assert_allclose(evaluated[key], out[key][:, :, :q], atol=1e-5)
  moved = train({**params, "query_pos": params["query_pos"].at[q : 2 * q].add(1.0)})
  group = lambda x, g: x["logits"][:, :, g * q : (g + 1) * q]
  for g in (0, 2):  # unchanged
    np.testing.assert_allclose(group(moved, g), group(out, g), atol=1e-6)
  assert np.abs(group(moved, 1) - group(out, 1)).max() > 1e-3


def test_group_attention_bias_is_block_diagonal():
  bias = np.asarray(detr.group_attention_bias(3, 2))
  blocks = np.kron(np.eye(3), np.ones((2, 2)))
  np.testing.assert_array_equal(bias == 0, blocks == 1)
  assert bias.max() == 0 and bias.min() <= -1e9
