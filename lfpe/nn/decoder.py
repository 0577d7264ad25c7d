"""DETR's transformer decoder: blocks with object-query and memory positions, and the stack.

Positions follow DETR (001 Sec. 4.2; DETR's `TransformerDecoderLayer`): the object queries'
positions `query_pos` are added to the queries and keys of self-attention and to the queries
of cross-attention; the memory's positions `memory_pos` to the keys of cross-attention only.
Values never receive positions. Blocks are pre-LN or post-LN (`norm`, see
`lfpe.nn.transformer.residual`); the stack applies one shared final LayerNorm to every
layer's output, which DETR's auxiliary losses read.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe.checked import Checked
from lfpe.nn.attention import Attention
from lfpe.nn.transformer import MlpBlock, check_activation, check_norm, layer_norm, residual

Array = jnp.ndarray


class DecoderBlock(nn.Module):
  """Self-attention, cross-attention to `memory`, MLP; each a `residual` sub-layer."""

  num_heads: int
  mlp_dim: int
  dropout: float = 0.0
  attention_dropout: float = 0.0
  causal: bool = False
  norm: str = "pre"
  dtype: Any = None
  activation: str = "gelu"

  def _attention(self, name: str) -> Attention:
    return Attention(
      num_heads=self.num_heads, dropout=self.attention_dropout, dtype=self.dtype, name=name
    )

  @nn.compact
  def __call__(
    self,
    x: Array,
    memory: Array,
    *,
    query_pos: Array | None = None,
    memory_pos: Array | None = None,
    memory_padding_mask: Array | None = None,
    self_attention_bias: Array | None = None,
    deterministic: bool = True,
  ) -> Array:
    """`x` `[B, Nq, D]`, `memory` `[B, Nk, D]` (True in `memory_padding_mask` = padding).

    `query_pos` is `[(B,) Nq, D]`, `memory_pos` `[(B,) Nk, D]`; `self_attention_bias` is
    added to the self-attention logits (broadcast to `[B, h, Nq, Nq]`; e.g. Group DETR's
    block mask). Returns `[B, Nq, D]`.
    """
    self_attention = lambda y: self._attention("self_attention")(
      y,
      pos_q=query_pos,
      pos_k=query_pos,
      logit_bias=self_attention_bias,
      causal=self.causal,
      deterministic=deterministic,
    )
    cross_attention = lambda y: self._attention("cross_attention")(
      y,
      memory,
      pos_q=query_pos,
      pos_k=memory_pos,
      key_padding_mask=memory_padding_mask,
      deterministic=deterministic,
    )
    mlp = lambda y: MlpBlock(
      mlp_dim=self.mlp_dim,
      dropout=self.dropout,
      dtype=self.dtype,
      activation=self.activation,
      name="mlp",
    )(y, deterministic)
    sub = dict(norm=self.norm, dropout=self.dropout, deterministic=deterministic, dtype=self.dtype)
    x = residual(x, self_attention, name="norm1", **sub)
    x = residual(x, cross_attention, name="norm2", **sub)
    return residual(x, mlp, name="norm3", **sub)


class Decoder(Checked, nn.Module):
  """`depth` `DecoderBlock`s; every layer's output through the shared `decoder_norm`.

  `__call__(x [B, Nq, D], memory [B, Nk, D], ...) -> [depth, B, Nq, D]`: entry `l` is
  `decoder_norm(output of block l)` (DETR's `return_intermediate`), the last one is the
  decoder's output. Keyword arguments are those of `DecoderBlock`.
  """

  depth: int
  num_heads: int
  mlp_dim: int
  dropout: float = 0.0
  attention_dropout: float = 0.0
  causal: bool = False
  norm: str = "pre"
  dtype: Any = None
  activation: str = "gelu"

  def check(self) -> None:
    check_norm(self.norm, "Decoder")
    check_activation(self.activation, "Decoder")
    if not isinstance(self.depth, int) or isinstance(self.depth, bool) or self.depth < 1:
      raise ValueError(f"Decoder: depth={self.depth!r} must be a positive int.")

  @nn.compact
  def __call__(
    self,
    x: Array,
    memory: Array,
    *,
    query_pos: Array | None = None,
    memory_pos: Array | None = None,
    memory_padding_mask: Array | None = None,
    self_attention_bias: Array | None = None,
    deterministic: bool = True,
  ) -> Array:
    final_norm = layer_norm("decoder_norm", self.dtype)
    outputs = []
    for i in range(self.depth):
      x = DecoderBlock(
        num_heads=self.num_heads,
        mlp_dim=self.mlp_dim,
        dropout=self.dropout,
        attention_dropout=self.attention_dropout,
        causal=self.causal,
        norm=self.norm,
        dtype=self.dtype,
        activation=self.activation,
        name=f"decoderblock_{i}",
      )(
        x,
        memory,
        query_pos=query_pos,
        memory_pos=memory_pos,
        memory_padding_mask=memory_padding_mask,
        self_attention_bias=self_attention_bias,
        deterministic=deterministic,
      )
      outputs.append(final_norm(x))
    return jnp.stack(outputs)  # [L, B, Nq, D]
