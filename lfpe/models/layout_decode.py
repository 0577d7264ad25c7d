"""Caption generation for the layout captioner: greedy decoding and beam search.

Both encode the screen once (`LayoutCaptioner.encode`) and run the decoder over a fixed
token buffer of `max_len` in a `lax.fori_loop`, so they jit; a finished caption is carried
as padding. `PAD` and `<bos>` are never generated (their log-probabilities are set to `NEG`
after the softmax, as fairseq's search does): a model that put mass on them would otherwise
write padding inside a caption, which detokenising then drops silently.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lfpe.models.layout import BOS, EOS, INPUTS, PAD

Array = jnp.ndarray
NEG = -1e9  # log-probability of a dead beam


def _never(logp: Array, bos: int) -> Array:
  """`logp` `[..., V]` with `PAD` and `bos` at `NEG`: tokens a caption never contains."""
  v = jnp.arange(logp.shape[-1])
  return jnp.where((v == PAD) | (v == bos), NEG, logp)


def _logits_at(model, variables, memory, padding, bos: int):
  """`f(tokens [B', L], t) -> [B', V]`: the logits at step t of generated `tokens` (the
  decoder reads `<bos>` then `tokens[:, :-1]`; causal, so later tokens do not matter)."""

  def logits_at(tokens: Array, t) -> Array:
    inputs = jnp.concatenate([jnp.full_like(tokens[:, :1], bos), tokens[:, :-1]], axis=1)
    out = model.apply(variables, memory, padding, inputs, train=False, method="decode")
    return jax.lax.dynamic_index_in_dim(out, t, axis=1, keepdims=False).astype(jnp.float32)

  return logits_at


def _encode(model, variables, batch, max_len: int):
  if not isinstance(max_len, int) or not 1 <= max_len <= model.caption_len - 1:
    raise ValueError(
      f"max_len={max_len!r} must be an int in [1, model.caption_len - 1 = "
      f"{model.caption_len - 1}] (generated tokens, eos included)."
    )
  args = [batch[k] for k in INPUTS]
  return model.apply(variables, *args, train=False, method="encode")


def greedy_decode(model, variables, batch, max_len: int, *, bos: int = BOS, eos: int = EOS):
  """The most likely token at each step: `[B, max_len]` int32, words, `eos`, then `PAD`.

  `batch` holds the `INPUTS` of `encode`; the screen is encoded once.
  """
  memory, padding = _encode(model, variables, batch, max_len)
  logits_at = _logits_at(model, variables, memory, padding, bos)

  def step(t, state):
    tokens, done = state
    best = jnp.argmax(_never(logits_at(tokens, t), bos), axis=-1).astype(jnp.int32)
    token = jnp.where(done, PAD, best)
    return tokens.at[:, t].set(token), done | (token == eos)

  b = memory.shape[0]
  init = (jnp.full((b, max_len), PAD, jnp.int32), jnp.zeros((b,), bool))
  return jax.lax.fori_loop(0, max_len, step, init)[0]


def beam_decode(
  model,
  variables,
  batch,
  max_len: int,
  beam_size: int = 4,
  length_penalty: float = 0.6,
  *,
  bos: int = BOS,
  eos: int = EOS,
):
  """Beam search: `[B, max_len]` int32 captions (words, `eos`, then `PAD`).

  The `beam_size` best captions by summed log-probability are kept at each step; one that
  has emitted `eos` is carried unchanged (padding). The result is the beam with the best
  score / ((5 + n) / 6) ** length_penalty (GNMT; n tokens, eos included, `max_len` if it has
  none). `beam_size=1` is `greedy_decode`.
  """
  if not isinstance(beam_size, int) or not 1 <= beam_size <= model.caption_vocab:
    raise ValueError(
      f"beam_size={beam_size!r} must be an int in [1, caption_vocab={model.caption_vocab}]."
    )
  memory, padding = _encode(model, variables, batch, max_len)
  b, k = memory.shape[0], beam_size
  repeat = lambda a: jnp.repeat(a, k, axis=0)
  logits_at = _logits_at(model, variables, repeat(memory), repeat(padding), bos)

  def step(t, state):
    seqs, scores, ended = state  # [B, K, L], [B, K], [B, K]
    logp = jax.nn.log_softmax(logits_at(seqs.reshape(b * k, max_len), t)).reshape(b, k, -1)
    logp = _never(logp, bos)
    v = logp.shape[-1]
    carry = jnp.where(jnp.arange(v) == PAD, 0.0, NEG)  # an ended caption only pads
    logp = jnp.where(ended[..., None], carry, logp)
    scores, index = jax.lax.top_k((scores[..., None] + logp).reshape(b, k * v), k)
    beam, token = index // v, (index % v).astype(jnp.int32)
    seqs = jnp.take_along_axis(seqs, beam[..., None], axis=1).at[:, :, t].set(token)
    return seqs, scores, jnp.take_along_axis(ended, beam, axis=1) | (token == eos)

  scores = jnp.broadcast_to(jnp.where(jnp.arange(k) == 0, 0.0, NEG), (b, k))  # one live beam
  init = (jnp.full((b, k, max_len), PAD, jnp.int32), scores, jnp.zeros((b, k), bool))
  seqs, scores, ended = jax.lax.fori_loop(0, max_len, step, init)
  length = jnp.where(ended, jnp.argmax(seqs == eos, axis=-1) + 1, max_len)
  best = jnp.argmax(scores / ((5.0 + length) / 6.0) ** length_penalty, axis=1)
  return jnp.take_along_axis(seqs, best[:, None, None], axis=1)[:, 0]
