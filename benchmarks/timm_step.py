"""timm's ViT-B/16 train step in PyTorch: the reference for benchmarks/train_step.py on a GPU.

  python -m benchmarks.timm_step [--batch 256] [--steps 20] [--modes eager,compile] [--result]
  python -m benchmarks.timm_step --cpu --result     # ViT-Ti/16, batch 2, on the CPU

The same step as lfpe's `Program.train_step` of configs/vit_b16_imagenet.py with dropout 0:
timm's `vit_base_patch16_224` (class token, 1000 classes, fused SDPA attention), bfloat16
autocast over float32 weights, softmax cross-entropy, global-norm clipping at 1 and AdamW
(b1 0.9, b2 0.999, weight decay 0.1; fused CUDA kernel), on one batch of random images kept
on the device. `eager` runs the module as is; `compile` wraps it in `torch.compile` (the
usual `--torchcompile` of timm's train.py). Step time is the best of `--steps` steps after
three warm-up steps, each step synchronised (as train_step.py times lfpe's); the median is
printed beside it; `--result` adds one `RESULT {json}` line per mode (with peak GPU memory)
for benchmarks/gpu_suite.py. Needs torch and timm (not lfpe dependencies; the GPU image has both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from benchmarks.torch_peers import time_steps


def step_times(model, batch: int, steps: int, device: str = "cuda") -> list[float]:
  """Seconds of each synchronised train step after three warm-up steps."""
  import torch
  import torch.nn.functional as F

  images = torch.randn(batch, 3, 224, 224, device=device)
  labels = torch.randint(0, 1000, (batch,), device=device)
  optimizer = torch.optim.AdamW(
    model.parameters(), lr=1e-3, betas=(0.9, 0.999), weight_decay=0.1, fused=device == "cuda"
  )

  def step():
    with torch.autocast(device, dtype=torch.bfloat16):
      loss = F.cross_entropy(model(images), labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  return time_steps(step, steps, cuda=device == "cuda")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--modes", default="eager,compile")
  parser.add_argument("--cpu", action="store_true", help="ViT-Ti/16, batch 2, on the CPU")
  parser.add_argument("--result", action="store_true", help="RESULT lines for gpu_suite")
  args = parser.parse_args()

  import timm
  import torch

  device, name = ("cpu", "vit_tiny_patch16_224") if args.cpu else ("cuda", "vit_base_patch16_224")
  batch = 2 if args.cpu else args.batch
  versions = f"torch {torch.__version__}, timm {timm.__version__}"
  torch.backends.cuda.matmul.allow_tf32 = True
  torch.backends.cudnn.allow_tf32 = True
  print(
    f"{torch.cuda.get_device_name() if device == 'cuda' else 'CPU'}; {versions}\n\n"
    f"| model (224x224, batch {batch}, bf16 autocast) | mode | best step (ms) "
    "| median step (ms) | img/s (best) | compile + warm-up (s) |\n|---|---|---|---|---|---|"
  )
  for mode in args.modes.split(","):
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=1000).to(device).train()
    model = torch.compile(model) if mode == "compile" else model
    if device == "cuda":
      torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    times = step_times(model, batch, args.steps, device)
    setup = time.perf_counter() - start - sum(times)
    best, median = min(times), statistics.median(times)
    print(
      f"| timm {name} | {mode} | {best * 1e3:.1f} | {median * 1e3:.1f} | "
      f"{batch / best:.0f} | {setup:.0f} |",
      flush=True,
    )
    if args.result:
      peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
      result = dict(step_ms=1e3 * best, median_ms=1e3 * median, peak_bytes=peak, batch=batch)
      result.update(dtype="bfloat16", versions=versions)
      print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
