"""`CausalSelfAttention`: the attention layer of the Reformer-style model, LSH (`lfpe.nn.lsh`)
or dense for reference, with its projections, checks and dropout."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.nn.attention import IMPLEMENTATIONS
from lfpe.nn.fused import fused_attention
from lfpe.nn.lsh import check_lsh, full_self_attention, lsh_self_attention

Array = jnp.ndarray
ATTENTIONS = ("lsh", "full_shared", "full")
_QKV_AXES = ("embed", "heads", "kv")
_OUT_AXES = ("heads", "kv", "embed")


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
    duplicate_correction: LSH only: the Reformer paper's `log N_ij` for keys found in several
      rounds (`lfpe.nn.lsh`); False counts them in each round, as trax does.
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
  duplicate_correction: bool = False
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
    check_lsh(
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
        duplicate_correction=self.duplicate_correction,
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
