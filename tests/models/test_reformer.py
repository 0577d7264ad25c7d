"""The Reformer-style image model: causality, position vectors, reversible = plain, checks."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.models import MODELS, reformer
from lfpe.tasks.generation import bits_per_dim

SHAPE = (4, 4, 3)
L = 48
SMALL = dict(width=16, channel_dim=4, depth=2, num_heads=2, mlp_dim=32, chunk_len=8)


def _model(**kwargs):
  return MODELS["reformer"](image_shape=SHAPE, **{**SMALL, **kwargs})


def _init(model, tokens):
  return model.init({"params": jax.random.key(0), "lsh": jax.random.key(1)}, tokens, train=False)


def _apply(model, variables, tokens, key=2, train=False):
  return model.apply(variables, tokens, train=train, rngs={"lsh": jax.random.key(key)})


def _randomize_head(variables):
  """The head is zero at init (uniform logits); give it weights so logits depend on inputs."""
  params = nn.unbox(variables["params"])
  params["head"]["kernel"] = jax.random.normal(jax.random.key(9), params["head"]["kernel"].shape)
  return {**variables, "params": params}


TOKENS = jax.random.randint(jax.random.key(5), (2, L), 0, 256)


def test_a_fresh_model_scores_exactly_eight_bits_per_dim():
  model = _model()
  logits = _apply(model, _init(model, TOKENS), TOKENS)
  assert logits.shape == (2, L, 256)
  assert float(bits_per_dim(logits, TOKENS)) == pytest.approx(8.0, abs=1e-5)


def test_vocab_sizes_the_embedding_and_the_logits():
  model, tokens = _model(vocab=8), TOKENS % 8
  logits = _apply(model, _init(model, tokens), tokens)
  assert logits.shape == (2, L, 8)  # fresh: uniform over 8 values, 3 bits per dim
  assert float(bits_per_dim(logits, tokens)) == pytest.approx(3.0, abs=1e-5)


def test_no_position_control_gives_tokens_only_their_channel_embedding():
  model = _model(posemb="none")
  variables = _init(model, TOKENS)
  vectors = model.apply(variables, method=model.position_vectors)  # [L, width]
  pixels, channels = vectors[:, :12], vectors[:, 12:]
  np.testing.assert_array_equal(pixels, 0.0)
  table = nn.unbox(variables["params"])["channel_embedding"]  # [C, channel_dim]
  np.testing.assert_array_equal(channels, jnp.tile(table, (16, 1)))
  assert "positions" not in variables["params"]  # nothing positional to learn


@pytest.mark.parametrize("attention", ["full", "full_shared", "strict_lsh"])
def test_logit_t_depends_only_on_tokens_before_t(attention):
  """Dense attention exactly; strictly causal LSH up to float summation order (the sort
  moves where the same keys sit in a chunk)."""
  fields = dict(attention="lsh", strictly_causal=True, n_buckets=4)
  model = _model(**(fields if attention == "strict_lsh" else dict(attention=attention)))
  variables = _randomize_head(_init(model, TOKENS))
  t = 20
  changed = TOKENS.at[:, t:].set((TOKENS[:, t:] + 17) % 256)
  before, after = _apply(model, variables, TOKENS), _apply(model, variables, changed)
  atol = 1e-4 if attention == "strict_lsh" else 0.0
  np.testing.assert_allclose(before[:, : t + 1], after[:, : t + 1], rtol=0, atol=atol)
  assert not np.allclose(before[:, t + 1 :], after[:, t + 1 :])


def test_position_vectors_are_pixel_encoding_beside_channel_embedding():
  model = _model(posemb="sine_2d")
  variables = _init(model, TOKENS)
  vectors = model.apply(variables, method=lambda m: m.position_vectors())
  pixel_dim = SMALL["width"] - SMALL["channel_dim"]
  table = encodings.build("sine_2d", dim=pixel_dim, grid_shape=SHAPE[:2], num_heads=2, ndim=2)
  expected = table.apply({}, SHAPE[:2], method=lambda m, g: m.grid(g))  # [16, pixel_dim]
  channels = nn.unbox(variables["params"])["channel_embedding"]
  for token in (0, 1, 2, 3, 29, 47):
    pixel, channel = divmod(token, 3)
    np.testing.assert_allclose(vectors[token, :pixel_dim], expected[pixel], atol=1e-6)
    np.testing.assert_array_equal(vectors[token, pixel_dim:], channels[channel])


def test_one_d_encodings_see_the_raster_index_of_the_pixel():
  model = _model(posemb="sine_1d")
  vectors = model.apply(_init(model, TOKENS), method=lambda m: m.position_vectors())
  # Tokens of one pixel share the pixel part; neighbouring pixels differ.
  np.testing.assert_array_equal(vectors[3, :12], vectors[5, :12])
  assert not np.allclose(vectors[3, :12], vectors[6, :12])


def test_rounds_at_once_reaches_the_lsh_layers_and_keeps_the_loss():
  """model.rounds_at_once=True: the same loss (rounds in one pass, not one at a time), and a
  program without the per-round loop (the field reaches every attention layer)."""
  at_once, one_by_one = _model(rounds_at_once=True, n_hashes=2), _model(n_hashes=2)
  variables = _randomize_head(_init(one_by_one, TOKENS))
  loss = lambda m: bits_per_dim(_apply(m, variables, TOKENS, train=True), TOKENS)
  # Relative: the two programs sum in different orders, so a few ulps apart (1 ulp at 24: 2e-6).
  assert float(loss(at_once)) == pytest.approx(float(loss(one_by_one)), rel=1e-6)
  loops = lambda m: str(jax.make_jaxpr(lambda v: _apply(m, v, TOKENS))(variables)).count("scan[")
  assert loops(one_by_one) - loops(at_once) == one_by_one.depth  # one lax.map per layer


def test_duplicate_correction_reaches_the_lsh_layers():
  """model.duplicate_correction=True changes the loss with 2 hash rounds (keys found in both
  rounds count once) and not with 1 (nothing to correct)."""
  variables = _randomize_head(_init(_model(n_hashes=2), TOKENS))
  loss = lambda **kw: float(bits_per_dim(_apply(_model(**kw), variables, TOKENS), TOKENS))
  assert abs(loss(n_hashes=2, duplicate_correction=True) - loss(n_hashes=2)) > 1e-4
  assert loss(n_hashes=1, duplicate_correction=True) == loss(n_hashes=1)


@pytest.mark.parametrize("attention", ["lsh", "full"])
def test_reversible_stack_gives_the_plain_stacks_logits_and_gradients(attention):
  rev, plain = (
    _model(attention=attention, dropout=0.1),
    _model(attention=attention, dropout=0.1, reversible=False),
  )
  variables = _randomize_head(_init(rev, TOKENS))

  def loss(model, params):
    logits = _apply(model, {**variables, "params": params}, TOKENS, train=True)
    return bits_per_dim(logits, TOKENS)

  (a, ga), (b, gb) = (
    jax.value_and_grad(loss, argnums=1)(m, variables["params"]) for m in (rev, plain)
  )
  assert float(a) == pytest.approx(float(b), abs=1e-5)
  for x, y in zip(jax.tree.leaves(ga), jax.tree.leaves(gb), strict=True):
    np.testing.assert_allclose(x, y, atol=2e-5, rtol=1e-4)


def test_in_bfloat16_the_reversible_stack_keeps_the_plain_stacks_gradients():
  """Sub-layers in bfloat16, streams in float32: the rebuilt inputs carry no bfloat16 rounding
  down the stack, so reversible gradients are as close to float32 ones as plain bfloat16's
  (with bfloat16 streams: 0.17 relative L2 on a 6-layer stack, 0.0075 now)."""
  deep = dict(SMALL, depth=4, attention="full")
  reference = _model(**deep, reversible=False)
  variables = _randomize_head(_init(reference, TOKENS))

  def grads(**kwargs):
    model = _model(**deep, **kwargs)
    loss = lambda params: bits_per_dim(
      _apply(model, {**variables, "params": params}, TOKENS, train=True), TOKENS
    )
    leaves = jax.tree.leaves(jax.jit(jax.grad(loss))(variables["params"]))
    return np.concatenate([np.asarray(x, np.float32).ravel() for x in leaves])

  exact = grads(reversible=False)
  error = lambda g: np.linalg.norm(g - exact) / np.linalg.norm(exact)
  rev, plain = grads(dtype="bfloat16"), grads(dtype="bfloat16", reversible=False)
  assert error(rev) < 2 * error(plain) + 1e-3, (error(rev), error(plain))


def test_training_hashes_change_with_the_key_evaluation_does_not():
  model = _model(attention="lsh")
  variables = _randomize_head(_init(model, TOKENS))
  a, b = _apply(model, variables, TOKENS, key=3), _apply(model, variables, TOKENS, key=4)
  assert not np.allclose(a, b)
  np.testing.assert_array_equal(a, _apply(model, variables, TOKENS, key=3))


def test_samples_follow_the_model():
  model = _model(attention="full")
  variables = _init(model, TOKENS)
  params = nn.unbox(variables["params"])
  params["head"]["bias"] = jnp.zeros(256).at[7].set(50.0)  # almost surely value 7
  images = reformer.sample(model, {**variables, "params": params}, jax.random.key(0), 2)
  assert images.shape == (2, *SHAPE) and images.dtype == jnp.uint8
  assert np.all(np.asarray(images) == 7)


@pytest.mark.parametrize(
  "kwargs, field",
  [
    ({"posemb": "rel_bias_2d"}, "model.posemb"),
    ({"channel_dim": 16}, "model.channel_dim"),
    ({"vocab": 0}, "model.vocab"),
    ({"attention": "sparse"}, "model.attention"),
    ({"strictly_causal": 1}, "model.strictly_causal"),
    ({"rounds_at_once": "yes"}, "model.rounds_at_once"),
    ({"duplicate_correction": 1}, "model.duplicate_correction"),
    ({"not_a_field": 1}, "model.not_a_field"),
    ({"variant": "huge"}, "model.variant"),
    ({"posemb": "fourier(gama=1)"}, "gama"),
  ],
)
def test_bad_fields_fail_when_the_model_is_defined(kwargs, field):
  with pytest.raises(ValueError, match=field):
    _model(**kwargs)


def test_variants_set_the_papers_sizes():
  model = MODELS["reformer"](image_shape=(64, 64, 3), variant="imagenet64")
  assert (model.width, model.depth, model.num_heads, model.mlp_dim) == (1024, 6, 8, 4096)
  assert model.width - model.channel_dim == 768 and model.chunk_len == 128
