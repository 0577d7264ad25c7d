"""Times every positional encoding and compares `fourier` with a ViT-B/16 forward pass.

  JAX_PLATFORMS=cpu python benchmarks/encodings.py [--grid 64] [--dim 768]

1. Every registered encoding on a 64x64 grid at D=768 (absolute: the `[4096, 768]`
   table; bias / logits: the `[heads, 4096, 4096]` attention term; rotary: rotating a
   `[1, 4096, heads, 64]` query), including parameter initialisation-free apply only.
2. Eight DETR padding masks at 42x42, D=256: `detr_sine` per example, and `fourier` on
   the same normalised DETR coordinates.
3. `fourier` for the 14x14 grid of ViT-B/16 at 224x224 against a ViT-B/16 forward
   pass at batch 8 (goal: under 1 %).
Prints a Markdown table to paste into benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import machine, time_jitted
from lfpe import encodings
from lfpe.encodings import coords

HEADS, HEAD_DIM = 12, 64


def _apply_fn(name: str, shape: tuple[int, int], dim: int):
  """(fn(variables), variables) evaluating encoding `name` the way a model does."""
  module = encodings.build(
    name, dim=dim, grid_shape=shape, num_heads=HEADS, head_dim=HEAD_DIM, ndim=2
  )
  kind = encodings.kind(name)
  rng = jax.random.key(0)
  n = int(np.prod(shape))
  if kind == "absolute":
    method, args = module.grid, (shape,)
  elif kind == "bias":
    method, args = module.__call__, (shape,)
  elif kind == "logits":
    method, args = module.__call__, (jnp.ones((1, n, HEADS, HEAD_DIM)), shape)
  elif kind == "rotary":
    method, args = module.__call__, (jnp.ones((1, n, HEADS, HEAD_DIM)), module.grid_coords(shape))
  else:
    return None, None
  variables = module.init(rng, *args, method=method)
  return (lambda v: module.apply(v, *args, method=method)), variables


def grid_table(grid: int, dim: int) -> list[tuple[str, str, float]]:
  rows = []
  for name in sorted(encodings.REGISTRY):
    fn, variables = _apply_fn(name, (grid, grid), dim)
    if fn is None:
      continue
    rows.append((name, encodings.kind(name), time_jitted(fn, variables)))
  return rows


def detr_table(batch: int = 8, size: int = 42, dim: int = 256) -> list[tuple[str, float]]:
  rng = np.random.default_rng(0)
  mask = np.ones((batch, size, size), bool)
  for b in range(batch):  # each image valid in a random top-left region
    mask[b, : rng.integers(size // 2, size + 1), : rng.integers(size // 2, size + 1)] = False
  mask = jnp.asarray(mask)
  detr = encodings.create("detr_sine", dim=dim)
  fourier = encodings.create("fourier", dim=dim)
  detr_vars = detr.init(jax.random.key(0), coords.detr(mask))
  fourier_vars = fourier.init(jax.random.key(0), coords.detr(mask))
  return [
    (
      "detr_sine (from mask)",
      time_jitted(lambda v, m: detr.apply(v, coords.detr(m)), detr_vars, mask),
    ),
    (
      "fourier (DETR coords)",
      time_jitted(lambda v, m: fourier.apply(v, coords.detr(m)), fourier_vars, mask),
    ),
  ]


def vit_ratio(batch: int = 8) -> tuple[float, float]:
  """(seconds for `fourier` on the 14x14 grid, seconds for a ViT-B/16 forward pass)."""
  from lfpe.models import vit

  model = vit.Model(1000, image_size=224, variant="B/16", posemb="fourier")
  images = jnp.ones((batch, 224, 224, 3))
  variables = jax.jit(lambda: model.init(jax.random.key(0), images, train=False))()
  t_vit = time_jitted(lambda v, x: model.apply(v, x, train=False), variables, images, repeats=3)
  fn, pe_vars = _apply_fn("fourier", (14, 14), 768)
  return time_jitted(fn, pe_vars), t_vit


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--grid", type=int, default=64)
  parser.add_argument("--dim", type=int, default=768)
  parser.add_argument("--skip-vit", action="store_true")
  args = parser.parse_args()
  print(f"Machine: {machine()}; date {datetime.date.today()}\n")
  print(f"| encoding | kind | {args.grid}x{args.grid}, D={args.dim} (ms) |\n|---|---|---|")
  for name, kind, sec in grid_table(args.grid, args.dim):
    print(f"| `{name}` | {kind} | {sec * 1e3:.3f} |")
  print("\n| 8 DETR masks, 42x42, D=256 | ms |\n|---|---|")
  for name, sec in detr_table():
    print(f"| {name} | {sec * 1e3:.3f} |")
  if not args.skip_vit:
    t_pe, t_vit = vit_ratio()
    print(
      f"\n`fourier` 14x14 grid: {t_pe * 1e3:.3f} ms; ViT-B/16 forward, batch 8: "
      f"{t_vit * 1e3:.1f} ms; ratio {100 * t_pe / t_vit:.3f} %"
    )


if __name__ == "__main__":
  main()
