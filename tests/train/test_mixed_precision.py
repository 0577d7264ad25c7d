"""A bfloat16 train step (configs/vit_b16_imagenet.py's recipe): float32 parameters and
optimizer state, bfloat16 matmuls everywhere but the classifier head, and no redundant
casts (issue 40: the glue a GPU step pays for in memory traffic)."""

import collections
import re

import jax
import jax.numpy as jnp

from benchmarks import train_step
from lfpe.train import program, sharding

BATCH = 2


def _step():
  prog = _program()
  return prog, prog.train_step.lower(*prog.abstract_inputs(BATCH)).as_text()


def _program():
  config = train_step.vit_config("Ti/16", "fourier", BATCH, "bfloat16")
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  return program.build(config, mesh)


def test_parameters_and_optimizer_state_stay_float32():
  prog, _ = _step()
  state = jax.eval_shape(prog.init_state)
  floats = [x.dtype for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.floating)]
  assert floats and set(floats) == {jnp.dtype("float32")}


def test_every_token_matmul_runs_in_bfloat16():
  """Each dot over the 197 tokens (q, k, v, out, MLP; forward and backward) takes bfloat16
  operands; only the head's `[B, width] x [width, 1000]` dots and the encoding's MLP over the
  grid run in float32.

  Known exception, jax's and not lfpe's: the backward of XLA's attention (the path on CPU
  and TPU; cuDNN's kernel on a GPU) multiplies the float32 cotangent of its float32 logits
  (`preferred_element_type=float32`) by bfloat16 q, k or the probabilities: dots with a
  `[B, h, 197, 1, 197]` operand, excluded here and named in benchmarks/README.md."""
  _, text = _step()
  dots = re.findall(r"stablehlo\.dot_general[^\n]*: \((tensor<[^>]*>), (tensor<[^>]*>)\)", text)
  token_dots = [d for d in dots if any("197x" in t for t in d)]
  attention_logits = [d for d in token_dots if any("x197x1x197x" in t for t in d)]
  assert len(token_dots) - len(attention_logits) > 100  # 12 x (q, k, v, out, fc1, fc2) x 3
  wide = [d for d in token_dots if d not in attention_logits and not all("xbf16>" in t for t in d)]
  assert not wide, wide[:3]
  # float32 otherwise: the head, and Learnable-Fourier's MLP over the 196 grid positions
  # (once per grid, no batch axis; its forward and backward).
  float_dots = [d for d in dots if d not in attention_logits and not all("xbf16>" in t for t in d)]
  head_or_grid = lambda a, b: "1000" in a + b or "<196x1x" in a + b
  assert float_dots and all(head_or_grid(*d) for d in float_dots), float_dots[:3]


def _equations(jaxpr):
  """Every equation of `jaxpr` and of the jaxprs nested in it (jit, custom_vjp, ...), with the
  equations of its own level first: `(level, equation)`."""
  for eqn in jaxpr.eqns:
    yield jaxpr, eqn
    for param in eqn.params.values():
      for sub in param if isinstance(param, (list, tuple)) else [param]:
        inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr
        if hasattr(inner, "eqns"):
          yield from _equations(inner)


def _casts(jaxpr) -> list:
  return [
    (level, e) for level, e in _equations(jaxpr) if e.primitive.name == "convert_element_type"
  ]


def test_no_value_is_cast_twice_in_a_row_and_each_weight_once():
  """The step's jaxpr: no cast of a cast's output (a float32 -> bfloat16 -> float32 round
  trip, or a cast undone by the next), and each float32 weight matrix cast to bfloat16 at most
  once per step (its forward use; the backward reuses the cast value). Flax's LayerNorm casts
  its bfloat16 input to float32 twice (for the moments and for the normalisation): two casts
  of one value, which XLA merges, not a chain; this test does not count them."""
  prog = _program()
  jaxpr = jax.make_jaxpr(prog.train_step)(*prog.abstract_inputs(BATCH)).jaxpr
  casts = _casts(jaxpr)
  made_by_cast = {(id(level), id(e.outvars[0])) for level, e in casts}
  chains = [e for level, e in casts if (id(level), id(e.invars[0])) in made_by_cast]
  assert not chains, chains[:3]

  params = jax.eval_shape(prog.init_state).params
  weights = collections.Counter(
    x.shape for x in jax.tree.leaves(params) if x.ndim >= 2 and x.dtype == jnp.float32
  )
  to_bf16 = collections.Counter(
    e.invars[0].aval.shape
    for _, e in casts
    if e.invars[0].aval.dtype == jnp.float32 and e.outvars[0].aval.dtype == jnp.bfloat16
  )
  cast_weights = {shape: to_bf16[shape] for shape in weights if to_bf16[shape]}
  assert sum(cast_weights.values()) >= 12 * 6  # q, k, v, out, fc1, fc2 of 12 layers
  assert all(n <= weights[shape] for shape, n in cast_weights.items()), (cast_weights, weights)
