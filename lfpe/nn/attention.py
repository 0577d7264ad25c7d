"""Multi-head attention with position hooks: every place a position can enter attention.

One module covers the position studies of the papers as call arguments, not forks:
* `pos_q`, `pos_k`, `pos_v`: absolute positions added to the *inputs* of the query, key and
  value projections (DETR's convention, `q = (x + pos) W_q`; DETR adds to q and k only, the
  Gabor paper's "Plus" (000 Table 4) to any of q, k, v);
* `concat_q`, `concat_k`: position channels concatenated to every head's q and k after the
  projection, so that `q kᵀ = q¹k¹ᵀ + pos_q² pos_k²ᵀ` (000 Eq. 13, Fig. 11);
* `logit_bias`: a bias added to the logits (relative position table, Swin);
* `relative`: a callable of the projected q giving extra logits (2-D relative attention,
  003 Eq. 2); it receives `q / sqrt(d)`, so the logits are `(q·k + q·r) / sqrt(d)` (the
  content and relative terms scaled alike, as HaloNet / Bello et al.; 003 Eq. 2 scales
  neither);
* `rope`: a callable applied to the projected q and k (rotary embeddings);
* `key_padding_mask` (True = padding, DETR's convention) and `causal` masks.

Two paths compute the same attention (`Attention.implementation`):
* fused: `jax.nn.dot_product_attention`, the bias hooks (`logit_bias`, `relative`) as its
  `bias`, the masks as its `mask` / `is_causal`; on a GPU cuDNN's flash-attention kernel
  where it takes the shapes and dtypes (bf16/fp16, head dim a multiple of 8, ...); where it
  refuses the length (in training an odd one, such as ViT's 197 tokens), cuDNN's kernel on
  the sequences padded by the fewest tokens it takes (to an even length, else a multiple of
  64) with the true lengths as its own padding mask (exact: the padded keys get no weight,
  the padded queries are cut off; `lfpe.nn.fused`); else XLA's. Without per-token hooks
  after the projections (rope, concatenated channels, biases, masks) the *inputs* are
  padded, before the q, k, v projections, and the output cut after the out-projection, so
  that XLA fuses the padding into the layer norm before and the residual add after,
  instead of copying q, k, v and the output (and their gradients) in every layer. The
  attention weights are never materialised by cuDNN's kernel. A `logit_bias`, `relative`
  term or mask enters cuDNN as a bias, its slower path.
* explicit: logits, softmax and weights as arrays; taken whenever something needs the
  weights: sowing them (`mutable=['intermediates']`, attention maps) and attention dropout
  in training (`jax.nn.dot_product_attention` applies no dropout).

Logits are `q·k / sqrt(d)` with `d` the length of the vectors being multiplied, so with
concatenated channels `d = head_dim + c` (Eq. 13 makes `[q¹, pos_q²]` the query).
The logits (accumulated in float32, not rounded to the compute dtype) and the softmax are
float32 whatever the compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

from lfpe.nn import fused

Array = jnp.ndarray
# None: fused, cuDNN's kernel where it applies (GPU) else XLA's; 'xla', 'cudnn': that
# implementation of jax.nn.dot_product_attention ('cudnn' raises where it does not apply);
# 'explicit': the weights as arrays (always taken when they are needed).
IMPLEMENTATIONS = (None, "xla", "cudnn", "explicit")
_QKV_AXES = ("embed", "heads", "kv")
_OUT_AXES = ("heads", "kv", "embed")


def make_mask(key_padding_mask: Array | None, causal: bool, num_q: int, num_k: int) -> Array | None:
  """Boolean attention mask `[B|1, 1, Nq, Nk]`, True = may attend; None if nothing is masked.

  `key_padding_mask` is `[B, Nk]` with True at padded keys. The causal mask lets query `i`
  see keys `j <= i + (Nk - Nq)`, i.e. the last query is aligned with the last key.
  """
  mask = None
  if key_padding_mask is not None:
    if key_padding_mask.ndim != 2 or key_padding_mask.shape[1] != num_k:
      raise ValueError(
        f"key_padding_mask must be [B, Nk={num_k}] (True = padding), got shape "
        f"{tuple(key_padding_mask.shape)}."
      )
    mask = ~key_padding_mask.astype(bool)[:, None, None, :]  # [B, 1, 1, Nk]
  if causal:
    tri = jnp.tril(jnp.ones((num_q, num_k), bool), k=num_k - num_q)[None, None]
    mask = tri if mask is None else mask & tri
  return mask


def attention_logits(
  q: Array, k: Array, bias: Array | None = None, mask: Array | None = None
) -> Array:
  """`q kᵀ / sqrt(d) + bias`, masked entries set to the float32 minimum; `[B, h, Nq, Nk]`.

  `q`: `[B, Nq, h, d]`, `k`: `[B, Nk, h, d]`; `bias` broadcasts to the logits.
  """
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
  logits = logits * q.shape[-1] ** -0.5  # float32 (accumulated, never rounded to bfloat16)
  if bias is not None:
    logits = logits + bias.astype(jnp.float32)
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  return logits


def attention_weights(
  q: Array, k: Array, bias: Array | None = None, mask: Array | None = None
) -> Array:
  """`softmax(q kᵀ / sqrt(d) + bias)` over keys, float32 `[B, h, Nq, Nk]`.

  A query whose keys are all masked gets uniform weights (never NaN).
  """
  return nn.softmax(attention_logits(q, k, bias, mask), axis=-1)


def _concat_channels(x: Array, channels: Array | None, name: str) -> Array:
  """Concatenate position channels `[N, h, c]` or `[B, N, h, c]` to `x` `[B, N, h, d]`."""
  if channels is None:
    return x
  if channels.ndim not in (3, 4) or channels.shape[-3:-1] != x.shape[1:3]:
    raise ValueError(
      f"{name} must be [N, heads, c] or [B, N, heads, c] with N, heads = "
      f"{x.shape[1:3]}, got shape {tuple(channels.shape)}."
    )
  channels = jnp.broadcast_to(channels, (*x.shape[:3], channels.shape[-1])).astype(x.dtype)
  return jnp.concatenate([x, channels], axis=-1)


def _check_concat(concat_q: Array | None, concat_k: Array | None) -> None:
  if (concat_q is None) != (concat_k is None) or (
    concat_q is not None and concat_q.shape[-1] != concat_k.shape[-1]
  ):
    raise ValueError(
      "Attention: pass concat_q and concat_k together, with the same number "
      "of channels c (000 Eq. 13 concatenates to both q and k)."
    )


def _position_terms(q, k, concat_q, concat_k, logit_bias, relative, rope):
  """Apply the hooks that act after the projections: `(q, k, logit bias)` for the logits."""
  _check_concat(concat_q, concat_k)
  bias = logit_bias
  if relative is not None:  # scaled like q·k: logits (q·k + q·r) / sqrt(d)
    d = q.shape[-1] + (0 if concat_q is None else concat_q.shape[-1])
    rel = relative(q * jnp.asarray(d**-0.5, q.dtype))  # [B, h, Nq, Nk]
    bias = rel if bias is None else bias + rel
  if rope is not None:
    q, k = rope(q), rope(k)
  q = _concat_channels(q, concat_q, "concat_q")  # [B, Nq, h, d + c]
  k = _concat_channels(k, concat_k, "concat_k")  # [B, Nk, h, d + c]
  return q, k, bias


def _add(x: Array, pos: Array | None) -> Array:
  return x if pos is None else x + pos.astype(x.dtype)


class Attention(nn.Module):
  """Multi-head (self or cross) attention with the position hooks of the module docstring.

  Attributes:
    num_heads: number of heads; `qkv_features` must be a multiple of it.
    qkv_features: width of q, k, v (all heads); defaults to the query input width.
    out_features: output width; defaults to the query input width.
    dropout: dropout rate on the attention weights.
    dtype: compute dtype (e.g. bfloat16); parameters stay in `param_dtype`.
    implementation: one of `IMPLEMENTATIONS`: the fused path (None: cuDNN's kernel where
      it applies, else XLA's; or 'xla', 'cudnn') or 'explicit' (benchmarks time both).
    pad_multiple: pad the inputs' tokens to a multiple of this before the projections, on
      any backend (tests, benchmarks); None: on a GPU, as few as cuDNN's kernel needs
      (`fused.cudnn_padding`). Either way only on the fused path, where no per-token hook
      (rope, concatenated channels, biases, masks) acts after the projections.

  Applied with `mutable=['intermediates']`, the attention weights `[B, h, Nq, Nk]` are sown
  into `intermediates/attention_weights` (attention maps); this takes the explicit path.
  """

  num_heads: int
  qkv_features: int | None = None
  out_features: int | None = None
  dropout: float = 0.0
  dtype: jnp.dtype | None = None
  param_dtype: jnp.dtype = jnp.float32
  implementation: str | None = None
  pad_multiple: int | None = None

  def _proj(self, name: str, x: Array, head_dim: int) -> Array:
    return nn.DenseGeneral(
      features=(self.num_heads, head_dim),
      dtype=self.dtype,
      param_dtype=self.param_dtype,
      kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), _QKV_AXES),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, _QKV_AXES[1:]),
      name=name,
    )(x)  # [B, N, h, d]

  @nn.compact
  def __call__(
    self,
    inputs_q: Array,
    inputs_kv: Array | None = None,
    *,
    pos_q: Array | None = None,
    pos_k: Array | None = None,
    pos_v: Array | None = None,
    concat_q: Array | None = None,
    concat_k: Array | None = None,
    logit_bias: Array | None = None,
    relative: Callable[[Array], Array] | None = None,
    rope: Callable[[Array], Array] | None = None,
    key_padding_mask: Array | None = None,
    causal: bool = False,
    deterministic: bool = True,
  ) -> Array:
    """Attend from `inputs_q` `[B, Nq, D]` to `inputs_kv` `[B, Nk, D]` (itself if None).

    `pos_*` are `[N, D]` or `[B, N, D]`; `logit_bias` broadcasts to `[B, h, Nq, Nk]`;
    `relative(q / sqrt(d) [B, Nq, h, d]) -> [B, h, Nq, Nk]`; `rope(x [B, N, h, d]) -> same shape`.
    Returns `[B, Nq, out_features]`.
    """
    if self.implementation not in IMPLEMENTATIONS:
      raise ValueError(
        f"Attention: implementation={self.implementation!r} is unknown; use one of "
        f"{IMPLEMENTATIONS}."
      )
    inputs_kv = inputs_q if inputs_kv is None else inputs_kv
    features = self.qkv_features or inputs_q.shape[-1]
    if features % self.num_heads:
      raise ValueError(
        f"Attention: qkv_features={features} must be a multiple of num_heads="
        f"{self.num_heads}; change the width or the number of heads."
      )
    head_dim = features // self.num_heads
    num_q, num_k = inputs_q.shape[1], inputs_kv.shape[1]
    is_causal = causal and num_q == num_k  # jax's causal mask aligns first query, first key
    hooks_after = (concat_q, concat_k, logit_bias, relative, rope, key_padding_mask)
    needs_weights, pads = self._needs_weights(deterministic), (0, 0)
    if not needs_weights and all(h is None for h in hooks_after):
      if causal == is_causal:
        pads = self._input_padding(num_q, num_k, head_dim, inputs_q.dtype, is_causal)
    pad = lambda x, pos, n: fused.pad_tokens(_add(x, pos), n)  # positions first: they have N rows
    q = self._proj("query", pad(inputs_q, pos_q, pads[0]), head_dim)  # [B, Nq(+pad), h, d]
    k = self._proj("key", pad(inputs_kv, pos_k, pads[1]), head_dim)  # [B, Nk(+pad), h, d]
    v = self._proj("value", pad(inputs_kv, pos_v, pads[1]), head_dim)  # [B, Nk(+pad), h, d]
    q, k, bias = _position_terms(q, k, concat_q, concat_k, logit_bias, relative, rope)
    if needs_weights:
      mask = make_mask(key_padding_mask, causal, num_q, num_k)
      out = self._explicit(q, k, v, bias, mask, deterministic)  # [B, Nq, h, d]
    else:
      mask = make_mask(key_padding_mask, causal and not is_causal, num_q, num_k)
      lengths = (num_q, num_k) if any(pads) else None
      out = fused.fused_attention(
        q, k, v, bias, mask, is_causal, self.implementation, lengths=lengths
      )
    out = nn.DenseGeneral(
      features=self.out_features or inputs_q.shape[-1],
      axis=(-2, -1),
      dtype=self.dtype,
      param_dtype=self.param_dtype,
      kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), _OUT_AXES),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
      name="out",
    )(out)
    return out[:, :num_q]  # the padded queries' rows cut off (a no-op without padding)

  def _input_padding(self, num_q: int, num_k: int, head_dim: int, dtype, is_causal: bool):
    """(query, key) tokens to append to the inputs: to `pad_multiple`, or on a GPU as few as
    cuDNN's kernel takes (`fused.cudnn_padding`); (0, 0) where nothing is gained."""
    if self.pad_multiple:
      return -num_q % self.pad_multiple, -num_k % self.pad_multiple
    if self.implementation not in (None, "cudnn") or not fused.on_gpu():
      return 0, 0
    dtype = jnp.dtype(self.dtype or jnp.result_type(dtype, self.param_dtype)).name
    shape = (1, num_q, num_k, self.num_heads, head_dim, dtype, is_causal)
    return fused.cudnn_padding(*shape) or (0, 0)

  def _needs_weights(self, deterministic: bool) -> bool:
    """Whether the weights must exist as an array: sown, dropped out, or asked for."""
    return (
      self.implementation == "explicit"
      or self.is_mutable_collection("intermediates")
      or (self.dropout > 0 and not deterministic)
    )

  def _explicit(self, q, k, v, bias, mask, deterministic: bool) -> Array:
    """`weights v` with the weights `[B, h, Nq, Nk]` as an array (sown, dropped out)."""
    weights = attention_weights(q, k, bias, mask)  # [B, h, Nq, Nk]
    self.sow("intermediates", "attention_weights", weights)
    weights = nn.Dropout(self.dropout)(weights, deterministic=deterministic)
    # In [B, h, Nq, d] order, then transposed: a vmapped `...->bqhd` einsum runs 3-6x slower
    # on XLA:CPU (benchmarks/README.md, position study).
    out = jnp.einsum("bhqk,bhkd->bhqd", weights.astype(v.dtype), v.transpose(0, 2, 1, 3))
    return out.transpose(0, 2, 1, 3)  # [B, Nq, h, d]
