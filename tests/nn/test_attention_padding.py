"""The fused attention's padded path (cuDNN refuses some lengths, ViT's 197 tokens): q, k, v
padded to a multiple, the true lengths as the kernel's own padding mask, the padded queries
cut off, equals the unpadded call, forward and gradients (on the CPU, through XLA)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.nn import attention as attn_lib
from lfpe.nn import fused as fused_lib

B, H, HD = 2, 2, 4


def _qkv(n_q, n_k, seed=3, dv=HD):
  rng = np.random.default_rng(seed)
  q, k = (rng.normal(size=(B, n, H, HD)).astype(np.float32) for n in (n_q, n_k))
  return q, k, rng.normal(size=(B, n_k, H, dv)).astype(np.float32)


_PADDED_CASES = {
  "plain 13 tokens (a class token + 3x4)": dict(n_q=13, n_k=13),
  "relative bias": dict(n_q=13, n_k=13, bias=True),
  "masked keys (DETR's image padding)": dict(n_q=13, n_k=13, mask=True),
  "causal": dict(n_q=13, n_k=13, is_causal=True),
  "cross, narrower values": dict(n_q=7, n_k=13, dv=HD - 2, bias=True, mask=True),
}


@pytest.mark.parametrize("multiple", [2, 8, 64])
@pytest.mark.parametrize("case", list(_PADDED_CASES))
def test_padded_path_equals_the_unpadded_one_forward_and_gradients(case, multiple):
  spec = dict(_PADDED_CASES[case])
  n_q, n_k = spec.pop("n_q"), spec.pop("n_k")
  q, k, v = _qkv(n_q, n_k, dv=spec.pop("dv", HD))
  rng = np.random.default_rng(5)
  bias = rng.normal(size=(1, H, n_q, n_k)).astype(np.float32) if spec.pop("bias", 0) else None
  mask = None
  if spec.pop("mask", False):
    padded_keys = np.arange(n_k)[None, :] >= np.array([[n_k], [n_k - 4]])  # [B, Nk]
    mask = attn_lib.make_mask(jnp.asarray(padded_keys), False, n_q, n_k)
  is_causal = spec.pop("is_causal", False)

  def out(q, k, v, bias, multiple):
    return fused_lib.fused_attention(q, k, v, bias, mask, is_causal, "xla", pad_multiple=multiple)

  padded, plain = out(q, k, v, bias, multiple), out(q, k, v, bias, None)
  assert padded.shape == plain.shape == (B, n_q, H, v.shape[-1])
  np.testing.assert_allclose(padded, plain, rtol=1e-5, atol=1e-6)
  loss = lambda m: lambda *a: jnp.sum(jnp.sin(out(*a, m)))
  argnums = (0, 1, 2, 3) if bias is not None else (0, 1, 2)
  for a, b in zip(
    jax.grad(loss(multiple), argnums)(q, k, v, bias),
    jax.grad(loss(None), argnums)(q, k, v, bias),
    strict=True,
  ):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_padding_to_a_multiple_adds_as_few_tokens_as_it_can():
  """197 tokens (ViT-B/16 at 224 px) go to the kernel as 256; the kernel sees the lengths."""
  seen = {}
  real = jax.nn.dot_product_attention

  def spy(q, k, v, *args, **kwargs):
    seen.update(shape=q.shape, lengths=kwargs.get("query_seq_lengths"))
    return real(q, k, v, *args, **kwargs)

  q, k, v = _qkv(197, 197)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(jax.nn, "dot_product_attention", spy)
    fused_lib.fused_attention(q, k, v, implementation="xla", pad_multiple=64)
  assert seen["shape"][1] == 256 and np.all(np.asarray(seen["lengths"]) == 197)


def _refusing_kernel(refuses, training_only=False):
  """`jax.nn.dot_product_attention` whose 'cudnn' refuses the lengths `refuses(n)` says it
  does (as cuDNN refuses odd ones in training) and otherwise runs XLA's, on the CPU; with
  `training_only`, it refuses them only where the call is differentiated, as jax checks."""
  real = jax.nn.dot_product_attention

  def kernel(q, k, v, *args, implementation=None, **kwargs):
    if implementation != "cudnn":
      return real(q, k, v, *args, implementation=implementation, **kwargs)
    xla = lambda q, k, v: real(q, k, v, *args, implementation="xla", **kwargs)

    def check(q, k):
      if refuses(q.shape[1]) or refuses(k.shape[1]):
        raise NotImplementedError(f"refused length {q.shape[1]}")

    checked = jax.custom_vjp(xla)
    checked.defvjp(lambda q, k, v: (check(q, k), jax.vjp(xla, q, k, v))[1], lambda f, g: f(g))
    if not training_only:
      check(q, k)
    return checked(q, k, v)

  return kernel


@pytest.mark.parametrize(
  ("refuses", "pads"),
  [
    (lambda n: False, (0, 0)),
    (lambda n: n % 2, (1, 1)),
    (lambda n: n % 64, (59, 59)),
    (lambda n: True, None),
  ],
  ids=["takes 197", "refuses odd", "refuses all but tiles", "refuses all"],
)
def test_cudnn_padding_asks_the_kernel_for_the_fewest_tokens(refuses, pads, monkeypatch):
  """Asked in training: the (faked) kernel refuses only where the call is differentiated."""
  monkeypatch.setattr(jax.nn, "dot_product_attention", _refusing_kernel(refuses, True))
  fused_lib.cudnn_padding.cache_clear()
  try:
    assert fused_lib.cudnn_padding(2, 197, 197, 2, 8, "bfloat16", False) == pads
  finally:
    fused_lib.cudnn_padding.cache_clear()


def _module_out(attention, x, kv, hooks, seed=0):
  params = attention.init(jax.random.key(seed), x, kv, **hooks)
  apply = lambda p, x, kv: attention.apply(p, x, kv, **hooks)
  return params, apply


_MODULE_CASES = {
  "self, a class token + 3x4": dict(n_q=13, n_k=13),
  "positions added to q and k (DETR)": dict(n_q=13, n_k=13, pos=True),
  "cross, fewer queries": dict(n_q=7, n_k=13),
  "causal": dict(n_q=13, n_k=13, causal=True),
}


@pytest.mark.parametrize("multiple", [2, 64])
@pytest.mark.parametrize("case", list(_MODULE_CASES))
def test_padded_inputs_equal_the_unpadded_module_forward_and_gradients(case, multiple):
  """`Attention(pad_multiple=m)` pads its inputs before the projections and cuts the output
  after the out-projection: the same outputs and gradients (parameters and inputs)."""
  spec = _MODULE_CASES[case]
  rng = np.random.default_rng(1)
  x = rng.normal(size=(B, spec["n_q"], 16)).astype(np.float32)
  kv = rng.normal(size=(B, spec["n_k"], 16)).astype(np.float32)
  hooks = {"causal": spec.get("causal", False)}
  if spec.get("pos"):
    hooks |= {"pos_q": rng.normal(size=(spec["n_q"], 16)), "pos_k": rng.normal(size=(13, 16))}
  padded = attn_lib.Attention(num_heads=H, pad_multiple=multiple)
  plain = attn_lib.Attention(num_heads=H, implementation="xla")
  params, apply_padded = _module_out(padded, x, kv, hooks)
  _, apply_plain = _module_out(plain, x, kv, hooks)
  np.testing.assert_allclose(apply_padded(params, x, kv), apply_plain(params, x, kv), atol=1e-5)
  loss = lambda apply: lambda *a: jnp.sum(jnp.sin(apply(*a)))
  grads = [jax.grad(loss(f), (0, 1, 2))(params, x, kv) for f in (apply_padded, apply_plain)]
  for a, b in zip(*(jax.tree.leaves(g) for g in grads), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _seen_lengths(monkeypatch, attention, n, **hooks):
  """The token count and true lengths the kernel sees when `attention` runs on `n` tokens."""
  seen = {}
  kernel = jax.nn.dot_product_attention

  def spy(q, k, v, *args, **kwargs):
    seen.update(tokens=q.shape[1], lengths=kwargs.get("query_seq_lengths"))
    return kernel(q, k, v, *args, **kwargs)

  monkeypatch.setattr(jax.nn, "dot_product_attention", spy)
  x = jnp.ones((B, n, 16))
  out, _ = attention.init_with_output(jax.random.key(0), x, **hooks)
  assert out.shape == (B, n, 16)
  return seen["tokens"], None if seen["lengths"] is None else int(seen["lengths"][0])


def test_on_a_gpu_the_inputs_are_padded_as_cudnn_needs_unless_a_hook_follows(monkeypatch):
  """On a GPU (faked: a kernel that refuses odd lengths) 197 tokens are padded to 198 before
  the projections; a rotary hook, which acts per token after them, keeps the padding of
  q, k, v inside the fused call instead."""
  monkeypatch.setattr(fused_lib, "on_gpu", lambda: True)
  fused_lib.cudnn_padding.cache_clear()
  monkeypatch.setattr(jax.nn, "dot_product_attention", _refusing_kernel(lambda n: n % 2))
  try:
    attention = attn_lib.Attention(num_heads=H, dtype=jnp.bfloat16)
    assert _seen_lengths(monkeypatch, attention, 197) == (198, 197)
    rope = lambda t: t[..., ::-1]  # any per-token map of q and k
    assert _seen_lengths(monkeypatch, attention, 197, rope=rope) == (198, 197)
    projected = {}
    real_proj = attn_lib.Attention._proj

    def proj(self, name, x, head_dim):
      projected[name] = x.shape[1]
      return real_proj(self, name, x, head_dim)

    monkeypatch.setattr(attn_lib.Attention, "_proj", proj)
    _seen_lengths(monkeypatch, attention, 197)
    assert projected == {"query": 198, "key": 198, "value": 198}
    _seen_lengths(monkeypatch, attention, 197, rope=rope)
    assert projected == {"query": 197, "key": 197, "value": 197}
    assert _seen_lengths(monkeypatch, attention, 196) == (196, None)  # taken as it is
  finally:
    fused_lib.cudnn_padding.cache_clear()
