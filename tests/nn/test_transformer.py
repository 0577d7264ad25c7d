"""Encoder blocks (pre- and post-LN) and where the Encoder injects positions."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.nn.attention import Attention
from lfpe.nn.positions import PositionSource
from lfpe.nn.transformer import Encoder, EncoderBlock

B, D, HEADS, MLP = 2, 8, 2, 16
GRID = (2, 3)
N = 6


def _x(seed=0, n=N, b=B):
  return np.random.default_rng(seed).normal(size=(b, n, D)).astype(np.float32)


def _params(variables):
  return nn.meta.unbox(variables)["params"]


def _layer_norm(x, p):
  mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + 1e-6) * np.asarray(p["scale"]) + np.asarray(p["bias"])


def _gelu(x):  # tanh approximation, flax's default
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {
  "gelu": _gelu,
  "gelu_exact": np.vectorize(lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
  "relu": lambda x: np.maximum(x, 0.0),
}


def _block_reference(p, x, act=_gelu, **hooks):
  """x + Attn(LN(x)), then + W2 act(W1 LN(x)); attention from the (separately tested) module."""
  y = Attention(HEADS).apply({"params": p["attention"]}, _layer_norm(x, p["norm1"]), **hooks)
  return _mlp_residual(p, x + np.asarray(y), "norm2", act)


def _mlp_residual(p, x, norm, act=_gelu):
  """x + W2 act(W1 LN(x) + b1) + b2."""
  fc1, fc2 = p["mlp"]["fc1"], p["mlp"]["fc2"]
  h = act(_layer_norm(x, p[norm]) @ np.asarray(fc1["kernel"]) + np.asarray(fc1["bias"]))
  return x + h @ np.asarray(fc2["kernel"]) + np.asarray(fc2["bias"])


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_encoder_block_is_pre_layer_norm_residual(activation):
  x = _x()
  block = EncoderBlock(num_heads=HEADS, mlp_dim=MLP, activation=activation)
  variables = block.init(jax.random.key(0), x)
  ref = _block_reference(_params(variables), x, ACTIVATIONS[activation])
  np.testing.assert_allclose(block.apply(variables, x), ref, rtol=1e-5, atol=1e-5)


def test_encoder_block_passes_hooks_to_attention():
  x = _x()
  pos = _x(1, b=1)[0]
  block = EncoderBlock(num_heads=HEADS, mlp_dim=MLP)
  variables = block.init(jax.random.key(0), x)
  out = block.apply(variables, x, hooks={"pos_q": pos, "pos_k": pos})
  ref = _block_reference(_params(variables), x, pos_q=pos, pos_k=pos)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_post_norm_encoder_block_normalises_after_each_residual():
  x, pos = _x(), _x(1, b=1)[0]
  block = EncoderBlock(num_heads=HEADS, mlp_dim=MLP, norm="post")
  variables = block.init(jax.random.key(0), x)
  p = _params(variables)
  y = Attention(HEADS).apply({"params": p["attention"]}, x, pos_q=pos, pos_k=pos)
  y = _layer_norm(x + np.asarray(y), p["norm1"])
  fc1, fc2 = p["mlp"]["fc1"], p["mlp"]["fc2"]
  h = _gelu(y @ np.asarray(fc1["kernel"]) + np.asarray(fc1["bias"]))
  ref = _layer_norm(y + h @ np.asarray(fc2["kernel"]) + np.asarray(fc2["bias"]), p["norm2"])
  out = block.apply(variables, x, hooks={"pos_q": pos, "pos_k": pos})
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def _encoder(**kwargs):
  kwargs = {
    "depth": 2,
    "width": D,
    "num_heads": HEADS,
    "mlp_dim": MLP,
    "grid_shape": GRID,
    **kwargs,
  }
  return Encoder(**kwargs)


def _blocks_reference(params, x, depth, tables):
  """Blocks applied one by one, `tables[i]` (or None) added before block i; final LayerNorm."""
  for i in range(depth):
    x = x if tables[i] is None else x + tables[i]
    x = EncoderBlock(HEADS, MLP).apply({"params": params[f"encoderblock_{i}"]}, x)
  return _layer_norm(np.asarray(x), params["encoder_norm"])


@pytest.mark.parametrize(
  "injection, names",
  [
    ("stem", ["pos", None]),
    ("every_layer", ["pos_0", "pos_1"]),
    ("every_layer_shared", ["pos", "pos"]),
  ],
)
def test_added_positions_enter_before_the_right_blocks(injection, names):
  x = _x()
  enc = _encoder(posemb="embed_1d", pos_injection=injection)
  variables = enc.init(jax.random.key(0), x)
  params = _params(variables)
  tables = [None if n is None else np.asarray(params[n]["encoding"]["table"]) for n in names]
  assert sorted(k for k in params if k.startswith("pos")) == sorted({n for n in names if n})
  np.testing.assert_allclose(
    enc.apply(variables, x), _blocks_reference(params, x, 2, tables), rtol=1e-5, atol=1e-5
  )


def test_every_layer_has_one_encoding_per_block_shared_has_one():
  x = _x()
  count = lambda v: sum(
    a.size for k, t in _params(v).items() if k.startswith("pos") for a in jax.tree.leaves(t)
  )
  per_layer = _encoder(posemb="fourier", pos_injection="every_layer").init(jax.random.key(0), x)
  shared = _encoder(posemb="fourier", pos_injection="every_layer_shared").init(jax.random.key(0), x)
  assert count(per_layer) == 2 * count(shared) > 0


def test_attention_injection_with_pos_layers_gives_positions_to_first_blocks_only():
  x = _x()
  enc = _encoder(posemb="sine_2d", pos_injection="attention", pos_hook="qk", pos_layers=1)
  variables = enc.init(jax.random.key(0), x)
  params = _params(variables)
  table = encodings.create("sine_2d", dim=D).apply({}, GRID, method="grid")
  y = EncoderBlock(HEADS, MLP).apply(
    {"params": params["encoderblock_0"]}, x, hooks={"pos_q": table, "pos_k": table}
  )
  ref = _layer_norm(
    np.asarray(EncoderBlock(HEADS, MLP).apply({"params": params["encoderblock_1"]}, y)),
    params["encoder_norm"],
  )
  np.testing.assert_allclose(enc.apply(variables, x), ref, rtol=1e-5, atol=1e-5)


def test_causal_encoder_ignores_future_tokens():
  x = _x()
  enc = _encoder(posemb="sine_1d", causal=True)
  variables = enc.init(jax.random.key(0), x)
  x2 = x.copy()
  x2[:, 4:] = 5.0
  out, out2 = enc.apply(variables, x), enc.apply(variables, x2)
  np.testing.assert_allclose(out[:, :4], out2[:, :4], rtol=1e-5, atol=1e-5)
  assert not np.allclose(out[:, 4:], out2[:, 4:])


def _source(posemb, hook="add", **kwargs):
  src = PositionSource(posemb, GRID, D, HEADS, hook, num_prefix=1, **kwargs)
  variables = src.init(jax.random.key(0), GRID)
  return src, variables


def test_prefix_token_gets_its_own_learned_row():
  src, variables = _source("sine_2d")
  table = src.apply(variables, GRID)["add"]
  assert table.shape == (1 + N, D)
  np.testing.assert_array_equal(table[:1], _params(variables)["prefix"])
  np.testing.assert_allclose(
    table[1:], encodings.create("sine_2d", dim=D).apply({}, GRID, method="grid"), rtol=1e-6
  )


def test_concat_hook_splits_channels_into_q_and_k_per_head():
  src, variables = _source("fourier", hook="concat", concat_channels=3)
  hooks = src.apply(variables, GRID)
  assert hooks["concat_q"].shape == hooks["concat_k"].shape == (1 + N, HEADS, 3)
  assert not np.allclose(hooks["concat_q"], hooks["concat_k"])
  params = _params(variables)
  assert params["prefix"].shape == (1, 2 * HEADS * 3)


def test_relative_bias_is_zero_for_the_prefix_token():
  src, variables = _source("rel_bias_2d")
  bias = np.asarray(src.apply(variables, GRID)["logit_bias"])
  assert bias.shape == (HEADS, 1 + N, 1 + N)
  assert np.all(bias[:, 0, :] == 0) and np.all(bias[:, :, 0] == 0)
  rel = encodings.build("rel_bias_2d", grid_shape=GRID, num_heads=HEADS)
  expected = rel.apply({"params": _params(variables)["encoding"]}, GRID)
  np.testing.assert_array_equal(bias[:, 1:, 1:], expected)


def test_rotary_hook_leaves_the_prefix_token_unrotated():
  src, variables = _source("rope_axial")
  rope = src.apply(variables, GRID)["rope"]
  x = jnp.asarray(np.random.default_rng(0).normal(size=(B, 1 + N, HEADS, D // HEADS)))
  out = np.asarray(rope(x))
  np.testing.assert_array_equal(out[:, 0], x[:, 0])
  rot = encodings.create("rope_axial", head_dim=D // HEADS)
  np.testing.assert_allclose(out[:, 1:], rot.apply({}, x[:, 1:], rot.grid_coords(GRID)), rtol=1e-6)


def test_per_example_coords_give_per_example_tables():
  src = PositionSource("sine_2d", GRID, D, HEADS, "qk")
  coords = jnp.stack([encodings.coords.grid(GRID), 2 * encodings.coords.grid(GRID)])
  hooks = src.apply({}, GRID, coords)
  assert hooks["pos_q"].shape == (2, N, D)
  assert not np.allclose(hooks["pos_q"][0], hooks["pos_q"][1])


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(posemb="rel_bias_2d", pos_injection="stem"), "cannot inject posemb='rel_bias_2d'"),
    (dict(posemb="fourier", pos_injection="everywhere"), "pos_injection='everywhere'"),
    (dict(posemb="fourier", pos_hook="qq"), "pos_hook='qq'"),
    (dict(posemb="fourier", concat_channels=0), "concat_channels=0"),
    (dict(posemb="fourier", pos_injection="attention", pos_layers=3), "pos_layers=3"),
    (dict(posemb="fourrier"), "Unknown positional encoding 'fourrier'"),
    (dict(posemb="sine_2d(temprature=100.0)"), "'temprature' is not an option of encoding"),
  ],
)
def test_encoder_rejects_bad_position_options(kwargs, match):
  with pytest.raises(ValueError, match=match):
    _encoder(**kwargs)


def test_encoder_rejects_a_token_count_that_does_not_match_the_grid():
  with pytest.raises(ValueError, match=r"got tokens \(2, 5, 8\)"):
    _encoder(posemb="sine_2d").init(jax.random.key(0), _x(n=5))


def test_post_norm_encoder_has_no_final_norm():
  x = _x()
  enc = _encoder(norm="post")
  variables = enc.init(jax.random.key(0), x)
  params = _params(variables)
  assert "encoder_norm" not in params
  for i in range(2):
    x = EncoderBlock(HEADS, MLP, norm="post").apply({"params": params[f"encoderblock_{i}"]}, x)
  np.testing.assert_allclose(enc.apply(variables, _x()), x, rtol=1e-5, atol=1e-5)


def test_given_hooks_enter_every_block_like_a_shared_source():
  x = _x()
  coords = jnp.stack([encodings.coords.grid(GRID), 2 * encodings.coords.grid(GRID)])
  shared = _encoder(posemb="sine_2d", pos_injection="attention_shared")
  variables = shared.init(jax.random.key(0), x, coords=coords)
  hooks = PositionSource("sine_2d", GRID, D, HEADS, "qk").apply({}, GRID, coords)
  given = _encoder().apply(variables, x, hooks=hooks)
  np.testing.assert_allclose(given, shared.apply(variables, x, coords=coords), rtol=1e-6)
  with pytest.raises(ValueError, match="got position hooks and posemb='sine_2d'"):
    shared.apply(variables, x, hooks=hooks)


def test_encoder_gives_its_activation_to_every_block():
  x = _x()
  enc = _encoder(norm="post", activation="relu")
  variables = enc.init(jax.random.key(0), x)
  params = _params(variables)
  y = x
  for i in range(2):
    block = EncoderBlock(HEADS, MLP, norm="post", activation="relu")
    y = block.apply({"params": params[f"encoderblock_{i}"]}, y)
  np.testing.assert_allclose(enc.apply(variables, x), y, rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="Encoder: activation='swish' is unknown"):
    _encoder(activation="swish")


@pytest.mark.parametrize("input_dropout, draws", [(True, 7), (False, 6)])
def test_input_dropout_is_one_draw_before_the_blocks(input_dropout, draws):
  """Training draws 3 dropout masks per block (both residual branches, the MLP's hidden
  layer) and, with `input_dropout` (ViT's; DETR has none), one on the encoder's input."""
  x = _x()
  enc = _encoder(dropout=0.5, input_dropout=input_dropout)
  variables = enc.init(jax.random.key(0), x)
  apply = lambda v: enc.apply(v, x, deterministic=False, rngs={"dropout": jax.random.key(1)})
  assert str(jax.make_jaxpr(apply)(variables)).count("name=_bernoulli") == draws


def test_encoder_rejects_an_unknown_norm():
  with pytest.raises(ValueError, match="Encoder: norm='postnorm' is unknown"):
    _encoder(norm="postnorm")
