"""The fused attention call: `jax.nn.dot_product_attention`, on a GPU cuDNN's flash kernel,
with the lengths it refuses padded (`lfpe.nn.attention.Attention` and the Reformer's full
attention call it).

cuDNN's kernel refuses some lengths in training (odd ones: ViT's 197 tokens). Padding the
sequences at the end by the fewest tokens it takes, with the true lengths passed as its own
padding mask (`query_seq_lengths`, `key_value_seq_lengths`), is exact: the padded keys get no
weight and the padded queries are cut off. A boolean mask would not do: jax turns it into a
bias, the kernel's slower path.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

Array = jnp.ndarray


def _full_4d(x: Array | None, num_q: int, num_k: int) -> Array | None:
  """`x` broadcast to `[B|1, h|1, Nq, Nk]`: cuDNN wants the full query and key lengths."""
  if x is None:
    return None
  x = x.reshape((1,) * (4 - x.ndim) + x.shape)
  return jnp.broadcast_to(x, (*x.shape[:2], num_q, num_k))


# The paddings tried, in order, where cuDNN's kernel refuses a length: to an even length
# (in training cuDNN refuses odd ones: ViT's 197 tokens; 198 it takes, and runs faster than
# 256, benchmarks/attention_kernel.py on an H200), then to its tiles of 64 tokens.
CUDNN_PAD_MULTIPLES = (2, 64)


def on_gpu() -> bool:
  """Whether jax computes on a GPU (where cuDNN's kernel may take the call)."""
  return jax.default_backend() == "gpu"


def fused_attention(
  q: Array,
  k: Array,
  v: Array,
  bias: Array | None = None,
  mask: Array | None = None,
  is_causal: bool = False,
  implementation: str | None = None,
  pad_multiple: int | None = None,
  lengths: tuple[int, int] | None = None,
) -> Array:
  """`softmax(q kᵀ / sqrt(d) + bias) v` by `jax.nn.dot_product_attention`: `[B, Nq, h, dv]`.

  `q`, `k`: `[B, N, h, d]`, `v`: `[B, Nk, h, dv]` with `dv <= d` (v is zero-padded to `d`
  and the output cut back: concatenated position channels widen q and k only);
  `bias`, `mask` (True = may attend) broadcast to `[B, h, Nq, Nk]`. `implementation=None`
  tries cuDNN's kernel on a GPU, then, where cuDNN refuses the length (ViT's 197 tokens),
  cuDNN on q, k, v padded to a multiple of each of `CUDNN_PAD_MULTIPLES` in turn with the
  true lengths as its own padding mask (`query_seq_lengths`, `key_value_seq_lengths`: not a
  boolean mask, which jax turns into a bias, the slower path), and falls back to XLA's where
  cuDNN refuses the call (jax itself maps None to XLA's). `pad_multiple` takes the padded
  path whatever the backend (tests and benchmarks). `lengths`: q, k, v arrive padded at the
  end already, with these true (query, key) lengths (`Attention` pads its inputs); the
  padded queries' rows are returned, for the caller to cut. A `bias` or `mask` (relative
  tables, DETR's image padding) still goes in as a bias: cuDNN's slower path.
  """
  num_q, num_k, dv = q.shape[1], k.shape[1], v.shape[-1]
  q, k = q.astype(v.dtype), k.astype(v.dtype)
  v = jnp.pad(v, [(0, 0)] * 3 + [(0, q.shape[-1] - dv)])  # [B, Nk, h, d]
  mask = _full_4d(mask, num_q, num_k)

  def attend(impl: str, multiple: int | None = None) -> Array:
    return _attend(q, k, v, bias, mask, is_causal, impl, multiple, lengths)[..., :dv]

  if pad_multiple:
    return attend(implementation or "xla", pad_multiple)
  if implementation in (None, "cudnn") and on_gpu():
    for multiple in (None, *CUDNN_PAD_MULTIPLES):
      try:
        return attend("cudnn", multiple)
      except (NotImplementedError, ValueError, RuntimeError):  # dtype, shape, or no cuDNN
        if implementation == "cudnn" and multiple == CUDNN_PAD_MULTIPLES[-1]:
          raise
  return attend(implementation or "xla")


def _attend(q, k, v, bias, mask, is_causal: bool, implementation: str, multiple, lengths=None):
  """`jax.nn.dot_product_attention`; with `multiple`, on the sequences padded up to a multiple
  of it, the true lengths passed as the kernel's padding mask, the padded queries cut off;
  with `lengths`, q, k, v are padded already and these are the true lengths."""
  num_q, num_k = q.shape[1], k.shape[1]
  if multiple:
    lengths = lengths or (num_q, num_k)
    pad_q, pad_k = -num_q % multiple, -num_k % multiple
    q, k, v = pad_tokens(q, pad_q), pad_tokens(k, pad_k), pad_tokens(v, pad_k)
    logits = [(0, 0), (0, 0), (0, pad_q), (0, pad_k)]
    bias = None if bias is None else jnp.pad(_full_4d(bias, num_q, num_k), logits)
    mask = None if mask is None else jnp.pad(mask, logits, constant_values=False)
  seq_lengths = {}
  if lengths:
    batch = q.shape[0]
    seq_lengths = {
      "query_seq_lengths": jnp.full((batch,), lengths[0], jnp.int32),
      "key_value_seq_lengths": jnp.full((batch,), lengths[1], jnp.int32),
    }
  if implementation == "cudnn" and bias is not None:  # cuDNN: bias in the dtype of q
    bias = _full_4d(bias, q.shape[1], k.shape[1]).astype(q.dtype)
  out = jax.nn.dot_product_attention(
    q,
    k,
    v,
    bias,
    mask,
    scale=q.shape[-1] ** -0.5,
    is_causal=is_causal,
    implementation=implementation,
    **seq_lengths,
  )
  return out[:, :num_q]


def pad_tokens(x: Array, pad: int) -> Array:
  """`x` `[B, N, ...]` with `pad` zero tokens appended: `[B, N + pad, ...]`."""
  return jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2)) if pad else x


@functools.cache
def cudnn_padding(
  batch: int, num_q: int, num_k: int, heads: int, head_dim: int, dtype: str, is_causal: bool
) -> tuple[int, int] | None:
  """The fewest (query, key) tokens to append for cuDNN's fused kernel to take this call:
  `(0, 0)` where it takes it as it is, else to a multiple of each of `CUDNN_PAD_MULTIPLES` in
  turn; None where it takes none (not a GPU, float32, a head dim it lacks). Asked of the
  kernel itself, by tracing the call's gradient abstractly (`jax.eval_shape`), once per
  shape: jax checks what cuDNN takes in training (where it refuses more lengths) only when
  the call is differentiated."""
  shape = lambda n: jax.ShapeDtypeStruct((batch, n, heads, head_dim), dtype)
  for multiple in (1, *CUDNN_PAD_MULTIPLES):
    pads = (-num_q % multiple, -num_k % multiple)
    q, k = shape(num_q + pads[0]), shape(num_k + pads[1])
    if _cudnn_trains((q, k, k), is_causal, (num_q, num_k) if multiple > 1 else None):
      return pads
  return None


def _cudnn_trains(shapes, is_causal: bool, lengths: tuple[int, int] | None) -> bool:
  """Whether cuDNN's kernel takes a differentiated call on q, k, v of these shapes."""

  def loss(q, k, v):
    return jnp.sum(_attend(q, k, v, None, None, is_causal, "cudnn", None, lengths))

  try:
    jax.eval_shape(jax.grad(loss, (0, 1, 2)), *shapes)
  except (NotImplementedError, ValueError, RuntimeError):  # dtype, shape, or no cuDNN
    return False
  return True
