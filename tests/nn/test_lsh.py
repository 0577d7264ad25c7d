"""LSH self-attention against dense shared-QK attention (one bucket) and a numpy reference
that builds every query's key set from the buckets; masks, causality, keys; the module."""

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.nn import lsh as lsh_lib
from lfpe.nn.causal_attention import ATTENTIONS, CausalSelfAttention
from lfpe.nn.lsh import full_self_attention, lsh_self_attention

B, H, HD = 2, 2, 4
_jit_lsh = jax.jit(
  lsh_self_attention,
  static_argnames=(
    "chunk_len",
    "n_buckets",
    "n_hashes",
    "causal",
    "strictly_causal",
    "rounds_at_once",
    "duplicate_correction",
  ),
)


def _qkv(length, seed=0):
  rng = np.random.default_rng(seed)
  return tuple(jnp.asarray(rng.normal(size=(B, length, H, HD)), jnp.float32) for _ in range(2))


def _lsh(qk, v, seed=0, **kwargs):
  kwargs = {"chunk_len": 4, "n_buckets": 4, "n_hashes": 2, **kwargs}
  return _jit_lsh(qk, v, jax.random.key(seed), **kwargs)


@pytest.mark.parametrize("n_hashes", [1, 2])
@pytest.mark.parametrize("chunk_len", [6, 12, 15])  # two chunks, one, one padded
def test_one_bucket_equals_dense_shared_qk(n_hashes, chunk_len):
  qk, v = _qkv(12)
  fn = jax.jit(partial(lsh_self_attention, chunk_len=chunk_len, n_buckets=1, n_hashes=n_hashes))
  dense = full_self_attention(qk, qk, v, shared_qk=True)
  np.testing.assert_allclose(fn(qk, v, jax.random.key(0)), dense, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("length", [8, 7])  # a multiple of chunk_len and not
def test_lengths_pad_to_chunks_and_match_dense(length, causal):
  qk, v = _qkv(length, seed=1)
  mask = jnp.ones((B, length), bool).at[1, 2].set(False)
  out = _lsh(qk, v, n_buckets=1, causal=causal, mask=mask)
  dense = full_self_attention(qk, None, v, causal=causal, shared_qk=True, mask=mask)
  assert out.shape == (B, length, H, HD)
  np.testing.assert_allclose(out, dense, atol=1e-5)


def test_first_position_attends_only_to_itself_under_causal_attention():
  qk, v = _qkv(12)
  np.testing.assert_allclose(_lsh(qk, v)[:, 0], v[:, 0], atol=1e-6)


def test_later_values_do_not_reach_earlier_outputs_nor_their_gradients():
  """Causal: position t never sees v or qk after t (no change, zero gradient).

  Later qk may still move chunk boundaries (the sort), so changing it is not tested here.
  """
  qk, v = _qkv(16, seed=2)
  t = 6
  out = _lsh(qk, v)
  out_changed = _lsh(qk, v.at[:, t + 1 :].add(5.0))
  np.testing.assert_array_equal(out[:, : t + 1], out_changed[:, : t + 1])
  loss = lambda qk, v: jnp.sum(_lsh(qk, v)[:, : t + 1] ** 2)
  grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(qk, v)
  for g in grads:
    assert np.all(np.isfinite(g)) and np.abs(g[:, : t + 1]).max() > 0
    np.testing.assert_array_equal(g[:, t + 1 :], 0.0)


@pytest.mark.parametrize("causal", [True, False])
def test_masked_keys_get_no_weight_and_nothing_is_nan(causal):
  qk, v = _qkv(12, seed=3)
  mask = jnp.ones((B, 12), bool).at[:, 0].set(False).at[0, 5].set(False)
  v_changed = v.at[:, 0].add(7.0).at[0, 5].add(7.0)
  runs = [
    lambda v: _lsh(qk, v, causal=causal, mask=mask),
    lambda v: full_self_attention(qk, qk, v, causal=causal, shared_qk=True, mask=mask),
    lambda v: full_self_attention(qk, v, v, causal=causal, mask=mask),
  ]
  for run in runs:
    out, out_changed = run(v), run(v_changed)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[mask], out_changed[mask], atol=1e-6)
  grad = jax.jit(jax.grad(lambda qk: jnp.sum(_lsh(qk, v, causal=causal, mask=mask))))(qk)
  assert np.all(np.isfinite(grad))


def test_same_key_same_output_other_key_other_output():
  qk, v = _qkv(16, seed=4)
  np.testing.assert_array_equal(_lsh(qk, v, seed=0), _lsh(qk, v, seed=0))
  assert np.abs(_lsh(qk, v, seed=0) - _lsh(qk, v, seed=1)).max() > 1e-3


def _numpy_keys(qk, rotations, chunk_len, causal, strictly_causal=False):
  """One batch element, one hash round (`rotations` `[H, d, n_buckets/2]`), straight from the
  definition: `keys[h][i]`, the keys query i sees, and how many queries lost keys of their
  bucket to the chunking.

  Query i sees key j iff j shares its bucket, sits in i's chunk or the one before it in the
  (bucket, position) order (strictly causal: is one of the `chunk_len` bucket-mates before
  i), j <= i if causal, and j != i.
  """
  length, heads, _ = qk.shape
  num_chunks = length // chunk_len
  keys, cut = [], 0
  for h in range(heads):
    rotated = (qk[:, h] / np.linalg.norm(qk[:, h], axis=-1, keepdims=True)) @ rotations[h]
    bucket = np.argmax(np.concatenate([rotated, -rotated], -1), -1)
    order = np.argsort(bucket * length + np.arange(length), kind="stable")
    chunk = np.empty(length, int)
    chunk[order] = np.arange(length) // chunk_len
    keys.append([])
    for i in range(length):
      mates = [j for j in range(length) if bucket[j] == bucket[i] and j != i]
      mates = [j for j in mates if j <= i or not causal]
      window = (chunk[i], (chunk[i] - 1) % num_chunks)
      seen = mates[-chunk_len:] if strictly_causal else [j for j in mates if chunk[j] in window]
      cut += len(seen) < len(mates)
      keys[h].append(seen)
  return keys, cut


def _numpy_attend(qk, v, keys):
  """`[L, H, d]`: query i's softmax over `keys[h][i]` (shared QK), itself if it has none."""
  out, d = np.zeros_like(v), qk.shape[-1]
  for h, per_query in enumerate(keys):
    unit = qk[:, h] / np.linalg.norm(qk[:, h], axis=-1, keepdims=True)
    for i, seen in enumerate(per_query):
      seen = sorted(seen) or [i]
      logits = np.array([qk[i, h] @ unit[j] for j in seen]) / np.sqrt(d)
      w = np.exp(logits - logits.max())
      out[i, h] = (w / w.sum()) @ v[seen, h]
  return out


@pytest.mark.parametrize("causal, strict", [(True, False), (False, False), (True, True)])
def test_matches_numpy_reference_built_from_buckets(causal, strict):
  length, chunk_len, n_buckets = 12, 4, 2
  qk, v = _qkv(length, seed=5)
  key = jax.random.key(3)
  out = lsh_self_attention(
    qk,
    v,
    key,
    chunk_len=chunk_len,
    n_buckets=n_buckets,
    n_hashes=1,
    causal=causal,
    strictly_causal=strict,
  )
  rotations = np.asarray(lsh_lib._rotations(key, H, HD, n_buckets, 1), np.float64)[:, 0]
  qk64, v64 = np.asarray(qk, np.float64), np.asarray(v, np.float64)
  total_cut = 0
  for b in range(B):
    keys, cut = _numpy_keys(qk64[b], rotations, chunk_len, causal, strict)
    np.testing.assert_allclose(out[b], _numpy_attend(qk64[b], v64[b], keys), atol=1e-5)
    total_cut += cut
  assert total_cut > 0  # the chunking, not only the buckets, shaped some key sets


@pytest.mark.parametrize("rounds_at_once", [False, True])
@pytest.mark.parametrize("causal, strict", [(True, False), (False, False), (True, True)])
def test_duplicate_correction_attends_to_the_union_of_the_rounds(causal, strict, rounds_at_once):
  """The Reformer paper's Appendix A: with `log N_ij`, the rounds together are one softmax
  over the union of their key sets; without it, keys found in several rounds weigh more."""
  length, chunk_len, n_buckets, n_hashes = 16, 4, 2, 3
  qk, v = _qkv(length, seed=11)
  key = jax.random.key(5)
  run = partial(
    _jit_lsh,
    qk,
    v,
    key,
    chunk_len=chunk_len,
    n_buckets=n_buckets,
    n_hashes=n_hashes,
    causal=causal,
    strictly_causal=strict,
    rounds_at_once=rounds_at_once,
  )
  corrected, plain = run(duplicate_correction=True), run()
  rotations = np.asarray(lsh_lib._rotations(key, H, HD, n_buckets, n_hashes), np.float64)
  qk64, v64 = np.asarray(qk, np.float64), np.asarray(v, np.float64)
  for b in range(B):
    rounds = [
      _numpy_keys(qk64[b], rotations[:, r], chunk_len, causal, strict)[0] for r in range(n_hashes)
    ]
    union = [
      [set().union(*(keys[h][i] for keys in rounds)) for i in range(length)] for h in range(H)
    ]
    np.testing.assert_allclose(corrected[b], _numpy_attend(qk64[b], v64[b], union), atol=1e-5)
  assert np.abs(corrected - plain).max() > 1e-3  # some keys were found in several rounds


def test_duplicate_correction_is_a_no_op_for_one_round_and_keeps_gradients_finite():
  qk, v = _qkv(13, seed=12)
  np.testing.assert_array_equal(
    _lsh(qk, v, n_hashes=1, duplicate_correction=True), _lsh(qk, v, n_hashes=1)
  )
  loss = lambda qk, v: jnp.sum(jnp.sin(_lsh(qk, v, n_hashes=3, duplicate_correction=True)))
  for g in jax.jit(jax.grad(loss, argnums=(0, 1)))(qk, v):
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 0


@pytest.mark.parametrize("strict", [False, True])
def test_rounds_at_once_gives_the_same_outputs_and_gradients(strict):
  """All hash rounds in one pass (kept for the backward pass) = one round at a time
  (recomputed): the same attention, only the memory and the speed differ."""
  qk, v = _qkv(37, seed=4)
  loss = lambda at_once: (
    lambda qk, v: jnp.sum(
      jnp.sin(_lsh(qk, v, n_hashes=3, strictly_causal=strict, rounds_at_once=at_once))
    )
  )
  (one, grads_one), (all_, grads_all) = (
    jax.value_and_grad(loss(at_once), argnums=(0, 1))(qk, v) for at_once in (False, True)
  )
  np.testing.assert_allclose(all_, one, rtol=1e-6)
  for a, b in zip(grads_all, grads_one, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strict", [False, True])
def test_later_inputs_change_earlier_outputs_only_without_strict_causality(strict):
  """Values after t never reach t; later qk move earlier outputs through the chunking
  (Reformer's property), unless the window is strictly causal."""
  length, t = 37, 20
  qk, v = _qkv(length, seed=9)
  noise_qk, noise_v = _qkv(length, seed=10)
  later = (jnp.arange(length) > t)[None, :, None, None]
  run = lambda qk, v: _lsh(qk, v, chunk_len=4, n_buckets=4, n_hashes=2, strictly_causal=strict)
  base = run(qk, v)[:, : t + 1]
  np.testing.assert_allclose(run(qk, jnp.where(later, noise_v, v))[:, : t + 1], base, atol=1e-6)
  moved = np.abs(run(jnp.where(later, noise_qk, qk), v)[:, : t + 1] - base).max()
  assert (moved < 1e-6) if strict else (moved > 1e-3)


def test_strictly_causal_needs_causal():
  qk, v = _qkv(8)
  with pytest.raises(ValueError, match="strictly_causal=True needs causal=True"):
    _lsh(qk, v, causal=False, strictly_causal=True)


def test_dense_separate_qk_is_causal_softmax_attention():
  q, v = _qkv(6, seed=6)
  k = q[:, ::-1]
  expected = jax.nn.dot_product_attention(q, k, v, is_causal=True)
  np.testing.assert_allclose(full_self_attention(q, k, v), expected, atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_module_shapes_and_parameters(attention):
  x = jnp.asarray(np.random.default_rng(7).normal(size=(B, 10, 8)), jnp.float32)
  module = CausalSelfAttention(num_heads=H, attention=attention, chunk_len=4, n_buckets=2)
  key = jax.random.key(1)
  variables = module.init(jax.random.key(0), x, key=key)
  out = module.apply(variables, x, key=key, mask=jnp.ones((B, 10), bool))
  assert out.shape == x.shape and np.all(np.isfinite(out))
  names = {"full": {"query", "key"}}.get(attention, {"qk"}) | {"value", "out"}
  assert set(nn.meta.unbox(variables)["params"]) == names


def test_module_draws_hashes_and_dropout_only_from_key():
  x = jnp.asarray(np.random.default_rng(8).normal(size=(B, 12, 8)), jnp.float32)
  module = CausalSelfAttention(num_heads=H, chunk_len=4, n_buckets=4, dropout=0.5)
  variables = module.init(jax.random.key(0), x, key=jax.random.key(0))
  run = lambda seed, det: module.apply(variables, x, key=jax.random.key(seed), deterministic=det)
  np.testing.assert_array_equal(run(1, False), run(1, False))
  assert np.abs(run(1, False) - run(2, False)).max() > 1e-3
  assert np.abs(run(1, True) - run(1, False)).max() > 1e-3


@pytest.mark.parametrize(
  "fields, match",
  [
    ({"attention": "sparse"}, "attention='sparse'"),
    ({"n_buckets": 3}, "n_buckets=3"),
    ({"n_buckets": 0}, "n_buckets=0"),
    ({"chunk_len": 0}, "chunk_len=0"),
    ({"n_hashes": 0}, "n_hashes=0"),
    ({"num_heads": 3}, "num_heads=3"),
  ],
)
def test_module_rejects_bad_fields(fields, match):
  module = CausalSelfAttention(**{"num_heads": H, **fields})
  x = jnp.zeros((1, 4, 8))
  with pytest.raises(ValueError, match=match):
    module.init(jax.random.key(0), x, key=jax.random.key(0))


def test_module_lsh_needs_a_key():
  module = CausalSelfAttention(num_heads=H)
  with pytest.raises(ValueError, match="pass key="):
    module.init(jax.random.key(0), jnp.zeros((1, 4, 8)), key=None)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_full_attention_fused_equals_explicit_forward_and_gradients(causal, masked):
  """'full' goes through the fused path (cuDNN on a GPU) and equals the dense reference."""
  x = jax.random.normal(jax.random.key(3), (2, 11, 8))
  mask = jnp.arange(11)[None] < jnp.array([[11], [7]]) if masked else None
  valid = np.ones((2, 11), bool) if mask is None else np.asarray(mask)
  make = lambda impl: CausalSelfAttention(
    num_heads=H, attention="full", causal=causal, implementation=impl
  )
  variables = make(None).init(jax.random.key(0), x, key=None)

  def loss(params, impl):  # over valid queries only: padded ones are never read
    out = make(impl).apply({"params": params}, x, key=None, mask=mask)
    return jnp.sum(jnp.where(valid[..., None], out, 0.0) ** 2), out

  (l_fused, out_fused), g_fused = jax.value_and_grad(loss, has_aux=True)(variables["params"], None)
  (l_ref, out_ref), g_ref = jax.value_and_grad(loss, has_aux=True)(variables["params"], "explicit")
  np.testing.assert_allclose(out_fused[valid], out_ref[valid], atol=1e-5)
  np.testing.assert_allclose(l_fused, l_ref, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), g_fused, g_ref)


def test_bfloat16_logits_are_accumulated_in_float32():
  """The module docstring's float32 logits: bfloat16 q and k, not bf16-rounded products."""
  q = jnp.asarray(np.random.default_rng(0).normal(scale=3, size=(64, 16)), jnp.bfloat16)
  k = lsh_lib._unit(q)
  _, lse = lsh_lib._attend(q, k, q, jnp.ones((64, 64), bool), None)
  exact = jnp.einsum("qd,kd->qk", q.astype(jnp.float32), k.astype(jnp.float32)) / 4.0
  np.testing.assert_allclose(lse, jax.nn.logsumexp(exact, -1), atol=1e-5)
