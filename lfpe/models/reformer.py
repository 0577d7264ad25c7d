"""A Reformer-style autoregressive image model (002 Sec. 4.1, Fig. 3) with any position encoding.

An image `[H, W, C]` is a sequence of `L = H*W*C` sub-pixel tokens in raster order, the
channels of a pixel consecutive (vocabulary `vocab`: 256 sub-pixel values, or the grey
levels of a quantised dataset). Token `t` is predicted from the tokens
before it: the input at `t` is the embedding of token `t - 1` (zeros at `t = 0`) plus the
position vector of token `t`, which is (002) the concatenation of
  * an absolute `lfpe.encodings` encoding of the token's 2-D pixel position `(row, col)`,
    `width - channel_dim` wide (a 1-D encoding such as `embed_1d` or `sine_1d` sees the
    raster index of the pixel instead: its `flatten` flag), shared by the C channels, and
  * a learned embedding of the token's channel, `[C, channel_dim]`.
At full scale that is 768 + 256 = 1,024 = d_model. The embedding is duplicated into the two
streams of a reversible stack (`lfpe.nn.reversible`) of `depth` layers, F = LayerNorm +
causal self-attention (`lfpe.nn.lsh`: LSH, or dense with shared or separate q and k), G =
a chunked feed-forward; the two outputs are concatenated, normalised and mapped to `vocab`
logits per token. With `posemb='none'` the position vector is the channel embedding alone
(and zeros): the no-position control.

Randomness (LSH hashing, dropout) comes from the `lsh` rng stream, drawn once per call and
split per layer, so the reversible backward pass redraws the forward pass's hashes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe import encodings
from lfpe.checked import Checked
from lfpe.models.fields import check_dtype, positive_int, variant_fields
from lfpe.nn.causal_attention import ATTENTIONS, CausalSelfAttention
from lfpe.nn.positions import PositionSource
from lfpe.nn.reversible import ChunkedFeedForward, ReversibleStack, merge_streams
from lfpe.nn.transformer import layer_norm

Array = jnp.ndarray

# name: the fields it sets. `imagenet64`: 002 / Reformer's ImageNet 64x64 model, with
# n_buckets = 2 L / chunk_len (Reformer Sec. 2: chunks of twice the mean bucket size).
# `tiny` (the CPU records, L = 256) keeps 4 buckets, not the rule's 16: a bucket averages
# 64 tokens, two chunks, so each query sees about a quarter of its past (denser than the
# paper's regime; the same for every encoding compared).
VARIANTS = {
  "imagenet64": dict(
    width=1024,
    channel_dim=256,
    depth=6,
    num_heads=8,
    mlp_dim=4096,
    attention="lsh",
    chunk_len=128,
    n_buckets=192,
    n_hashes=2,
    ff_chunk_len=1024,
  ),
  "tiny": dict(
    width=64, channel_dim=16, depth=2, num_heads=4, mlp_dim=128, chunk_len=32, n_buckets=4
  ),
}


class AttentionSublayer(nn.Module):
  """F of a reversible layer: pre-LayerNorm, then `CausalSelfAttention`."""

  attention: CausalSelfAttention
  dtype: Any = None

  @nn.compact
  def __call__(self, x: Array, *, key: Array | None, deterministic: bool = True) -> Array:
    y = layer_norm("norm", self.dtype)(x)
    return self.attention(y, key=key, deterministic=deterministic)


class Reformer(Checked, nn.Module):
  """The model of the module docstring: tokens `[B, L]` int -> logits `[B, L, vocab]`.

  Attributes:
    image_shape: `(H, W, C)` of the images; `L = H*W*C`.
    vocab: values a token takes (256 sub-pixel values; the task passes its dataset's).
    width, depth, num_heads, mlp_dim: d_model, reversible layers, heads, d_ff.
    channel_dim: width of the channel embedding; the pixel encoding gets the rest.
    posemb: an absolute `lfpe.encodings` spec for pixel positions (002 Fig. 3).
    attention: `lsh`, `full_shared` or `full` (`lfpe.nn.causal_attention.CausalSelfAttention`).
    chunk_len, n_buckets, n_hashes: LSH settings.
    strictly_causal: LSH's sliding window (`lfpe.nn.lsh`), so that the bits per dim are an
      exact autoregressive likelihood; False is the Reformer paper's chunk pairs.
    rounds_at_once: LSH: every hash round in one pass, kept for the backward pass (the same
      numbers, faster at short lengths, n_hashes times the attention memory); False: one
      round at a time, recomputed (`lfpe.nn.lsh`).
    duplicate_correction: LSH: the Reformer paper's correction for keys found in several hash
      rounds (Appendix A; `lfpe.nn.lsh`); False (trax's, as 002 ran) counts them in each.
    ff_chunk_len: positions per feed-forward chunk (0: all at once).
    dropout: on the attention and feed-forward outputs.
    reversible, remat: the stack's backward pass (`lfpe.nn.reversible.ReversibleStack`).
    dtype: compute dtype of the layers; embeddings, positions and logits stay float32.
  """

  image_shape: tuple[int, int, int]
  vocab: int = 256
  width: int = 64
  channel_dim: int = 16
  depth: int = 2
  num_heads: int = 4
  mlp_dim: int = 128
  posemb: Any = "fourier"
  attention: str = "lsh"
  chunk_len: int = 32
  n_buckets: int = 4
  n_hashes: int = 2
  strictly_causal: bool = False
  rounds_at_once: bool = False
  duplicate_correction: bool = False
  ff_chunk_len: int = 0
  dropout: float = 0.0
  reversible: bool = True
  remat: bool = False
  dtype: str = "float32"

  def check(self) -> None:
    _check_fields(self)
    if encodings.kind(self.posemb) not in ("absolute", "none"):
      raise ValueError(
        f"model.posemb={self.posemb!r} is of kind {encodings.kind(self.posemb)!r}; the "
        "Reformer adds positions to its tokens: use an absolute encoding (e.g. 'fourier') "
        "or 'none'."
      )
    self._positions(parent=None)  # builds the encoding once: its own checks run here
    self._attention()._check(self.width)

  def _positions(self, **kwargs) -> PositionSource:
    h, w, _ = self.image_shape
    dim = self.width - self.channel_dim
    return PositionSource(self.posemb, (h, w), dim, self.num_heads, **kwargs)

  def _attention(self) -> CausalSelfAttention:
    return CausalSelfAttention(
      num_heads=self.num_heads,
      attention=self.attention,
      chunk_len=self.chunk_len,
      n_buckets=self.n_buckets,
      n_hashes=self.n_hashes,
      strictly_causal=self.strictly_causal,
      rounds_at_once=self.rounds_at_once,
      duplicate_correction=self.duplicate_correction,
      dropout=self.dropout,
      dtype=self.dtype,
      parent=None,
    )

  def setup(self):
    embed_init = nn.with_logical_partitioning(nn.initializers.normal(1.0), ("vocab", "embed"))
    self.token_embedding = nn.Embed(self.vocab, self.width, embedding_init=embed_init)
    self.positions = self._positions()
    channel_init = nn.with_logical_partitioning(nn.initializers.normal(0.02), (None, "embed"))
    shape = (self.image_shape[-1], self.channel_dim)
    self.channel_embedding = self.param("channel_embedding", channel_init, shape)
    self.layers = ReversibleStack(
      f=AttentionSublayer(attention=self._attention(), dtype=self.dtype, parent=None),
      g=ChunkedFeedForward(
        mlp_dim=self.mlp_dim,
        dropout=self.dropout,
        chunk_len=self.ff_chunk_len,
        dtype=self.dtype,
        parent=None,
      ),
      depth=self.depth,
      reversible=self.reversible,
      remat=self.remat,
    )
    self.final_norm = layer_norm("final_norm", jnp.float32)
    head_init = nn.with_logical_partitioning(nn.initializers.zeros, ("embed", "vocab"))
    self.head = nn.Dense(self.vocab, kernel_init=head_init)  # zero: uniform, log2(vocab) bits

  def position_vectors(self) -> Array:
    """`[L, width]`: the pixel encoding of each token beside its channel embedding."""
    h, w, c = self.image_shape
    hooks = self.positions((h, w))  # {} for posemb='none'
    pixels = hooks.get("add", jnp.zeros((h * w, self.width - self.channel_dim)))
    pixels = pixels.astype(jnp.float32)  # [H*W, width - channel_dim]
    pixels = jnp.repeat(pixels, c, axis=0)  # [L, width - channel_dim]
    channels = jnp.tile(jnp.asarray(self.channel_embedding, jnp.float32), (h * w, 1))
    return jnp.concatenate([pixels, channels], axis=-1)

  def __call__(self, tokens: Array, *, train: bool) -> Array:
    length = math.prod(self.image_shape)
    if tokens.shape[-1] != length:
      raise ValueError(
        f"Reformer: tokens of length {tokens.shape[-1]}, model.image_shape="
        f"{tuple(self.image_shape)} needs {length}."
      )
    x = jnp.pad(self.token_embedding(tokens)[:, :-1], ((0, 0), (1, 0), (0, 0)))  # shift right
    # The position of the token predicted. The residual streams stay in float32 (the sub-layers
    # compute in `dtype`): the reversible backward rebuilds each layer's inputs by subtraction,
    # and bfloat16 streams compounded its rounding down the stack (gradients 17 % off).
    x = (x + self.position_vectors()).astype(jnp.float32)
    y1, y2 = self.layers(x, x, key=self.make_rng("lsh"), deterministic=not train)
    y = self.final_norm(merge_streams(y1, y2, how="concat"))
    return self.head(y.astype(jnp.float32))


FIELDS = tuple(f.name for f in dataclasses.fields(Reformer) if f.name not in ("parent", "name"))


def Model(*, image_shape: Any, variant: str | None = None, **kwargs: Any) -> Reformer:
  """The Reformer of `config.model` in one call: `Model(image_shape=..., **config.model)`.

  `variant` (`'imagenet64'`, `'tiny'`) sets sizes once; explicit `kwargs` override them.
  """
  shown = ("variant", *FIELDS[1:])
  fields = variant_fields("Reformer", variant, VARIANTS, kwargs, FIELDS, shown)
  return Reformer(image_shape=tuple(image_shape), **fields)


def sample(model: Reformer, variables: Any, key: Array, num: int, temperature: float = 1.0):
  """`num` images `[num, H, W, C]` uint8 drawn token by token (one full forward per token).

  The hashing key is fixed for the whole draw, so every forward pass buckets alike. With LSH
  attention that is not `strictly_causal`, the positions not drawn yet (zeros here) take part
  in the sort that picks each query's chunk (lfpe/nn/lsh.py, "Causality"), so a draw follows
  a slightly different conditional than the teacher-forced one it was trained on; a
  `strictly_causal` model samples exactly what it scores.
  """
  length = math.prod(model.image_shape)
  hash_key, draw_key = jax.random.split(key)

  def step(t, tokens):
    logits = model.apply(variables, tokens, train=False, rngs={"lsh": hash_key})[:, t]
    new = jax.random.categorical(jax.random.fold_in(draw_key, t), logits / temperature)
    return tokens.at[:, t].set(new.astype(tokens.dtype))

  tokens = jax.lax.fori_loop(0, length, step, jnp.zeros((num, length), jnp.int32))
  return tokens.reshape(num, *model.image_shape).astype(jnp.uint8)


def _check_fields(model: Reformer) -> None:
  shape = model.image_shape
  if not (isinstance(shape, tuple) and len(shape) == 3 and all(map(positive_int, shape))):
    raise ValueError(f"image_shape must be (H, W, C) positive ints, got {shape!r}.")
  for key in ("vocab", "width", "channel_dim", "depth", "num_heads", "mlp_dim"):
    if not positive_int(getattr(model, key)):
      raise ValueError(f"model.{key} must be a positive int, got {getattr(model, key)!r}.")
  if model.channel_dim >= model.width:
    raise ValueError(
      f"model.channel_dim={model.channel_dim} must be below model.width={model.width}: "
      "the pixel encoding gets width - channel_dim channels (002: 1024 = 768 + 256)."
    )
  for key in ("strictly_causal", "rounds_at_once", "duplicate_correction", "reversible", "remat"):
    if not isinstance(getattr(model, key), bool):
      raise ValueError(f"model.{key} must be True or False, got {getattr(model, key)!r}.")
  if model.attention not in ATTENTIONS:
    raise ValueError(f"model.attention={model.attention!r} is unknown; use one of {ATTENTIONS}.")
  check_dtype(model)
  if not isinstance(model.ff_chunk_len, int) or model.ff_chunk_len < 0:
    raise ValueError(f"model.ff_chunk_len must be an int >= 0, got {model.ff_chunk_len!r}.")
