"""DETR's decoder: block positions, memory padding, pre- and post-LN, the stack's outputs."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from lfpe.nn.attention import Attention
from lfpe.nn.decoder import Decoder, DecoderBlock

B, D, HEADS, MLP = 2, 8, 2, 16
NQ, NK = 3, 6


def _x(seed=0, n=NK, b=B):
  return np.random.default_rng(seed).normal(size=(b, n, D)).astype(np.float32)


def _params(variables):
  return nn.meta.unbox(variables)["params"]


def _layer_norm(x, p):
  mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + 1e-6) * np.asarray(p["scale"]) + np.asarray(p["bias"])


def _mlp(p, x):
  """W2 gelu(W1 x + b1) + b2 (gelu: flax's tanh approximation)."""
  fc1, fc2 = p["mlp"]["fc1"], p["mlp"]["fc2"]
  h = x @ np.asarray(fc1["kernel"]) + np.asarray(fc1["bias"])
  h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
  return h @ np.asarray(fc2["kernel"]) + np.asarray(fc2["bias"])


def _reference(p, x, memory, query_pos, memory_pos, pad, norm):
  """DETR's decoder layer by hand: query_pos on self q, k and cross q; memory_pos on cross k."""
  attn = lambda name, q, kv, **kw: np.asarray(
    Attention(HEADS).apply({"params": p[name]}, q, kv, **kw)
  )
  sublayers = [
    ("norm1", lambda y: attn("self_attention", y, None, pos_q=query_pos, pos_k=query_pos)),
    (
      "norm2",
      lambda y: attn(
        "cross_attention", y, memory, pos_q=query_pos, pos_k=memory_pos, key_padding_mask=pad
      ),
    ),
    ("norm3", lambda y: _mlp(p, y)),
  ]
  for name, f in sublayers:
    if norm == "pre":
      x = x + f(_layer_norm(x, p[name]))
    else:
      x = _layer_norm(x + f(x), p[name])
  return x


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_block_positions_and_memory_padding(norm):
  x, memory = _x(0, n=NQ), _x(1)
  query_pos, memory_pos = _x(2, n=NQ, b=1)[0], _x(3, b=1)[0]
  pad = np.zeros((B, NK), bool)
  pad[:, -2:] = True
  block = DecoderBlock(HEADS, MLP, norm=norm)
  variables = block.init(jax.random.key(0), x, memory)
  run = lambda m, mp=memory_pos: block.apply(
    variables, x, m, query_pos=query_pos, memory_pos=mp, memory_padding_mask=pad
  )
  out = run(memory)
  assert out.shape == (B, NQ, D)
  memory2 = memory.copy()
  memory2[:, -2:] = 50.0  # padded memory tokens cannot matter
  np.testing.assert_allclose(out, run(memory2), rtol=1e-5, atol=1e-5)
  assert not np.allclose(out, run(memory, None), atol=1e-4)  # keys see memory_pos
  ref = _reference(_params(variables), x, memory, query_pos, memory_pos, pad, norm)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_causal_decoder_self_attention_ignores_later_queries():
  x, memory = _x(0, n=4), _x(1)
  block = DecoderBlock(HEADS, MLP, causal=True)
  variables = block.init(jax.random.key(0), x, memory)
  x2 = x.copy()
  x2[:, 2:] = 7.0
  out, out2 = block.apply(variables, x, memory), block.apply(variables, x2, memory)
  np.testing.assert_allclose(out[:, :2], out2[:, :2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_returns_every_layer_through_the_shared_final_norm(norm):
  x, memory, query_pos = _x(0, n=NQ), _x(1), _x(2, n=NQ, b=1)[0]
  decoder = Decoder(depth=3, num_heads=HEADS, mlp_dim=MLP, norm=norm)
  variables = decoder.init(jax.random.key(0), x, memory, query_pos=query_pos)
  p = _params(variables)
  assert sorted(p) == ["decoder_norm", "decoderblock_0", "decoderblock_1", "decoderblock_2"]
  out = decoder.apply(variables, x, memory, query_pos=query_pos)
  assert out.shape == (3, B, NQ, D)
  for i in range(3):
    block = DecoderBlock(HEADS, MLP, norm=norm)
    x = block.apply({"params": p[f"decoderblock_{i}"]}, x, memory, query_pos=query_pos)
    ref = _layer_norm(np.asarray(x), p["decoder_norm"])
    np.testing.assert_allclose(out[i], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(norm="middle"), "Decoder: norm='middle' is unknown"),
    (dict(depth=0), "Decoder: depth=0 must be a positive int"),
  ],
)
def test_decoder_rejects_bad_fields(kwargs, match):
  with pytest.raises(ValueError, match=match):
    Decoder(**{"depth": 2, "num_heads": HEADS, "mlp_dim": MLP, **kwargs})
