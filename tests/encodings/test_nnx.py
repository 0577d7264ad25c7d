"""lfpe.nnx: every registered encoding as an NNX module, with the linen module's numbers."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from test_packed import packed_index

from lfpe import encodings
from lfpe import nnx as pe

SHAPE, DIM, HEADS, HEAD_DIM = (4, 6), 16, 2, 8
CONTEXT = dict(dim=DIM, grid_shape=SHAPE, num_heads=HEADS, head_dim=HEAD_DIM)


def _inputs(module):
  """Example arguments of `module`'s `__call__` on the grid SHAPE."""
  n = int(np.prod(SHAPE))
  tokens = jax.random.normal(jax.random.key(5), (2, n, HEADS, HEAD_DIM))
  return {
    "absolute": lambda: (module.grid_coords(SHAPE),),
    "bias": lambda: (SHAPE,),
    "logits": lambda: (tokens, SHAPE),
    "rotary": lambda: (tokens, module.grid_coords(SHAPE)),
    "none": lambda: (),
  }[module.kind]()


@pytest.mark.parametrize("name", encodings.NAMES)
def test_same_key_same_parameters_same_numbers_as_linen(name):
  pos = pe.build(name, rngs=nnx.Rngs(0), **CONTEXT)
  linen = encodings.build(name, **CONTEXT)
  args = _inputs(linen)
  expected = linen.init(nnx.Rngs(0).params(), *args) if linen.kind != "none" else {}
  got = pos.variables()
  assert jax.tree.structure(got) == jax.tree.structure(expected)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
    np.testing.assert_array_equal(a, b)
  if linen.kind == "none":
    assert pos(*args) is None
    return
  # Perturbed parameters: still the linen module's numbers for the same values.
  moved = jax.tree.map(lambda x: x + 0.1 * jnp.cos(jnp.arange(x.size).reshape(x.shape)), got)
  pos.load(moved)
  np.testing.assert_allclose(pos(*args), linen.apply(moved, *args), rtol=1e-6, atol=1e-6)
  if linen.kind == "absolute":
    np.testing.assert_array_equal(pos.grid(SHAPE), linen.apply(moved, SHAPE, method="grid"))


def test_every_linen_class_has_an_nnx_class_of_its_name():
  for cls in encodings.module_classes():
    nnx_class = getattr(pe, cls.__name__)
    assert issubclass(nnx_class, nnx.Module) and cls.__name__ in pe.__all__
  pos = pe.LearnableFourierMLP(dim=DIM, gamma=0.5, rngs=nnx.Rngs(1))
  assert pos.module.gamma == 0.5 and pos.grid((3, 3)).shape == (9, DIM)
  np.testing.assert_array_equal(pos.grid_coords((3, 3)), pos.module.grid_coords((3, 3)))


def test_trainable_and_constant_variables():
  pos = pe.create("fixed_fourier_mlp", dim=DIM, rngs=nnx.Rngs(0))
  params, constants = nnx.state(pos, nnx.Param), nnx.state(pos, pe.Constant)
  assert "wr" not in str(jax.tree_util.tree_structure(params)) and jax.tree.leaves(constants)
  frozen = jax.tree.leaves(constants)[0].copy()
  optimizer = nnx.Optimizer(pos, optax.sgd(1e-3), wrt=nnx.Param)

  @nnx.jit
  def step(pos, optimizer):
    loss, grads = nnx.value_and_grad(lambda p: jnp.sum(p.grid((4, 4)) ** 2))(pos)
    optimizer.update(pos, grads)
    return loss

  before = jax.tree.map(jnp.copy, nnx.state(pos, nnx.Param))
  first = step(pos, optimizer)
  assert step(pos, optimizer) < first  # the loss goes down
  np.testing.assert_array_equal(jax.tree.leaves(nnx.state(pos, pe.Constant))[0], frozen)
  after = nnx.state(pos, nnx.Param)
  assert any(
    not np.allclose(a, b)
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True)
  )


def test_relative_encodings_need_a_grid():
  with pytest.raises(ValueError, match="grid_shape"):
    pe.create("rel_bias_2d", num_heads=HEADS, rngs=nnx.Rngs(0))
  rope = pe.create("rope_mixed", num_heads=HEADS, head_dim=HEAD_DIM, rngs=nnx.Rngs(0))
  x = jnp.ones((1, 12, HEADS, HEAD_DIM))
  assert rope(x, rope.grid_coords((3, 4))).shape == x.shape  # rotary: any grid


def test_grid_of_a_kind_without_one_says_how_to_call_it():
  """(flax's message spoke of `.setup()`)"""
  bias = pe.create("rel_bias_2d", num_heads=HEADS, grid_shape=(3, 4), rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"a bias encoding adds no vector per cell; .* pos\(shape\)"):
    bias.grid((3, 4))
  rope = pe.create("rope_axial", head_dim=HEAD_DIM, rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"pos\(x, pos.grid_coords\(shape\), shape\)"):
    rope.grid((3, 4))


def test_load_refuses_variables_of_another_shape_naming_the_first():
  """A table trained at 6x6 loaded into a 4x4 module (it loaded, and the first call failed)."""
  small = pe.create("embed_2d", dim=8, grid_shape=(4, 4), rngs=nnx.Rngs(0))
  other = encodings.build("embed_2d", dim=16, grid_shape=(6, 6))
  variables = other.init(jax.random.key(0), (6, 6), method="grid")
  with pytest.raises(
    ValueError,
    match=r"\.load: \['params'\]\['table_0'\] has shape \(6, 8\), this module's \(4, 4\)",
  ):
    small.load(variables)


def test_an_nnx_encoding_inside_an_nnx_model_under_jit():
  class Model(nnx.Module):
    def __init__(self, rngs):
      self.pos = pe.create("sine_2d", dim=DIM, rngs=rngs)
      self.out = nnx.Linear(DIM, 1, rngs=rngs)

    def __call__(self, x):
      return self.out(x + self.pos.grid(SHAPE))

  model = Model(nnx.Rngs(0))
  x = jnp.ones((int(np.prod(SHAPE)), DIM))
  np.testing.assert_allclose(nnx.jit(lambda m, x: m(x))(model, x), model(x), rtol=1e-6)
  assert isinstance(encodings.create("sine_2d", dim=DIM), nn.Module)


@pytest.mark.parametrize(
  "spec", ["rope_axial(scaling='pi')", "rope_axial(scaling='ntk')", "rope_mixed(scaling='pi')"]
)
def test_resolution_policies_give_linen_numbers_at_a_new_grid(spec):
  """The RoPE policies are options of the NNX module too, with the linen module's numbers at a
  grid other than the training one (and axial RoPE builds without num_heads)."""
  context = dict(head_dim=HEAD_DIM, grid_shape=SHAPE)
  if spec.startswith("rope_mixed"):
    context["num_heads"] = HEADS
  pos, linen = pe.build(spec, rngs=nnx.Rngs(0), **context), encodings.build(spec, **context)
  new = (8, 9)
  tokens = jax.random.normal(jax.random.key(6), (1, 72, HEADS, HEAD_DIM))
  coords = pos.grid_coords(new)
  np.testing.assert_array_equal(coords, linen.grid_coords(new))
  want = linen.apply(pos.variables(), tokens, coords, new)
  np.testing.assert_allclose(pos(tokens, coords, new), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["rel_bias_2d", "rel_attn_2d", "rel_cpb_2d"])
def test_relative_packed_batches_give_linen_numbers(name):
  """Relative encodings on packed batches through the NNX module: the linen module's bias or
  logits, `[B, heads, L, L]`, with the query for `rel_attn_2d`."""
  pos, linen = pe.build(name, rngs=nnx.Rngs(0), **CONTEXT), encodings.build(name, **CONTEXT)
  index, shape = packed_index([SHAPE, (3, 5), (6, 2)], 24)
  q = jax.random.normal(jax.random.key(2), (3, 24, HEADS, HEAD_DIM))
  inputs = (q, index, shape) if linen.kind == "logits" else (index, shape)
  want = linen.apply(pos.variables(), *inputs, method="packed")
  assert want.shape == (3, HEADS, 24, 24)
  np.testing.assert_array_equal(pos.packed(*inputs), want)


@pytest.mark.parametrize("name", ["embed_2d", "fourier", "sine_2d", "rope_axial"])
def test_packed_batches_give_linen_numbers(name):
  """NaFlex-packed batches (`lfpe.resolution.pack`) through the NNX module: each token's
  encoding (or coordinates, for RoPE) in its own example's grid, as the linen module gives
  (a learned table resampled per example)."""
  pos, linen = pe.build(name, rngs=nnx.Rngs(0), **CONTEXT), encodings.build(name, **CONTEXT)
  index, shape = packed_index([SHAPE, (3, 5), (6, 8)], 48)
  np.testing.assert_array_equal(pos.packed_coords(index, shape), linen.packed_coords(index, shape))
  if linen.kind == "absolute":
    want = linen.apply(pos.variables(), index, shape, method="packed")
    np.testing.assert_array_equal(pos.packed(index, shape), want)
    np.testing.assert_allclose(pos.packed(index, shape)[2, :48], pos.grid((6, 8)), atol=1e-5)


NEW_GRID_POLICIES = [
  # (spec, context, training grid, new grid)
  ("rope_axial(scaling='yarn')", dict(head_dim=HEAD_DIM), SHAPE, (8, 9)),
  ("rope_axial(scaling='ntk', ntk_factor=2.0)", dict(head_dim=HEAD_DIM), SHAPE, (8, 9)),
  ("rope_axial(coords_mode='dinov3')", dict(head_dim=HEAD_DIM), SHAPE, (8, 9)),
  ("rope_axial_nd", dict(ndim=3, head_dim=24), (2, 3, 4), (3, 5, 6)),
  ("rope_mixed_nd", dict(ndim=3, head_dim=24, num_heads=HEADS), (2, 3, 4), (3, 5, 6)),
  ("sine_1d(resample_method='bicubic_pytorch')", dict(dim=DIM), SHAPE, (8, 9)),
  ("embed_1d(resample_method='bicubic_pytorch')", dict(dim=DIM), (2, 3, 4), (3, 5, 6)),
  ("embed_2d", dict(dim=12), (2, 3, 4), (3, 5, 6)),
  ("rel_cpb_2d", dict(num_heads=HEADS), SHAPE, (8, 9)),
  ("rel_bias_2d(resample_method='beit_geometric')", dict(num_heads=HEADS), SHAPE, (5, 7)),
]


@pytest.mark.parametrize(
  "spec, context, trained, new", NEW_GRID_POLICIES, ids=[p[0] for p in NEW_GRID_POLICIES]
)
def test_every_resolution_option_gives_linen_numbers_at_a_new_grid(spec, context, trained, new):
  """Issue 39's policies and inputs (YaRN, a set NTK factor, DINOv3's coordinates, 3-D RoPE and
  tables, `sine_1d` resampling, SwinV2's continuous bias, BEiT's geometric resize) are options
  of the NNX modules too, with the linen module's numbers at a grid other than the training one."""
  context = {**context, "grid_shape": trained}
  pos, linen = pe.build(spec, rngs=nnx.Rngs(0), **context), encodings.build(spec, **context)
  variables = jax.tree.map(  # perturbed, so a module that ignored its parameters would differ
    lambda x: x + 0.1 * jnp.cos(jnp.arange(x.size).reshape(x.shape)), pos.variables()
  )
  pos.load(variables)
  n, head_dim = int(np.prod(new)), context.get("head_dim", HEAD_DIM)
  tokens = jax.random.normal(jax.random.key(6), (1, n, HEADS, head_dim))
  if linen.kind == "rotary":
    coords = pos.grid_coords(new)
    np.testing.assert_array_equal(coords, linen.grid_coords(new))
    got, want = pos(tokens, coords, new), linen.apply(variables, tokens, coords, new)
  elif linen.kind == "absolute":
    got, want = pos.grid(new), linen.apply(variables, new, method="grid")
  else:
    got, want = pos(new), linen.apply(variables, new)
  assert got.shape == want.shape and not np.allclose(got, 0)
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
