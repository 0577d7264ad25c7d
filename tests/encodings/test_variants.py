"""Every encoding, and the encoder stack with every encoding, with and without `jit`.

`chex.variants` runs each test twice (jitted and not); shape, dtype and finiteness are
`chex.assert_*` contracts, and both variants must give the numbers of a plain `apply`.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import parameterized

from lfpe import encodings
from lfpe.nn.transformer import Encoder

SHAPE, DIM, HEADS, HEAD_DIM = (4, 6), 16, 2, 8
N = SHAPE[0] * SHAPE[1]
CONTEXT = dict(dim=DIM, grid_shape=SHAPE, num_heads=HEADS, head_dim=HEAD_DIM)
# kind -> (example arguments of `__call__`, output shape)
TOKENS = jax.random.normal(jax.random.key(3), (2, N, HEADS, HEAD_DIM))
CASES = {
  "absolute": (lambda m: (m.grid_coords(SHAPE),), (N, DIM)),
  "bias": (lambda m: (SHAPE,), (HEADS, N, N)),
  "logits": (lambda m: (TOKENS, SHAPE), (2, HEADS, N, N)),
  "rotary": (lambda m: (TOKENS, m.grid_coords(SHAPE)), (2, N, HEADS, HEAD_DIM)),
}
WITH_OUTPUT = [n for n in encodings.NAMES if encodings.kind(n) != "none"]


class EncodingVariantsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(*WITH_OUTPUT)
  def test_encoding(self, name):
    module = encodings.build(name, **CONTEXT)
    make_args, shape = CASES[module.kind]
    args = make_args(module)
    variables = module.init(jax.random.key(0), *args)
    out = self.variant(lambda v: module.apply(v, *args))(variables)
    chex.assert_shape(out, shape)
    chex.assert_type(out, jnp.float32)
    chex.assert_tree_all_finite(out)
    np.testing.assert_allclose(out, module.apply(variables, *args), rtol=1e-5, atol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(*encodings.NAMES)
  def test_encoder_stack(self, name):
    """The transformer encoder with each encoding where its kind enters attention."""
    encoder = Encoder(
      depth=1, width=DIM, num_heads=HEADS, mlp_dim=32, grid_shape=SHAPE, posemb=name
    )
    x = jax.random.normal(jax.random.key(1), (2, N, DIM))
    variables = encoder.init(jax.random.key(0), x)
    out = self.variant(lambda v, x: encoder.apply(v, x))(variables, x)
    chex.assert_shape(out, x.shape)
    chex.assert_type(out, jnp.float32)
    chex.assert_tree_all_finite(out)
    # XLA fuses the jitted stack differently: float32 rounding, larger where `index` adds 0..23.
    np.testing.assert_allclose(out, encoder.apply(variables, x), rtol=1e-3, atol=1e-3)
