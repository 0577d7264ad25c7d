"""NaFlex-packed ViT train step against padding every example to the largest size.

  JAX_PLATFORMS=cpu python -m benchmarks.naflex [--batch 32] [--tokens 32] [--width 192]

One batch of images of mixed sizes and aspect ratios (whole 16 px patches, each at most
`--tokens` patches), one ViT (patch 16, `--width`, `--depth`, Learnable-Fourier positions)
and one train step (softmax cross-entropy, Adam), compiled and timed two ways in the same
run: (a) packed, `lfpe.resolution.pack` to `--tokens` tokens per example with padding
masked; (b) every image zero-padded to the batch's largest height and width (the canvas
without packing), all of its tokens computed. Prints a Markdown table for
benchmarks/README.md: tokens per example, step time, examples/s and the ratio b / a.
"""

from __future__ import annotations

import argparse
import datetime

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.timing import machine, time_jitted
from lfpe import resolution
from lfpe.models import vit

PATCH = 16
SIZES = ((128, 32), (32, 128), (64, 64), (128, 64), (64, 128), (96, 80), (80, 96), (32, 32))


def batch_images(batch: int, seed: int = 0) -> list[np.ndarray]:
  """`batch` images whose sizes cycle through `SIZES` (each at most 32 patches)."""
  rng = np.random.default_rng(seed)
  return [rng.normal(size=(*SIZES[i % len(SIZES)], 3)).astype(np.float32) for i in range(batch)]


def canvas(images: list[np.ndarray]) -> np.ndarray:
  """Every image zero-padded (bottom, right) to the largest height and width."""
  h, w = max(i.shape[0] for i in images), max(i.shape[1] for i in images)
  out = np.zeros((len(images), h, w, 3), np.float32)
  for b, image in enumerate(images):
    out[b, : image.shape[0], : image.shape[1]] = image
  return out


def train_step(model: vit.ViT, tx: optax.GradientTransformation):
  """(params, opt, inputs, labels) -> (params, opt, loss)."""

  def step(params, opt, inputs, labels):
    def loss(p):
      logits = model.apply(p, inputs, train=False)
      return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    value, grads = jax.value_and_grad(loss)(params)
    updates, opt = tx.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt, value

  return step


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--tokens", type=int, default=32, help="packed tokens per example")
  parser.add_argument("--width", type=int, default=192)
  parser.add_argument("--depth", type=int, default=4)
  args = parser.parse_args(argv)
  model = vit.ViT(
    num_classes=10,
    image_size=128,
    patch_size=PATCH,
    width=args.width,
    depth=args.depth,
    num_heads=args.width // 64,
    mlp_dim=4 * args.width,
    posemb="fourier",
  )
  images = batch_images(args.batch)
  labels = jnp.arange(args.batch) % 10
  packed = jax.tree.map(jnp.asarray, resolution.pack(images, (PATCH, PATCH), args.tokens))
  padded = jnp.asarray(canvas(images))
  params = model.init(jax.random.key(0), padded[:1], train=False)
  tx = optax.adam(1e-3)
  step = train_step(model, tx)
  opt = tx.init(params)
  packed_s = time_jitted(step, params, opt, packed, labels)
  padded_s = time_jitted(step, params, opt, padded, labels)
  grid = (padded.shape[1] // PATCH) * (padded.shape[2] // PATCH)
  used = float(np.asarray(packed["valid"]).sum(1).mean())
  print(f"{datetime.date.today()}, {machine()}")
  print(
    f"\nViT width {args.width}, depth {args.depth}, patch {PATCH}, Learnable-Fourier; batch "
    f"{args.batch} of sizes {sorted(set(SIZES))}; {used:.1f} real patches per example\n"
  )
  print("| batch layout | tokens per example | step (ms) | examples/s |")
  print("|---|---|---|---|")
  for name, tokens, seconds in (
    ("packed (NaFlex, `resolution.pack`)", args.tokens, packed_s),
    ("padded to the largest size", grid, padded_s),
  ):
    print(f"| {name} | {tokens} | {1e3 * seconds:.1f} | {args.batch / seconds:.0f} |")
  print(f"\npadded / packed step time: {padded_s / packed_s:.2f}x")


if __name__ == "__main__":
  main()
