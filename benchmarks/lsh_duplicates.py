"""What the Reformer paper's duplicate correction costs: LSH attention's forward and backward
with `duplicate_correction=True` against without, timed in the same process.

  python -m benchmarks.lsh_duplicates [--rounds 5]

Shapes: the generation record's layer (`tiny`: 16x16 digits, 256 tokens, 4 heads of 16,
chunk 32, 4 buckets, 2 hashes, every round at once) and a longer one (4,096 tokens, 8 heads
of 64, chunk 128, 32 buckets, 2 hashes, one round at a time as `imagenet64`). One batch of 8
(tiny) or 1 (long), float32. The two settings alternate for `--rounds` rounds; each figure
is the best round's median step (`benchmarks.timing.time_jitted`), on a shared machine the
least disturbed one.
"""

from __future__ import annotations

import argparse
import datetime

import jax
import jax.numpy as jnp

from benchmarks.timing import machine, time_jitted
from lfpe.nn.lsh import lsh_self_attention

SHAPES = {  # name: (batch, length, heads, head_dim, lsh settings)
  "tiny (record)": (8, 256, 4, 16, dict(chunk_len=32, n_buckets=4, rounds_at_once=True)),
  "long": (1, 4096, 8, 64, dict(chunk_len=128, n_buckets=32, rounds_at_once=False)),
}


def step(shape: tuple, duplicate_correction: bool):
  """(fn, args): the gradient of a sum over LSH attention's output, w.r.t. qk and v."""
  batch, length, heads, head_dim, settings = shape
  qk, v = (jax.random.normal(jax.random.key(i), (batch, length, heads, head_dim)) for i in (0, 1))

  def loss(qk, v):
    out = lsh_self_attention(
      qk, v, jax.random.key(2), n_hashes=2, duplicate_correction=duplicate_correction, **settings
    )
    return jnp.sum(jnp.sin(out))

  return jax.grad(loss, argnums=(0, 1)), (qk, v)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=5)
  args = parser.parse_args()
  print(f"{datetime.date.today()}; {machine()}\n")
  print("| shape | plain ms | corrected ms | corrected / plain |\n|---|---|---|---|")
  for name, shape in SHAPES.items():
    best = {}
    for _ in range(args.rounds):
      for corrected in (False, True):
        fn, fn_args = step(shape, corrected)
        seconds = time_jitted(fn, *fn_args, repeats=5, min_seconds=0.2)
        best[corrected] = min(best.get(corrected, seconds), seconds)
    plain, fixed = best[False] * 1e3, best[True] * 1e3
    print(f"| {name} | {plain:.2f} | {fixed:.2f} | {fixed / plain:.2f}x |", flush=True)


if __name__ == "__main__":
  main()
