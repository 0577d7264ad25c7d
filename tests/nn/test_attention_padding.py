"""The fused attention's padded path (cuDNN refuses some lengths, ViT's 197 tokens): q, k, v
padded to a multiple, the true lengths as the kernel's own padding mask, the padded queries
cut off, equals the unpadded call, forward and gradients (on the CPU, through XLA)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.nn import attention as attn_lib

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
    return attn_lib.fused_attention(q, k, v, bias, mask, is_causal, "xla", pad_multiple=multiple)

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
    attn_lib.fused_attention(q, k, v, implementation="xla", pad_multiple=64)
  assert seen["shape"][1] == 256 and np.all(np.asarray(seen["lengths"]) == 197)
