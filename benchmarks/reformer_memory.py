"""Memory of the Reformer's compiled train step at length 12,288, measured ahead of time.

  python -m benchmarks.reformer_memory                       # this CPU
  python -m benchmarks.reformer_memory --topology v5e:1x1    # a TPU chip (needs libtpu)

Nothing runs: each function is lowered and compiled for one device, and XLA's memory
analysis gives its temporaries (activations and scratch; parameters and inputs are
arguments, counted apart). Sizes are `configs/reformer_imagenet64.py`'s (d_model 1024,
8 heads, d_ff 4096, chunk 128, 2 hashes, 192 buckets, 64x64x3 = 12,288 tokens), one image
per device, in `--dtype`.

1. Attention: one attention sub-layer (LayerNorm + attention), forward and backward, with
   `lsh` (also with the paper's `duplicate_correction`), `full_shared` and `full` attention
   (goal: LSH at most 10 % of full's memory).
2. Stack: the whole model's gradient at depths 2, 6 and 12 with the reversible, plain and
   rematerialised stacks (goal: reversible activation memory that does not grow with depth).
"""

from __future__ import annotations

import argparse
import datetime

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import topologies

from lfpe.models import reformer
from lfpe.nn.causal_attention import CausalSelfAttention
from lfpe.tasks.generation import bits_per_dim

SHAPE = (64, 64, 3)
LENGTH = int(np.prod(SHAPE))
SIZES = reformer.VARIANTS["imagenet64"]
ATTENTIONS = {
  "lsh": dict(attention="lsh"),
  "lsh+dup": dict(attention="lsh", duplicate_correction=True),
  "full_shared": dict(attention="full_shared"),
  "full": dict(attention="full"),
}
STACKS = {"reversible": dict(reversible=True), "plain": dict(reversible=False)}
STACKS["remat"] = dict(reversible=False, remat=True)


def device(topology: str | None):
  """This CPU, or the first chip of a TPU topology (compile only)."""
  return (
    jax.devices("cpu")[0]
    if topology is None
    else (topologies.get_topology_desc(topology, "tpu").devices[0])
  )


def temp_gib(fn, dev, *args) -> float:
  """XLA's temporary bytes of `jit(fn)(*args)` compiled for `dev`, in GiB."""
  sharding = jax.sharding.SingleDeviceSharding(dev)
  specs = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), args)
  compiled = jax.jit(fn).lower(*specs).compile()
  return compiled.memory_analysis().temp_size_in_bytes / 2**30


def attention_memory(attention: dict, dev, dtype: str) -> float:
  layer = reformer.AttentionSublayer(
    attention=CausalSelfAttention(
      num_heads=SIZES["num_heads"],
      **attention,
      chunk_len=SIZES["chunk_len"],
      n_buckets=SIZES["n_buckets"],
      n_hashes=SIZES["n_hashes"],
      dtype=dtype,
    ),
    dtype=dtype,
  )
  x = jax.ShapeDtypeStruct((1, LENGTH, SIZES["width"]), jnp.dtype(dtype))
  key = jax.random.key(0)
  params = jax.eval_shape(lambda: layer.init(key, jnp.zeros(x.shape, x.dtype), key=key))

  def loss(params, x):
    return jnp.sum(layer.apply(params, x, key=key).astype(jnp.float32))

  return temp_gib(jax.grad(loss, argnums=(0, 1)), dev, params, x)


def stack_memory(depth: int, stack: dict, dev, dtype: str) -> float:
  model = reformer.Model(image_shape=SHAPE, variant="imagenet64", depth=depth, dtype=dtype, **stack)
  tokens = jax.ShapeDtypeStruct((1, LENGTH), jnp.int32)
  rngs = {"params": jax.random.key(0), "lsh": jax.random.key(1)}
  params = jax.eval_shape(lambda: model.init(rngs, jnp.zeros(tokens.shape, jnp.int32), train=False))

  def loss(params, tokens):
    logits = model.apply(params, tokens, train=True, rngs={"lsh": jax.random.key(2)})
    return bits_per_dim(logits, tokens)

  return temp_gib(jax.grad(loss), dev, params, tokens)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--topology", default=None, help="e.g. v5e:1x1 (default: this CPU)")
  parser.add_argument("--dtype", default="bfloat16")
  parser.add_argument("--depths", default="2,6,12")
  parser.add_argument("--parts", default="attention,stack", help="attention, stack or both")
  parser.add_argument("--stacks", default=",".join(STACKS))
  parser.add_argument("--attentions", default=",".join(ATTENTIONS), help="rows; full is the base")
  args = parser.parse_args()
  dev = device(args.topology)
  print(
    f"{datetime.date.today()}; jax {jax.__version__}; {dev.device_kind}; {args.dtype}; "
    f"L={LENGTH}, one image\n"
  )
  if "attention" in args.parts:
    print("| attention sub-layer | temps GiB | vs full |\n|---|---|---|")
    names = dict.fromkeys([*args.attentions.split(","), "full"])
    attention = {a: attention_memory(ATTENTIONS[a], dev, args.dtype) for a in names}
    for name, gib in attention.items():
      print(f"| {name} | {gib:.3f} | {gib / attention['full']:.1%} |", flush=True)
  if "stack" not in args.parts:
    return
  depths = [int(d) for d in args.depths.split(",")]
  print("\n| stack | " + " | ".join(f"depth {d} GiB" for d in depths) + " |")
  print("|---|" + "---|" * len(depths))
  for name in args.stacks.split(","):
    stack = STACKS[name]
    cells = [f"{stack_memory(d, stack, dev, args.dtype):.3f}" for d in depths]
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
  main()
