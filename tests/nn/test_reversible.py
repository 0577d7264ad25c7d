"""Reversible stacks against the plain and rematerialised stacks; the chunked feed-forward."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.nn.attention import Attention
from lfpe.nn.reversible import ChunkedFeedForward, ReversibleStack, merge_streams

B, L, D, MLP = 2, 7, 8, 16
RATE = 0.2


class _AttentionSublayer(nn.Module):
  """LayerNorm -> attention -> dropout from the explicit key (an F like Reformer's)."""

  dropout: float = RATE

  @nn.compact
  def __call__(self, x, *, key, deterministic=True):
    y = Attention(num_heads=2)(nn.LayerNorm()(x))
    return nn.Dropout(self.dropout)(y, deterministic=deterministic, rng=key)


def _stack(depth=2, **kwargs):
  g = ChunkedFeedForward(mlp_dim=MLP, dropout=RATE, chunk_len=3)  # L=7: padded chunks
  return ReversibleStack(f=_AttentionSublayer(), g=g, depth=depth, **kwargs)


def _inputs(seed=0, length=L, width=D):
  rng = np.random.default_rng(seed)
  return tuple(rng.normal(size=(B, length, width)).astype(np.float32) for _ in range(2))


def _init(stack, x1, x2):
  return jax.jit(lambda a, b: stack.init(jax.random.key(0), a, b, key=jax.random.key(1)))(x1, x2)


def _apply(stack, variables, x1, x2, *, seed=2, deterministic=False, method="__call__"):
  """`stack.apply`, compiled (op by op, the chunked scan is slow)."""
  run = lambda v, a, b, key: stack.apply(
    v, a, b, key=key, deterministic=deterministic, method=method
  )
  return jax.jit(run)(variables, x1, x2, jax.random.key(seed))


def _loss(stack, deterministic=False):
  """A loss of both streams' outputs, weighted so that neither cotangent is uniform."""

  def loss(variables, x1, x2):
    y1, y2 = stack.apply(variables, x1, x2, key=jax.random.key(2), deterministic=deterministic)
    w = jnp.linspace(-1.0, 1.0, y1.size).reshape(y1.shape)
    return jnp.sum(w * y1) + jnp.sum(jnp.sin(y2))

  return loss


def _grads(stack, variables, x1, x2, deterministic=False):
  return jax.jit(jax.grad(_loss(stack, deterministic), argnums=(0, 1, 2)))(variables, x1, x2)


def _assert_trees_close(a, b, tol):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


def test_parameters_are_per_layer_copies_and_the_same_in_every_mode():
  x1, x2 = _inputs()
  trees = [
    jax.tree.map(jnp.shape, jax.eval_shape(functools.partial(_init, _stack(**mode)), x1, x2))
    for mode in (dict(), dict(reversible=False), dict(reversible=False, remat=True))
  ]
  assert trees[0] == trees[1] == trees[2]
  assert sorted(trees[0]["params"]) == ["f_0", "f_1", "g_0", "g_1"]


@pytest.mark.parametrize("deterministic", [True, False])
def test_reversible_forward_equals_plain_stack(deterministic):
  x1, x2 = _inputs()
  variables = _init(_stack(), x1, x2)
  outs = [
    _apply(_stack(reversible=r), variables, x1, x2, deterministic=deterministic)
    for r in (True, False)
  ]
  _assert_trees_close(outs[0], outs[1], 1e-6)


def test_dropout_draws_from_the_key():
  x1, x2 = _inputs()
  stack = _stack()
  variables = _init(stack, x1, x2)
  out = lambda **kwargs: _apply(stack, variables, x1, x2, **kwargs)[1]
  assert np.array_equal(out(), out())
  assert not np.allclose(out(), out(seed=3))
  assert not np.allclose(out(), out(deterministic=True))


@pytest.mark.parametrize("deterministic", [True, False])
def test_reversible_gradients_equal_plain_stack(deterministic):
  """Parameters and both inputs; with dropout the backward pass must redraw the same masks."""
  x1, x2 = _inputs()
  variables = _init(_stack(), x1, x2)
  reversible = _grads(_stack(), variables, x1, x2, deterministic)
  plain = _grads(_stack(reversible=False), variables, x1, x2, deterministic)
  _assert_trees_close(reversible, plain, 1e-5)
  assert all(np.abs(g).max() > 0 for g in jax.tree.leaves(plain[0]))


def test_rematerialised_gradients_equal_plain_stack():
  x1, x2 = _inputs()
  variables = _init(_stack(), x1, x2)
  remat = _grads(_stack(reversible=False, remat=True), variables, x1, x2)
  plain = _grads(_stack(reversible=False), variables, x1, x2)
  _assert_trees_close(remat, plain, 1e-5)


def test_inputs_are_rebuilt_from_outputs():
  x1, x2 = _inputs()
  stack = _stack(depth=3)
  variables = _init(stack, x1, x2)
  y1, y2 = _apply(stack, variables, x1, x2)
  r1, r2 = _apply(stack, variables, y1, y2, method="invert")
  np.testing.assert_allclose(r1, x1, atol=1e-5)
  np.testing.assert_allclose(r2, x2, atol=1e-5)
  # The wrong key redraws other masks: nothing is rebuilt.
  w1, _ = _apply(stack, variables, y1, y2, seed=3, method="invert")
  assert not np.allclose(w1, x1, atol=1e-3)


def test_stack_rejects_remat_of_the_reversible_stack():
  with pytest.raises(ValueError, match="reversible=False"):
    _stack(remat=True)


def test_merge_streams():
  y1, y2 = _inputs()
  assert merge_streams(y1, y2, how="concat").shape == (B, L, 2 * D)
  np.testing.assert_allclose(merge_streams(y1, y2, how="mean"), (y1 + y2) / 2)
  with pytest.raises(ValueError, match="concat"):
    merge_streams(y1, y2, how="sum")


def _feed_forward_reference(p, x):
  """x -> LN -> W1 -> gelu -> W2 in numpy-like jnp, no dropout."""
  mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  h = (x - mu) / jnp.sqrt(var + 1e-6) * p["norm"]["scale"] + p["norm"]["bias"]
  fc1, fc2 = p["mlp"]["fc1"], p["mlp"]["fc2"]
  return nn.gelu(h @ fc1["kernel"] + fc1["bias"]) @ fc2["kernel"] + fc2["bias"]


def _output_and_grads(module, variables, x, deterministic):
  out = lambda v, x: module.apply(v, x, key=jax.random.key(4), deterministic=deterministic)
  loss = lambda v, x: jnp.sum(jnp.sin(out(v, x)))
  return out(variables, x), jax.grad(loss, argnums=(0, 1))(variables, x)


def test_chunked_feed_forward_equals_unchunked():
  """Chunks dividing the length, padded ones, one chunk; with and without dropout."""
  x, _ = _inputs(length=9)
  unchunked = ChunkedFeedForward(mlp_dim=MLP, dropout=RATE)
  variables = jax.jit(lambda x: unchunked.init(jax.random.key(0), x, key=None))(x)
  np.testing.assert_allclose(
    unchunked.apply(variables, x, key=None),
    _feed_forward_reference(nn.meta.unbox(variables)["params"], x),
    atol=1e-5,
  )

  @jax.jit
  def run(x):
    """Per chunk length: the output and the gradients, with dropout and without."""
    results = {}
    for chunk_len in (0, 2, 3, 9):
      module = ChunkedFeedForward(mlp_dim=MLP, dropout=RATE, chunk_len=chunk_len)
      assert jax.eval_shape(module.init, jax.random.key(0), x, key=None) == jax.eval_shape(
        unchunked.init, jax.random.key(0), x, key=None
      )
      for deterministic in (True, False):
        results[chunk_len, deterministic] = _output_and_grads(module, variables, x, deterministic)
    return results

  results = run(x)
  for (_, deterministic), result in results.items():
    _assert_trees_close(result, results[0, deterministic], 1e-6)
  dropped = results[3, False][0]
  assert not np.allclose(dropped, results[3, True][0])
  assert 0.1 < np.mean(dropped == 0) < 0.3  # the output dropout's rate, 0.2


def test_chunked_feed_forward_needs_a_key_for_dropout():
  x, _ = _inputs()
  module = ChunkedFeedForward(mlp_dim=MLP, dropout=RATE, chunk_len=3)
  variables = module.init(jax.random.key(0), x, key=None)
  with pytest.raises(ValueError, match="key="):
    module.apply(variables, x, key=None, deterministic=False)


def test_chunked_feed_forward_never_holds_the_whole_hidden_activation():
  """Temporary memory of the gradient, with dropout: chunks of 64 of 512 positions."""
  x = np.random.default_rng(0).normal(size=(2, 512, 16)).astype(np.float32)
  hidden = x.nbytes * 256 // 16  # [B, L, mlp_dim] in float32

  def temp(chunk_len):
    module = ChunkedFeedForward(mlp_dim=256, dropout=RATE, chunk_len=chunk_len)
    variables = jax.eval_shape(module.init, jax.random.key(0), x, key=None)
    out = lambda v, x: module.apply(v, x, key=jax.random.key(4), deterministic=False)
    grad = jax.jit(jax.grad(lambda v, x: jnp.sum(jnp.sin(out(v, x))), argnums=(0, 1)))
    analysis = grad.lower(variables, x).compile().memory_analysis()
    if analysis is None:
      pytest.skip("this backend gives no memory analysis")
    return analysis.temp_size_in_bytes

  unchunked, chunked = temp(0), temp(64)
  assert unchunked > 2 * hidden
  assert chunked < min(1.5 * hidden, unchunked / 3)


def _temp_bytes(stack, x1, x2):
  variables = jax.eval_shape(functools.partial(_init, stack), x1, x2)
  grad = jax.jit(jax.grad(_loss(stack, deterministic=True), argnums=(0, 1, 2)))
  analysis = grad.lower(variables, x1, x2).compile().memory_analysis()
  if analysis is None:
    pytest.skip("this backend gives no memory analysis")
  return analysis.temp_size_in_bytes


def test_reversible_activation_memory_does_not_grow_with_depth():
  """Temporary memory of the gradient from depth 2 to 8: plain grows per layer, reversible not.

  Deterministic: XLA:CPU drops optimisation barriers before CSE, so there the backward pass's
  dropout masks are merged with the forward pass's and kept (rematerialisation saves nothing
  on CPU either); on GPU and TPU the barriers hold.
  """
  x1, x2 = _inputs(length=64, width=32)
  growth = {
    mode: _temp_bytes(_stack(depth=8, reversible=mode), x1, x2)
    - _temp_bytes(_stack(depth=2, reversible=mode), x1, x2)
    for mode in (True, False)
  }
  assert growth[False] > 6 * 4 * x1.nbytes  # at least 4 stored activations per extra layer
  assert growth[True] < growth[False] / 4
