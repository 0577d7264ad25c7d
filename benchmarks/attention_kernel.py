"""Which kernel the fused attention takes, and its time: one train step's attention call.

  python -m benchmarks.attention_kernel [--tokens 197] [--batch 256] [--heads 12]
      [--head-dim 64] [--dtype bfloat16] [--pad 0,64] [--steps 20]

For each `--pad` (0: `lfpe.nn.fused.fused_attention` as the models call it, cuDNN where
it takes the call, else the padded cuDNN call, else XLA; N: cuDNN on the sequences padded to
a multiple of N with the true lengths, `pad_multiple=N`, its refusal printed if it refuses)
and for XLA's einsum-softmax-einsum (`xla`), compiles the forward and backward of
`sum(attention(q, k, v))` and prints whether the compiled program calls cuDNN's fused
attention (a `__cudnn$fmha` custom call) and the median time.
ViT-B/16 at 224 px is the default: 197 tokens, which cuDNN refuses unpadded.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

from benchmarks.timing import machine, time_jitted
from lfpe.nn.fused import fused_attention


def step(pad: int | None, implementation: str | None):
  def loss(q, k, v):
    return jnp.sum(fused_attention(q, k, v, implementation=implementation, pad_multiple=pad))

  return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tokens", type=int, default=197)
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--heads", type=int, default=12)
  parser.add_argument("--head-dim", type=int, default=64)
  parser.add_argument("--dtype", default="bfloat16")
  parser.add_argument(
    "--pad", default="0,64", help="0: as the models call it; N: cuDNN padded to N"
  )
  parser.add_argument("--steps", type=int, default=20)
  args = parser.parse_args(argv)
  shape = (args.batch, args.tokens, args.heads, args.head_dim)
  keys = jax.random.split(jax.random.key(0), 3)
  q, k, v = (jax.random.normal(key, shape, args.dtype) for key in keys)
  print(f"{machine()}; {jax.devices()[0].device_kind}; q, k, v {shape} {args.dtype}")
  print("| call | cuDNN fused attention | ms (median) |\n|---|---|---|")
  pads = [int(p) for p in args.pad.split(",")]
  rows = [
    ("as the models call it", None, None) if not p else (f"cuDNN, padded to {p}", p, "cudnn")
    for p in pads
  ]
  rows.append(("XLA", None, "xla"))
  for name, pad, implementation in rows:
    fn = step(pad, implementation)
    try:
      compiled = fn.lower(q, k, v).compile()
    except Exception as e:  # noqa: BLE001 (a refused kernel: report it, go on)
      print(f"| {name} | refused: {type(e).__name__}: {str(e)[:80]} | |")
      continue
    cudnn = "__cudnn$fmha" in compiled.as_text()
    seconds = time_jitted(fn, q, k, v, repeats=args.steps)
    print(f"| {name} | {'yes' if cudnn else 'no'} | {1000 * seconds:.2f} |")


if __name__ == "__main__":
  main()
