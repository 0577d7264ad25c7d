"""Per-example grids (packed batches): every absolute encoding's `packed` is its `grid`."""

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
  ("spec", "match"),
  [
    ("sine_1d(resample_method='bilinear')", "resample_method=None"),
    ("embed_2d(resample_method='bicubic_pytorch')", "no per-example version"),
    ("embed_1d(align_corners=True)", "half-pixel centres"),
  ],
)
def test_what_has_no_per_example_version_says_so(spec, match):
  pos = encodings.build(spec, dim=16, grid_shape=SHAPES[0])
  params = pos.init(jax.random.key(0), SHAPES[0], method="grid")
  index, shape = packed_index(SHAPES, 36)
  with pytest.raises(ValueError, match=match):
    pos.apply(params, index, shape, method="packed")
