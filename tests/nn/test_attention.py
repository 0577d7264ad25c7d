"""Attention with position hooks against a numpy softmax(QKᵀ/√d + bias)V reference; fused path
against explicit path (outputs, gradients, which path runs)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.nn import attention as attn_lib
from lfpe.nn import fused as fused_lib
from lfpe.nn.attention import Attention

B, N, D, H = 2, 5, 8, 2
HD = D // H


def _inputs(seed=0, n=N):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(B, n, D)).astype(np.float32)


def _init(x, **kwargs):
  module = Attention(num_heads=H)
  variables = module.init(jax.random.key(0), x, **kwargs)
  return module, variables, nn.meta.unbox(variables)["params"]


def _proj(p, x):  # numpy projection [B, N, D] -> [B, N, H, HD]
  return np.einsum("bnd,dhk->bnhk", x, np.asarray(p["kernel"])) + np.asarray(p["bias"])


def _reference(params, xq, xk, xv, bias=None, mask=None, concat=None):
  """Straight from the formula: softmax(Q Kᵀ / √d + bias) V, then the output projection."""
  q, k, v = _proj(params["query"], xq), _proj(params["key"], xk), _proj(params["value"], xv)
  if concat is not None:
    cq, ck = (np.broadcast_to(c, (*q.shape[:3], c.shape[-1])) for c in concat)
    q, k = np.concatenate([q, cq], -1), np.concatenate([k, ck], -1)
  logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
  if bias is not None:
    logits = logits + bias
  if mask is not None:
    logits = np.where(mask, logits, -1e30)
  w = np.exp(logits - logits.max(-1, keepdims=True))
  w = w / w.sum(-1, keepdims=True)
  out = np.einsum("bhqk,bkhd->bqhd", w, v)
  return np.einsum("bqhd,hdo->bqo", out, np.asarray(params["out"]["kernel"])) + np.asarray(
    params["out"]["bias"]
  ), w


def _weights(module, variables, x, **kwargs):
  _, state = module.apply(variables, x, mutable=["intermediates"], **kwargs)
  return np.asarray(state["intermediates"]["attention_weights"][0])


def test_matches_numpy_reference_with_bias_and_key_padding():
  x = _inputs()
  bias = np.random.default_rng(1).normal(size=(H, N, N)).astype(np.float32)
  pad = np.zeros((B, N), bool)
  pad[1, -2:] = True
  module, variables, params = _init(x)
  out = module.apply(variables, x, logit_bias=bias, key_padding_mask=pad)
  ref, _ = _reference(params, x, x, x, bias=bias, mask=~pad[:, None, None, :])
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_causal_mask_zeros_future_weights_and_ignores_future_tokens():
  x = _inputs()
  module, variables, _ = _init(x)
  w = _weights(module, variables, x, causal=True)
  assert np.all(w[..., np.triu_indices(N, 1)[0], np.triu_indices(N, 1)[1]] == 0)
  np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)
  x2 = x.copy()
  x2[:, 3:] += 10.0  # change the future of tokens 0..2
  out, out2 = (module.apply(variables, a, causal=True) for a in (x, x2))
  np.testing.assert_allclose(out[:, :3], out2[:, :3], rtol=1e-5, atol=1e-6)
  assert not np.allclose(out[:, 3:], out2[:, 3:])


def test_key_padding_gives_padded_keys_zero_weight_and_no_influence():
  x = _inputs()
  pad = np.zeros((B, N), bool)
  pad[:, -1] = True
  module, variables, _ = _init(x)
  w = _weights(module, variables, x, key_padding_mask=pad)
  assert np.all(w[..., -1] == 0)
  x2 = x.copy()
  x2[:, -1] = 100.0
  out, out2 = (module.apply(variables, a, key_padding_mask=pad) for a in (x, x2))
  np.testing.assert_allclose(out[:, :-1], out2[:, :-1], rtol=1e-5, atol=1e-5)


def test_make_mask_causal_aligns_last_query_with_last_key():
  mask = np.asarray(attn_lib.make_mask(None, True, num_q=2, num_k=4))[0, 0]
  np.testing.assert_array_equal(mask, [[1, 1, 1, 0], [1, 1, 1, 1]])
  assert attn_lib.make_mask(None, False, 3, 3) is None
  with pytest.raises(ValueError, match="key_padding_mask must be"):
    attn_lib.make_mask(jnp.zeros((2, 3), bool), False, 4, 4)


def test_fully_masked_query_is_finite():
  x = _inputs()
  module, variables, _ = _init(x)
  out = module.apply(variables, x, key_padding_mask=np.ones((B, N), bool))
  assert np.all(np.isfinite(out))


def test_positions_on_q_and_k_enter_only_the_logits():
  x = _inputs()
  pos = np.random.default_rng(2).normal(size=(N, D)).astype(np.float32)
  module, variables, params = _init(x)
  out = module.apply(variables, x, pos_q=pos, pos_k=pos)
  ref, _ = _reference(params, x + pos, x + pos, x)  # values from x alone (DETR)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
  assert not np.allclose(out, module.apply(variables, x), atol=1e-4)


def test_position_on_v_only_shifts_output_linearly():
  """Weights do not depend on v, so out(pos_v) - out = A (pos W_v) W_o exactly."""
  x = _inputs()
  pos = np.random.default_rng(3).normal(size=(N, D)).astype(np.float32)
  module, variables, params = _init(x)
  w = _weights(module, variables, x)
  delta = module.apply(variables, x, pos_v=pos) - module.apply(variables, x)
  pv = np.einsum("nd,dhk->nhk", pos, np.asarray(params["value"]["kernel"]))
  expected = np.einsum("bhqk,khd,hdo->bqo", w, pv, np.asarray(params["out"]["kernel"]))
  np.testing.assert_allclose(delta, expected, rtol=1e-4, atol=1e-5)


def test_cross_attention_with_positions_on_keys():
  x, mem = _inputs(0, n=3), _inputs(1, n=N)
  pos = np.random.default_rng(4).normal(size=(B, N, D)).astype(np.float32)
  module, variables, params = _init(x, inputs_kv=mem)
  out = module.apply(variables, x, mem, pos_k=pos)
  assert out.shape == (B, 3, D)
  ref, _ = _reference(params, x, mem + pos, mem)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_concatenated_channels_follow_eq13():
  """qkᵀ = q¹k¹ᵀ + pos_q² pos_k²ᵀ (000 Eq. 13), scaled by 1/√(head_dim + c)."""
  x = _inputs()
  rng = np.random.default_rng(5)
  cq, ck = (rng.normal(size=(N, H, 3)).astype(np.float32) for _ in range(2))
  module, variables, params = _init(x)
  out = module.apply(variables, x, concat_q=cq, concat_k=ck)
  ref, _ = _reference(params, x, x, x, concat=(cq, ck))
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
  assert out.shape == (B, N, D)
  assert not np.allclose(out, module.apply(variables, x), atol=1e-4)


def test_concatenated_channels_must_come_in_pairs_of_equal_width():
  x = _inputs()
  module, variables, _ = _init(x)
  with pytest.raises(ValueError, match="concat_q and concat_k together"):
    module.apply(variables, x, concat_q=np.ones((N, H, 2)))
  with pytest.raises(ValueError, match="concat_q and concat_k together"):
    module.apply(variables, x, concat_q=np.ones((N, H, 2)), concat_k=np.ones((N, H, 3)))
  with pytest.raises(ValueError, match=r"concat_q must be \[N, heads, c\]"):
    module.apply(variables, x, concat_q=np.ones((N, 3, 2)), concat_k=np.ones((N, 3, 2)))


def _rotate(x):  # a test double for a rotary embedding: rotate channel pairs by token index
  angle = jnp.arange(x.shape[1], dtype=jnp.float32)[None, :, None, None] * 0.3
  x1, x2 = x[..., 0::2], x[..., 1::2]
  c, s = jnp.cos(angle), jnp.sin(angle)
  return jnp.stack([x1 * c - x2 * s, x1 * s + x2 * c], -1).reshape(x.shape)


def test_rope_hook_rotates_queries_and_keys_not_values():
  x = np.broadcast_to(_inputs()[:, :1], (B, N, D))  # identical content at every position
  module, variables, params = _init(x)
  w = _weights(module, variables, x, rope=_rotate)
  q, k = _proj(params["query"], x), _proj(params["key"], x)
  q, k = np.asarray(_rotate(q)), np.asarray(_rotate(k))
  logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(HD)
  ref = np.exp(logits - logits.max(-1, keepdims=True))
  np.testing.assert_allclose(w, ref / ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
  # Rotation by index makes the logits depend on the offset only: constant diagonals.
  np.testing.assert_allclose(logits[..., 1, 2], logits[..., 3, 4], rtol=1e-4, atol=1e-5)


def test_relative_hook_adds_logits_of_scaled_q():
  """logits = (q·k + q·r_ij) / √d."""
  x = _inputs()
  r = np.random.default_rng(6).normal(size=(N, N, HD)).astype(np.float32)
  relative = lambda q: jnp.einsum("bqhd,qkd->bhqk", q, r)  # q·r_{ij} (003 Eq. 2 shape)
  module, variables, params = _init(x)
  out = module.apply(variables, x, relative=relative)
  bias = np.einsum("bqhd,qkd->bhqk", _proj(params["query"], x), r) / np.sqrt(HD)
  ref, _ = _reference(params, x, x, x, bias=bias)
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_heads_must_divide_width():
  with pytest.raises(ValueError, match="multiple of num_heads=3"):
    Attention(num_heads=3).init(jax.random.key(0), _inputs())


def test_bfloat16_compute_keeps_float32_params_and_logical_axes():
  x = _inputs()
  module = Attention(num_heads=H, dtype=jnp.bfloat16)
  variables = module.init(jax.random.key(0), x)
  assert variables["params"]["query"]["kernel"].names == ("embed", "heads", "kv")
  assert variables["params"]["out"]["kernel"].names == ("heads", "kv", "embed")
  params = nn.meta.unbox(variables)
  assert params["params"]["query"]["kernel"].dtype == jnp.float32
  out = module.apply(variables, x)
  assert out.dtype == jnp.bfloat16
  out32 = Attention(num_heads=H).apply(variables, x)
  np.testing.assert_allclose(np.asarray(out, np.float32), out32, rtol=0.05, atol=0.05)


def test_attention_weights_pure_function_matches_softmax():
  rng = np.random.default_rng(7)
  q, k = rng.normal(size=(1, 3, 1, 4)), rng.normal(size=(1, 4, 1, 4))
  w = np.asarray(attn_lib.attention_weights(jnp.asarray(q), jnp.asarray(k)))
  logits = np.einsum("qd,kd->qk", q[0, :, 0], k[0, :, 0]) / 2.0
  np.testing.assert_allclose(
    w[0, 0], np.exp(logits) / np.exp(logits).sum(-1, keepdims=True), rtol=1e-5
  )


def test_real_axial_rope_makes_logits_depend_on_2d_offsets_only():
  shape = (2, 3)
  n = 6
  x = np.broadcast_to(_inputs(n=n)[:, :1], (B, n, D))  # identical content at every cell
  rot = encodings.create("rope_axial", head_dim=HD)
  coords = rot.grid_coords(shape)
  rope = lambda t: rot.apply({}, t, coords)
  module, variables, _ = _init(x)
  w = _weights(module, variables, x, rope=rope)
  assert not np.allclose(w, _weights(module, variables, x), atol=1e-4)
  logits = np.log(w)  # equal up to a per-row constant; compare differences within a row
  # cells (0,0)->(0,1) and (1,1)->(1,2) have the same offset, as do (0,0)->(1,0) vs (0,2)->(1,2)
  row0 = logits[..., 0, :] - logits[..., 0, :1]
  row4 = logits[..., 4, :] - logits[..., 4, :1]
  np.testing.assert_allclose(row0[..., 1] - row0[..., 0], row4[..., 5] - row4[..., 4], atol=1e-4)


# Fused (jax.nn.dot_product_attention) against explicit (weights as arrays).
_MASKS = {
  "none": {},
  "padding": {"key_padding_mask": np.array([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], bool)},
  "causal+padding": {
    "causal": True,
    "key_padding_mask": np.array([[0, 0, 0, 0, 1], [0, 1, 0, 0, 0]], bool),
  },
}


def _hooks(name):
  """Keyword arguments of one hook combination (every hook the fused path takes)."""
  rng = np.random.default_rng(8)
  pos = rng.normal(size=(N, D)).astype(np.float32)
  cq, ck = (rng.normal(size=(N, H, 3)).astype(np.float32) for _ in range(2))
  r = rng.normal(size=(N, N, HD)).astype(np.float32)
  hooks = {
    "pos_qkv": dict(pos_q=pos, pos_k=pos, pos_v=pos),
    "concat": dict(concat_q=cq, concat_k=ck),
    "logit_bias": dict(logit_bias=rng.normal(size=(H, N, N)).astype(np.float32)),
    "relative": dict(relative=lambda q: jnp.einsum("bqhd,qkd->bhqk", q, r)),
    "rope": dict(rope=_rotate),
  }
  if name == "none":
    return {}
  if name == "all":  # every hook at once (concat widens q, k after the rotation)
    return {k: v for h in hooks.values() for k, v in h.items()}
  return hooks[name]


_HOOK_SETS = ("none", "pos_qkv", "concat", "logit_bias", "relative", "rope", "all")


def _both_paths(dtype, x, kwargs):
  fused, explicit = (
    Attention(num_heads=H, dtype=dtype, implementation=impl) for impl in (None, "explicit")
  )
  variables = fused.init(jax.random.key(0), x, **kwargs)
  return fused, explicit, variables


@pytest.mark.parametrize("masks", list(_MASKS))
@pytest.mark.parametrize("hooks", _HOOK_SETS)
def test_fused_path_matches_explicit_path_float32(hooks, masks):
  x = _inputs()
  kwargs = {**_hooks(hooks), **_MASKS[masks]}
  fused, explicit, variables = _both_paths(jnp.float32, x, kwargs)
  out = fused.apply(variables, x, **kwargs)
  np.testing.assert_allclose(out, explicit.apply(variables, x, **kwargs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hooks", ["none", "all"])
def test_fused_path_matches_explicit_path_bfloat16(hooks):
  x = _inputs()
  kwargs = {**_hooks(hooks), **_MASKS["causal+padding"]}
  fused, explicit, variables = _both_paths(jnp.bfloat16, x, kwargs)
  out = fused.apply(variables, x, **kwargs)
  assert out.dtype == jnp.bfloat16
  ref = explicit.apply(variables, x, **kwargs)
  np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref, np.float32), atol=0.05)


def test_fused_cross_attention_with_causal_mask_matches_explicit():
  """Nq != Nk: the causal mask aligns the last query with the last key on both paths."""
  x, mem = _inputs(0, n=3), _inputs(1, n=N)
  kwargs = dict(causal=True, key_padding_mask=_MASKS["padding"]["key_padding_mask"])
  fused, explicit, variables = _both_paths(jnp.float32, x, {})
  out = fused.apply(variables, x, mem, **kwargs)
  np.testing.assert_allclose(out, explicit.apply(variables, x, mem, **kwargs), atol=1e-5)


@pytest.mark.parametrize("hooks", ["none", "all"])
def test_fused_path_gradients_match_explicit_path(hooks):
  x = _inputs()
  kwargs = {**_hooks(hooks), **_MASKS["causal+padding"]}
  fused, explicit, variables = _both_paths(jnp.float32, x, kwargs)

  def grads(module):
    loss = lambda v, x: jnp.sum(jnp.sin(module.apply(v, x, **kwargs)))
    return jax.grad(loss, argnums=(0, 1))(variables, x)

  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
    grads(fused),
    grads(explicit),
  )


def test_path_choice_explicit_only_where_weights_are_needed(monkeypatch):
  x = _inputs()
  module, variables, _ = _init(x)
  calls = []
  fused = fused_lib.fused_attention
  monkeypatch.setattr(
    fused_lib, "fused_attention", lambda *a, **kw: calls.append(1) or fused(*a, **kw)
  )
  module.apply(variables, x)
  assert len(calls) == 1  # nothing needs the weights: fused
  _weights(module, variables, x)  # sown attention maps
  Attention(H, implementation="explicit").apply(variables, x)
  dropout = Attention(H, dropout=0.5)
  train = dropout.apply(variables, x, deterministic=False, rngs={"dropout": jax.random.key(1)})
  assert len(calls) == 1  # ... and none of the three above called it
  evaluation = dropout.apply(variables, x)
  assert len(calls) == 2  # dropout off at evaluation: fused again
  assert not np.allclose(train, evaluation, atol=1e-4)


def test_unknown_implementation_is_rejected():
  with pytest.raises(ValueError, match="implementation='flash' is unknown"):
    Attention(num_heads=H, implementation="flash").init(jax.random.key(0), _inputs())


def test_bfloat16_logits_are_accumulated_in_float32():
  """bfloat16 q and k give the float32 logits of those same values (not bf16-rounded ones)."""
  q, k = (
    jnp.asarray(np.random.default_rng(i).normal(scale=3, size=(1, 64, 2, 16)), jnp.bfloat16)
    for i in range(2)
  )
  exact = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) / 4.0
  np.testing.assert_allclose(attn_lib.attention_logits(q, k), exact, atol=1e-5)
