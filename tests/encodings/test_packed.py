"""Per-example grids (packed batches): every encoding's `packed` is what each example's own
grid gives (`grid` for absolute kinds, the bias or logits of relative tables)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import registry

SHAPES = [(4, 4), (3, 6), (6, 5), (2, 3)]  # the training grid, then others: up, down, mixed
ABSOLUTE = sorted(n for n, r in registry.REGISTRATIONS.items() if r.kind == "absolute")


def packed_index(shapes, length):
  """`[B, L, 2]` cells of each grid in raster order (padding: cell 0), `[B, 2]` shapes."""
  index = np.zeros((len(shapes), length, 2), np.int32)
  for b, (h, w) in enumerate(shapes):
    cells = np.stack(np.meshgrid(np.arange(h), np.arange(w), indexing="ij"), -1).reshape(-1, 2)
    index[b, : len(cells)] = cells
  return jnp.asarray(index), jnp.asarray(shapes, jnp.int32)


@pytest.mark.parametrize("name", ABSOLUTE)
def test_packed_is_the_grid_of_each_example(name):
  pos = encodings.build(name, dim=16, grid_shape=SHAPES[0], num_heads=2)
  params = pos.init(jax.random.key(0), SHAPES[0], method="grid")
  index, shape = packed_index(SHAPES, 36)
  got = jax.jit(lambda p, i, s: pos.apply(p, i, s, method="packed"))(params, index, shape)
  for b, s in enumerate(SHAPES):
    want = pos.apply(params, s, method="grid")
    np.testing.assert_allclose(got[b, : len(want)], want, rtol=1e-5, atol=1e-6, err_msg=str(s))


@pytest.mark.parametrize(
  "spec",
  [
    "embed_1d(resample_method='bicubic_pytorch')",  # RoPE-ViT's APE: PyTorch's bicubic
    "embed_2d(resample_method='bicubic_pytorch')",
    "embed_2d(resample_method='bilinear', antialias=False)",
    "sine_1d(resample_method='bilinear')",  # MAE's fixed table, resampled
    "sine_1d(resample_method='bicubic_pytorch')",
  ],
)
def test_resampling_policies_are_per_example(spec):
  pos = encodings.build(spec, dim=16, grid_shape=SHAPES[0])
  params = pos.init(jax.random.key(0), SHAPES[0], method="grid")
  index, shape = packed_index(SHAPES, 36)
  got = pos.apply(params, index, shape, method="packed")
  for b, s in enumerate(SHAPES):
    want = pos.apply(params, s, method="grid")
    np.testing.assert_allclose(got[b, : len(want)], want, rtol=1e-5, atol=1e-6, err_msg=str(s))


RELATIVE = [
  "rel_bias_2d",  # Swin's PyTorch bicubic
  "rel_bias_2d(resample_method='bicubic')",
  "rel_bias_2d(resample_method='bilinear')",
  "rel_attn_2d",
  "rel_attn_2d(per_head=True, resample_method='bicubic_pytorch')",
]


@pytest.mark.parametrize("spec", RELATIVE)
def test_relative_tables_give_each_example_its_own_grids_numbers(spec):
  """A relative table on a packed batch: each example's bias (or logits) is the one its own
  grid gets from the table resampled to it, to float32 rounding; padding pairs are ignored."""
  shapes = [*SHAPES, (1, 5)]  # and a grid with one row: a single row offset
  pos = encodings.build(spec, grid_shape=SHAPES[0], num_heads=2, head_dim=8)
  index, shape = packed_index(shapes, 32)
  q = jax.random.normal(jax.random.key(1), (len(shapes), 32, 2, 8))
  inputs = (q,) if pos.kind == "logits" else ()
  params = pos.init(jax.random.key(0), *(x[:1, :16] for x in inputs))
  got = jax.jit(lambda p, *x: pos.apply(p, *x, method="packed"))(params, *inputs, index, shape)
  assert got.shape == (len(shapes), 2, 32, 32)
  for b, s in enumerate(shapes):
    n = s[0] * s[1]
    want = pos.apply(params, *(x[b : b + 1, :n] for x in inputs), s)
    want = want[0] if pos.kind == "logits" else want
    np.testing.assert_allclose(got[b, :, :n, :n], want, rtol=1e-5, atol=1e-6, err_msg=str(s))


def test_every_encoding_takes_packed_batches_at_its_defaults():
  assert [n for n in registry.NAMES if encodings.packed_refusal(n)] == []


@pytest.mark.parametrize(
  ("spec", "match"),
  [
    ("rel_bias_2d(resample_method='beit_geometric')", "no per-example version"),
    ("embed_1d(align_corners=True)", "half-pixel centres"),
    ("sine_1d(resample_method='bicubic', align_corners=True)", "half-pixel centres"),
  ],
)
def test_what_has_no_per_example_version_says_so(spec, match):
  assert match in encodings.packed_refusal(spec)
  pos = encodings.build(spec, dim=16, grid_shape=SHAPES[0], num_heads=2)
  key = jax.random.key(0)
  params = pos.init(key) if pos.kind == "bias" else pos.init(key, SHAPES[0], method="grid")
  index, shape = packed_index(SHAPES, 36)
  with pytest.raises(ValueError, match=match):
    pos.apply(params, index, shape, method="packed")
