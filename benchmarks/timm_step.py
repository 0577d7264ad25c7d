"""timm's ViT-B/16 train step in PyTorch: the reference for benchmarks/train_step.py on a GPU.

  python -m benchmarks.timm_step [--batch 256] [--steps 20] [--modes eager,compile]

The same step as lfpe's `Program.train_step` of configs/vit_b16_imagenet.py with dropout 0:
timm's `vit_base_patch16_224` (class token, 1000 classes, fused SDPA attention), bfloat16
autocast over float32 weights, softmax cross-entropy, global-norm clipping at 1 and AdamW
(b1 0.9, b2 0.999, weight decay 0.1; fused CUDA kernel), on one batch of random images kept
on the device. `eager` runs the module as is; `compile` wraps it in `torch.compile` (the
usual `--torchcompile` of timm's train.py). Step time is the best of `--steps` steps after
three warm-up steps, each step synchronised (as train_step.py times lfpe's); the median is
printed beside it. Needs torch and timm (not lfpe dependencies; the GPU image has both).
"""

from __future__ import annotations

import argparse
import statistics
import time


def step_times(model, batch: int, steps: int) -> list[float]:
  """Seconds of each synchronised train step after three warm-up steps."""
  import torch
  import torch.nn.functional as F

  images = torch.randn(batch, 3, 224, 224, device="cuda")
  labels = torch.randint(0, 1000, (batch,), device="cuda")
  optimizer = torch.optim.AdamW(
    model.parameters(), lr=1e-3, betas=(0.9, 0.999), weight_decay=0.1, fused=True
  )

  def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
      loss = F.cross_entropy(model(images), labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  for _ in range(3):
    step()
  torch.cuda.synchronize()
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
  return times


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--modes", default="eager,compile")
  args = parser.parse_args()

  import timm
  import torch

  torch.backends.cuda.matmul.allow_tf32 = True
  torch.backends.cudnn.allow_tf32 = True
  print(
    f"{torch.cuda.get_device_name()}; torch {torch.__version__}; timm {timm.__version__}\n\n"
    f"| model (224x224, batch {args.batch}, bf16 autocast) | mode | best step (ms) "
    "| median step (ms) | img/s (best) | compile + warm-up (s) |\n|---|---|---|---|---|---|"
  )
  for mode in args.modes.split(","):
    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", num_classes=1000).cuda().train()
    model = torch.compile(model) if mode == "compile" else model
    start = time.perf_counter()
    times = step_times(model, args.batch, args.steps)
    setup = time.perf_counter() - start - sum(times)
    best, median = min(times), statistics.median(times)
    print(
      f"| timm vit_base_patch16_224 | {mode} | {best * 1e3:.1f} | {median * 1e3:.1f} | "
      f"{args.batch / best:.0f} | {setup:.0f} |",
      flush=True,
    )


if __name__ == "__main__":
  main()
