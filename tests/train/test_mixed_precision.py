"""A bfloat16 train step (configs/vit_b16_imagenet.py's recipe): float32 parameters and
optimizer state, bfloat16 matmuls everywhere but the classifier head."""

import re

import jax
import jax.numpy as jnp

from benchmarks import train_step
from lfpe.train import program, sharding

BATCH = 2


def _step():
  config = train_step.vit_config("Ti/16", "fourier", BATCH, "bfloat16")
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  prog = program.build(config, mesh)
  return prog, prog.train_step.lower(*prog.abstract_inputs(BATCH)).as_text()


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
