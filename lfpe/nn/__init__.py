"""lfpe.nn: attention with position hooks and the transformer blocks every model shares."""

from lfpe.nn.attention import Attention, attention_logits, attention_weights, make_mask
from lfpe.nn.causal_attention import CausalSelfAttention
from lfpe.nn.decoder import Decoder, DecoderBlock
from lfpe.nn.lsh import full_self_attention, lsh_self_attention
from lfpe.nn.patches import PatchEmbedding, resize_patch_kernel
from lfpe.nn.positions import (
  HOOKS,
  INJECTIONS,
  PositionSource,
  check_positions,
  resolve_injection,
)
from lfpe.nn.reversible import (
  ChunkedFeedForward,
  ReversibleStack,
  layer_keys,
  merge_streams,
  reversible_apply,
  reversible_inverse,
)
from lfpe.nn.transformer import NORMS, Encoder, EncoderBlock, MlpBlock

__all__ = [
  "HOOKS",
  "INJECTIONS",
  "NORMS",
  "Attention",
  "CausalSelfAttention",
  "ChunkedFeedForward",
  "Decoder",
  "DecoderBlock",
  "Encoder",
  "EncoderBlock",
  "MlpBlock",
  "PatchEmbedding",
  "PositionSource",
  "ReversibleStack",
  "attention_logits",
  "attention_weights",
  "check_positions",
  "full_self_attention",
  "layer_keys",
  "lsh_self_attention",
  "make_mask",
  "merge_streams",
  "resolve_injection",
  "reversible_apply",
  "reversible_inverse",
  "resize_patch_kernel",
]
