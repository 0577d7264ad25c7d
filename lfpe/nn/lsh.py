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

A key found in several rounds counts once per round by default, as in trax's
`LSHSelfAttention` (the code 002's Reformer runs used) and reformer-pytorch
(`allow_duplicate_attention=True`). `duplicate_correction=True` is the Reformer paper's
Appendix A: each round's logit of key j for query i is lowered by `log N_ij`, N_ij the number
of rounds whose key set holds j, so that the output is the softmax over the union of the
rounds' key sets (tested against that union, built from the buckets in numpy). It costs
`n_hashes` comparisons per logit.
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

import jax
import jax.numpy as jnp

Array = jnp.ndarray
MASK_VALUE = -1e9  # a key the query may not see
SELF_VALUE = -1e5  # the query's own key (shared QK): its last resort


def _unit(x: Array) -> Array:
  """`x / |x|` over the last axis (the shared-QK keys), in the dtype of `x`."""
  x32 = x.astype(jnp.float32)
  norm2 = jnp.maximum(jnp.sum(x32 * x32, axis=-1, keepdims=True), 1e-6)
  return (x32 * jax.lax.rsqrt(norm2)).astype(x.dtype)


def _attend(
  q: Array, k: Array, v: Array, allowed: Array, is_self: Array | None, bias: Array | None = None
):
  """Masked softmax attention over the last two axes: `(out [..., q, d], lse [..., q])`.

  `allowed`, `is_self`, `bias` broadcast to the logits `[..., q, k]`; disallowed keys get
  `MASK_VALUE`, the query's own key `SELF_VALUE`; then `bias` is added.
  """
  logits = jnp.einsum("...qd,...kd->...qk", q, k, preferred_element_type=jnp.float32)
  logits = logits * q.shape[-1] ** -0.5  # float32 (accumulated, never rounded to bfloat16)
  logits = jnp.where(allowed, logits, MASK_VALUE)
  if is_self is not None:
    logits = jnp.where(is_self, SELF_VALUE, logits)
  if bias is not None:
    logits = logits + bias
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


def check_lsh(
  chunk_len: int,
  n_buckets: int,
  n_hashes: int,
  where: str,
  causal: bool = True,
  strictly_causal: bool = False,
) -> None:
  """Names the LSH setting that cannot work (`where`: the caller, for the message)."""
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
  duplicate_correction: bool = False,
) -> Array:
  """Reformer's LSH self-attention (module docstring) `[B, L, H, d]`.

  `qk`, `v`: `[B, L, H, d]`; `key`: the PRNG key of the rotations; `mask`: `[B, L]`, True =
  valid token. `L` is padded up to a multiple of `chunk_len` inside; the padding sorts after
  every bucket, is never attended to, and is cropped from the output. `strictly_causal`
  (needs `causal`): the sliding window of the module docstring instead of the paper's chunk
  pairs, so that the output at t does not depend on the inputs after t. `rounds_at_once`:
  all hash rounds in one pass, not one at a time recomputed in the backward pass.
  `duplicate_correction`: the paper's `log N_ij` (module docstring; a no-op for one round).
  """
  check_lsh(chunk_len, n_buckets, n_hashes, "lsh_self_attention", causal, strictly_causal)
  b, length, _, _ = qk.shape
  padded = -(-length // chunk_len) * chunk_len
  pad = padded - length
  valid = jnp.ones((b, length), bool) if mask is None else mask.astype(bool)
  valid = jnp.pad(valid, ((0, 0), (0, pad)))[:, None, None, :]  # [B, 1, 1, Lp]
  buckets = _hash(qk, key, n_buckets, n_hashes)  # [B, H, R, L]
  buckets = jnp.pad(buckets, ((0, 0),) * 3 + ((0, pad),), constant_values=n_buckets)
  qk, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (qk, v))
  found = None  # every round's bucket and sorted place of each position, for N_ij
  if duplicate_correction and n_hashes > 1:
    found = (buckets, jnp.argsort(_sort_order(buckets), axis=-1))
  attend = partial(
    _attend_rounds,
    chunk_len=chunk_len,
    causal=causal,
    strictly_causal=strictly_causal,
    found=found,
  )
  if rounds_at_once:
    out, lse = attend(qk, v, valid, buckets)  # [B, H, R, Lp, d], [B, H, R, Lp]
  else:  # one round at a time, recomputed in the backward pass: memory of one round's chunks
    one_round = jax.checkpoint(lambda r: attend(qk, v, valid, r[:, :, None]))
    out, lse = jax.lax.map(one_round, jnp.moveaxis(buckets, 2, 0))
    out, lse = jnp.moveaxis(out[:, :, :, 0], 0, 2), jnp.moveaxis(lse[:, :, :, 0], 0, 2)
  # Each round's share of the softmax mass (with the correction: of the union's mass).
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
  found: tuple[Array, Array] | None,
) -> tuple[Array, Array]:
  """Steps 2-3 of the module docstring for padded `qk`, `v` `[B, Lp, H, d]`, `valid`
  `[B, 1, 1, Lp]` and `buckets` `[B, H, R, Lp]`: `(out [B, H, R, Lp, d], lse [B, H, R, Lp])`
  of every round, back in position order. `found`: every round's buckets and sorted places
  `[B, H, n_hashes, Lp]` for the duplicate correction (`_times_found`), or None."""
  padded = qk.shape[1]
  num_chunks = padded // chunk_len
  order = _sort_order(buckets)

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
  bias = None
  if found is not None:
    times = _times_found(q_pos, k_pos, *found, chunk_len=chunk_len, strictly=strictly_causal)
    bias = -jnp.log(jnp.maximum(times, 1.0))
  out, lse = _attend(q, k, vs, allowed, is_self, bias)  # [B, H, R, chunks, chunk_len, (d)]

  undo = jnp.argsort(order, axis=-1)  # [B, H, R, Lp]
  out = jnp.take_along_axis(out.reshape(*order.shape, -1), undo[..., None], axis=3)
  return out, jnp.take_along_axis(lse.reshape(order.shape), undo, axis=-1)


def _sort_order(buckets: Array) -> Array:
  """Positions sorted by (bucket, position), per round: `[B, H, R, Lp]`."""
  padded = buckets.shape[-1]
  return jnp.argsort(buckets * padded + jnp.arange(padded), axis=-1, stable=True)


def _times_found(
  q_pos: Array, k_pos: Array, buckets: Array, places: Array, *, chunk_len: int, strictly: bool
) -> Array:
  """The paper's N_ij: in how many rounds key `k_pos` is in query `q_pos`'s key set, float32
  `[B, H, R, chunks, chunk_len, keys]` for `q_pos` `[..., chunk_len]` and `k_pos` `[..., keys]`.

  In a round, j is in i's set when they share a bucket and j's sorted place is in i's chunk or
  the one before it (`strictly`: at most `chunk_len` places before i's); causality and padding
  are the same in every round and stay with the caller's mask. `buckets`, `places`:
  `[B, H, n_hashes, Lp]`, every round's bucket and sorted place of each position.
  """
  padded = buckets.shape[-1]
  num_chunks = padded // chunk_len
  times = jnp.zeros((*q_pos.shape, k_pos.shape[-1]), jnp.float32)
  for r in range(buckets.shape[2]):

    def at(x: Array, pos: Array, r: int = r) -> Array:  # x[b, h, r, pos[b, h, ...]]
      flat = jnp.take_along_axis(x[:, :, r], pos.reshape(*pos.shape[:2], -1), axis=-1)
      return flat.reshape(pos.shape)

    q_place, k_place = at(places, q_pos)[..., :, None], at(places, k_pos)[..., None, :]
    seen = at(buckets, q_pos)[..., :, None] == at(buckets, k_pos)[..., None, :]
    if num_chunks > 1:
      seen &= (q_place // chunk_len - k_place // chunk_len) % num_chunks <= 1
    if strictly:
      seen &= (q_place - k_place) % padded <= chunk_len
    times = times + seen
  return times
