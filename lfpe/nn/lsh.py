"""Reformer's LSH self-attention (Kitaev et al. 2020) and dense attention with its conventions.

`lsh_self_attention`, per head and hash round:
1. hash: angular LSH of the unit-normalised shared qk, `bucket = argmax([xR, -xR])` with
   random rotations `R` `[d, n_buckets/2]` drawn from the explicit PRNG key;
2. sort the positions by (bucket, position) and cut the sorted sequence into chunks of
   `chunk_len`;
3. every chunk attends to itself and to the chunk before it (look-one-back; the first chunk
   to the last), a query only to keys of its own bucket, at positions <= its own if causal;
4. undo the sort; the rounds are weighted by the softmax over rounds of their log-sum-exp
   (each round's share of the total softmax mass).
Memory is `O(L * 2 chunk_len)` per head, never `O(L²)`: the rounds run one after another
(`lax.map`) and each is recomputed in the backward pass (`jax.checkpoint`). With
`rounds_at_once=True` every round runs in one pass and is kept for the backward pass: the
same numbers, `n_hashes` times the memory, a faster step at short lengths
(benchmarks/README.md, "Record steps").

Conventions shared with `full_self_attention(shared_qk=True)`, so that one bucket with at most
two chunks gives dense attention to float precision:
* keys are the L2-normalised qk, queries the qk as is; logits `q·k / sqrt(d)` in float32;
* a disallowed key gets `MASK_VALUE` and a query's own key `SELF_VALUE` (trax's values): a
  query attends to itself only when nothing else is allowed (the first position under causal
  attention). Both are finite, so a query whose keys are all masked gives finite numbers,
  never NaN;
* `mask` is `[B, L]` with True = valid token (`Attention`'s key_padding_mask is True = padding).

Causality: under causal attention a query never attends to a later position and gets no
gradient from one, but which earlier keys share its chunk depends on every position's bucket,
later ones included (the sort), as in the Reformer paper and trax: the output at t can change
when the inputs after t change, so a teacher-forced likelihood is not exactly autoregressive.
`strictly_causal=True` fixes this at no cost in memory: a query sees only the `chunk_len`
sorted positions before it (a sliding window in the (bucket, position) order, always inside
its chunk and the one before), i.e. the latest `chunk_len` earlier members of its bucket, a
set fixed by the positions <= t alone.
"""

from __future__ import annotations

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.nn.attention import IMPLEMENTATIONS
from lfpe.nn.fused import fused_attention

Array = jnp.ndarray
ATTENTIONS = ("lsh", "full_shared", "full")
MASK_VALUE = -1e9  # a key the query may not see
SELF_VALUE = -1e5  # the query's own key (shared QK): its last resort
_QKV_AXES = ("embed", "heads", "kv")
_OUT_AXES = ("heads", "kv", "embed")


def _unit(x: Array) -> Array:
  """`x / |x|` over the last axis (the shared-QK keys), in the dtype of `x`."""
  x32 = x.astype(jnp.float32)
  norm2 = jnp.maximum(jnp.sum(x32 * x32, axis=-1, keepdims=True), 1e-6)
  return (x32 * jax.lax.rsqrt(norm2)).astype(x.dtype)


def _attend(q: Array, k: Array, v: Array, allowed: Array, is_self: Array | None):
  """Masked softmax attention over the last two axes: `(out [..., q, d], lse [..., q])`.

  `allowed`, `is_self` broadcast to the logits `[..., q, k]`; disallowed keys get `MASK_VALUE`,
  the query's own key `SELF_VALUE`.
  """
  logits = jnp.einsum("...qd,...kd->...qk", q, k).astype(jnp.float32) * q.shape[-1] ** -0.5
  logits = jnp.where(allowed, logits, MASK_VALUE)
  if is_self is not None:
    logits = jnp.where(is_self, SELF_VALUE, logits)
  lse = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  out = jnp.einsum("...qk,...kd->...qd", jnp.exp(logits - lse).astype(v.dtype), v)
  return out, lse[..., 0]


def full_self_attention(
  q: Array,
  k: Array | None,
  v: Array,
  *,
  causal: bool = True,
  shared_qk: bool = False,
  mask: Array | None = None,
) -> Array:
  """Dense self-attention `[B, L, H, d]` with the conventions of `lsh_self_attention`.

  `q`, `k`, `v`: `[B, L, H, d]`; `mask`: `[B, L]`, True = valid token. With `shared_qk` the
  keys are the normalised `q` (`k` is ignored, may be None) and a query attends to itself
  only as a last resort, as in LSH attention: its reference. Memory is `O(L²)`.
  """
  length = q.shape[1]
  if shared_qk:
    k = _unit(q)
  pos = jnp.arange(length)
  allowed = jnp.ones((1, 1, length, length), bool)
  if mask is not None:
    allowed = allowed & mask.astype(bool)[:, None, None, :]
  if causal:
    allowed = allowed & (pos[None, :] <= pos[:, None])
  is_self = pos[:, None] == pos[None, :] if shared_qk else None
  q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # [B, H, L, d]
  out, _ = _attend(q, k, v, allowed, is_self)
  return out.transpose(0, 2, 1, 3)


def _check_lsh(
  chunk_len: int,
  n_buckets: int,
  n_hashes: int,
  where: str,
  causal: bool = True,
  strictly_causal: bool = False,
) -> None:
  if strictly_causal and not causal:
    raise ValueError(f"{where}: strictly_causal=True needs causal=True; set one of them.")
  if n_buckets < 1 or (n_buckets > 1 and n_buckets % 2):
    raise ValueError(
      f"{where}: n_buckets={n_buckets} must be 1 (one bucket) or even (angular LSH takes "
      "the argmax over [xR, -xR] with n_buckets/2 rotations); change n_buckets."
    )
  if chunk_len < 1:
    raise ValueError(f"{where}: chunk_len={chunk_len} must be >= 1; change chunk_len.")
  if n_hashes < 1:
    raise ValueError(f"{where}: n_hashes={n_hashes} must be >= 1; change n_hashes.")


def _rotations(key: Array, num_heads: int, dim: int, n_buckets: int, n_hashes: int) -> Array:
  """Random rotations `[H, n_hashes, d, n_buckets/2]`, one per head and hash round."""
  return jax.random.normal(key, (num_heads, n_hashes, dim, n_buckets // 2), jnp.float32)


def _hash(qk: Array, key: Array, n_buckets: int, n_hashes: int) -> Array:
  """Bucket of every position `[B, H, n_hashes, L]`: `argmax([xR, -xR])`, x = unit qk."""
  b, length, h, d = qk.shape
  if n_buckets == 1:
    return jnp.zeros((b, h, n_hashes, length), jnp.int32)
  rotations = _rotations(key, h, d, n_buckets, n_hashes)
  rotated = jnp.einsum("blhd,hrdk->bhrlk", _unit(qk.astype(jnp.float32)), rotations)
  return jnp.argmax(jnp.concatenate([rotated, -rotated], axis=-1), axis=-1).astype(jnp.int32)


def lsh_self_attention(
  qk: Array,
  v: Array,
  key: Array,
  *,
  chunk_len: int,
  n_buckets: int,
  n_hashes: int,
  causal: bool = True,
  mask: Array | None = None,
  strictly_causal: bool = False,
  rounds_at_once: bool = False,
) -> Array:
  """Reformer's LSH self-attention (module docstring) `[B, L, H, d]`.

  `qk`, `v`: `[B, L, H, d]`; `key`: the PRNG key of the rotations; `mask`: `[B, L]`, True =
  valid token. `L` is padded up to a multiple of `chunk_len` inside; the padding sorts after
  every bucket, is never attended to, and is cropped from the output. `strictly_causal`
  (needs `causal`): the sliding window of the module docstring instead of the paper's chunk
  pairs, so that the output at t does not depend on the inputs after t. `rounds_at_once`:
  all hash rounds in one pass, not one at a time recomputed in the backward pass.
  """
  _check_lsh(chunk_len, n_buckets, n_hashes, "lsh_self_attention", causal, strictly_causal)
  b, length, _, _ = qk.shape
  padded = -(-length // chunk_len) * chunk_len
  pad = padded - length
  valid = jnp.ones((b, length), bool) if mask is None else mask.astype(bool)
  valid = jnp.pad(valid, ((0, 0), (0, pad)))[:, None, None, :]  # [B, 1, 1, Lp]
  buckets = _hash(qk, key, n_buckets, n_hashes)  # [B, H, R, L]
  buckets = jnp.pad(buckets, ((0, 0),) * 3 + ((0, pad),), constant_values=n_buckets)
  qk, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (qk, v))
  attend = partial(
    _attend_rounds, chunk_len=chunk_len, causal=causal, strictly_causal=strictly_causal
  )
  if rounds_at_once:
    out, lse = attend(qk, v, valid, buckets)  # [B, H, R, Lp, d], [B, H, R, Lp]
  else:  # one round at a time, recomputed in the backward pass: memory of one round's chunks
    one_round = jax.checkpoint(lambda r: attend(qk, v, valid, r[:, :, None]))
    out, lse = jax.lax.map(one_round, jnp.moveaxis(buckets, 2, 0))
    out, lse = jnp.moveaxis(out[:, :, :, 0], 0, 2), jnp.moveaxis(lse[:, :, :, 0], 0, 2)
  # Over the rounds, as trax and reformer-pytorch do by default: a key found in several rounds
  # counts in each (the paper's Appendix A divides by how often it was found; not done here).
  weights = jax.nn.softmax(lse, axis=2)[..., None].astype(out.dtype)
  out = jnp.sum(weights * out, axis=2)  # [B, H, Lp, d]
  return out.transpose(0, 2, 1, 3)[:, :length]


def _attend_rounds(
  qk: Array,
  v: Array,
  valid: Array,
  buckets: Array,
  *,
  chunk_len: int,
  causal: bool,
  strictly_causal: bool,
) -> tuple[Array, Array]:
  """Steps 2-3 of the module docstring for padded `qk`, `v` `[B, Lp, H, d]`, `valid`
  `[B, 1, 1, Lp]` and `buckets` `[B, H, R, Lp]`: `(out [B, H, R, Lp, d], lse [B, H, R, Lp])`
  of every round, back in position order."""
  padded = qk.shape[1]
  num_chunks = padded // chunk_len
  order = jnp.argsort(buckets * padded + jnp.arange(padded), axis=-1, stable=True)

  def sort(x: Array) -> Array:  # [B, Lp, H, d] -> [B, H, R, Lp, d], sorted per round
    return jnp.take_along_axis(x.transpose(0, 2, 1, 3)[:, :, None], order[..., None], axis=3)

  def chunk(x: Array) -> Array:  # [B, H, R, Lp, ...] -> [B, H, R, chunks, chunk_len, ...]
    return x.reshape(*x.shape[:3], num_chunks, chunk_len, *x.shape[4:])

  def look_back(x: Array) -> Array:  # keys of a chunk: itself, then the chunk before it
    if num_chunks == 1:
      return x
    return jnp.concatenate([x, jnp.roll(x, 1, axis=3)], axis=4)

  q_pos = chunk(order)  # [B, H, R, chunks, chunk_len]
  q_bucket = chunk(jnp.take_along_axis(buckets, order, axis=-1))
  k_pos, k_bucket = look_back(q_pos), look_back(q_bucket)
  k_valid = look_back(chunk(jnp.take_along_axis(valid, order, axis=-1)))
  allowed = (q_bucket[..., :, None] == k_bucket[..., None, :]) & k_valid[..., None, :]
  if causal:
    allowed = allowed & (k_pos[..., None, :] <= q_pos[..., :, None])
  if strictly_causal:  # keys at most `chunk_len` sorted places back
    q_index = jnp.arange(padded).reshape(num_chunks, chunk_len)
    k_index = look_back(q_index[None, None, None])[0, 0, 0]  # chunk 0: the last one's
    allowed = allowed & ((q_index[:, :, None] - k_index[:, None, :]) % padded <= chunk_len)
  is_self = k_pos[..., None, :] == q_pos[..., :, None]
  q, k, vs = chunk(sort(qk)), look_back(chunk(sort(_unit(qk)))), look_back(chunk(sort(v)))
  out, lse = _attend(q, k, vs, allowed, is_self)  # [B, H, R, chunks, chunk_len, (d)]

  undo = jnp.argsort(order, axis=-1)  # [B, H, R, Lp]
  out = jnp.take_along_axis(out.reshape(*order.shape, -1), undo[..., None], axis=3)
  return out, jnp.take_along_axis(lse.reshape(order.shape), undo, axis=-1)


class CausalSelfAttention(nn.Module):
  """Multi-head self-attention of a Reformer-style model: LSH, or dense for reference.

  Attributes:
    num_heads: number of heads; the input width must be a multiple of it.
    attention: one of `ATTENTIONS`: 'lsh' (shared QK, `lsh_self_attention`), 'full_shared'
      (shared QK, dense) or 'full' (separate q and k, dense).
    implementation: 'full' only, one of `lfpe.nn.attention.IMPLEMENTATIONS`: None (fused:
      cuDNN's causal kernel on a GPU, any length, else XLA's), 'xla', 'cudnn', or 'explicit'
      (`full_self_attention`, which writes the `[B, h, L, L]` weights). A `mask` goes in as a
      bias (cuDNN's slower path). 'full_shared' has no fused path: its keys are the queries,
      and a query may see itself only as a last resort, which a fused kernel cannot express.
    chunk_len, n_buckets, n_hashes: the LSH settings (`lsh_self_attention`).
    causal: whether a position may only attend to positions <= its own.
    strictly_causal: LSH only: the sliding window that keeps the output at t independent of
      the inputs after t (`lsh_self_attention`); dense attention is strictly causal anyway.
    rounds_at_once: LSH only: every hash round in one pass (`lsh_self_attention`).
    dropout: dropout rate on the output (after the output projection).
    dtype: compute dtype of the projections (e.g. bfloat16); the softmax runs in float32.

  The hashing and dropout keys come only from the `key` argument, never `make_rng`, so that a
  reversible layer recomputing the forward pass draws the same buckets and dropout masks.
  """

  num_heads: int
  attention: str = "lsh"
  chunk_len: int = 64
  n_buckets: int = 8
  n_hashes: int = 2
  causal: bool = True
  strictly_causal: bool = False
  rounds_at_once: bool = False
  dropout: float = 0.0
  dtype: jnp.dtype | None = None
  implementation: str | None = None

  def _proj(self, name: str, x: Array, head_dim: int) -> Array:
    return nn.DenseGeneral(
      features=(self.num_heads, head_dim),
      dtype=self.dtype,
      kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), _QKV_AXES),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, _QKV_AXES[1:]),
      name=name,
    )(x)  # [B, L, h, d]

  def _check(self, width: int) -> None:
    if self.attention not in ATTENTIONS:
      raise ValueError(
        f"CausalSelfAttention: attention={self.attention!r} is unknown; use one of {ATTENTIONS}."
      )
    if self.implementation not in IMPLEMENTATIONS:
      raise ValueError(
        f"CausalSelfAttention: implementation={self.implementation!r} is unknown; use one of "
        f"{IMPLEMENTATIONS}."
      )
    _check_lsh(
      self.chunk_len,
      self.n_buckets,
      self.n_hashes,
      "CausalSelfAttention",
      self.causal,
      self.strictly_causal,
    )
    if width % self.num_heads:
      raise ValueError(
        f"CausalSelfAttention: the input width {width} must be a multiple of num_heads="
        f"{self.num_heads}; change the width or num_heads."
      )
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"CausalSelfAttention: dropout={self.dropout} must be in [0, 1).")

  @nn.compact
  def __call__(
    self, x: Array, *, key: Array | None, mask: Array | None = None, deterministic: bool = True
  ) -> Array:
    """Attend `x` `[B, L, D]` to itself; `[B, L, D]`.

    `key`: PRNG key split into the hashing and dropout keys (None only where neither is
    drawn: dense attention without dropout); `mask`: `[B, L]`, True = valid token.
    """
    width = x.shape[-1]
    self._check(width)
    drops = self.dropout > 0 and not deterministic
    if key is None and (self.attention == "lsh" or drops):
      raise ValueError(
        "CausalSelfAttention: pass key= (a PRNG key): LSH hashing and dropout draw from it."
      )
    hash_key, dropout_key = jax.random.split(key) if key is not None else (None, None)
    head_dim = width // self.num_heads
    v = self._proj("value", x, head_dim)
    if self.attention == "full":
      q, k = self._proj("query", x, head_dim), self._proj("key", x, head_dim)
      if self.implementation == "explicit":
        out = full_self_attention(q, k, v, causal=self.causal, mask=mask)
      else:
        keys = None if mask is None else mask.astype(bool)[:, None, None, :]
        out = fused_attention(
          q, k, v, mask=keys, is_causal=self.causal, implementation=self.implementation
        )
    elif self.attention == "full_shared":
      qk = self._proj("qk", x, head_dim)
      out = full_self_attention(qk, None, v, causal=self.causal, shared_qk=True, mask=mask)
    else:
      out = lsh_self_attention(
        self._proj("qk", x, head_dim),
        v,
        hash_key,
        chunk_len=self.chunk_len,
        n_buckets=self.n_buckets,
        n_hashes=self.n_hashes,
        causal=self.causal,
        mask=mask,
        strictly_causal=self.strictly_causal,
        rounds_at_once=self.rounds_at_once,
      )
    out = nn.DenseGeneral(
      features=width,
      axis=(-2, -1),
      dtype=self.dtype,
      kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), _OUT_AXES),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
      name="out",
    )(out)
    return nn.Dropout(rate=self.dropout)(out, deterministic=not drops, rng=dropout_key)
