"""PyTorch peers of lfpe's DETR and Reformer train steps, for benchmarks/gpu_suite.py.

  python -m benchmarks.torch_peers {detr,reformer} [--cpu] [--steps N] [--batch B] [--compile]

Each run prints one `RESULT {json}` line (family, impl, step_ms = best, median_ms,
peak_bytes, batch, shape, dtype). `--cpu` runs tiny shapes on the CPU (CI); otherwise the
full shapes run on CUDA. Step time is the best of `--steps` steps after three warm-up steps,
each synchronised (as benchmarks/timm_step.py); `--compile` wraps the model in `torch.compile`.
Needs torch, torchvision and scipy (detr) or reformer-pytorch (reformer): not lfpe dependencies.

detr: DETR's recipe, the peer of configs/detr_coco.py. torchvision's ResNet-50 (random
weights, `FrozenBatchNorm2d`, all of it trained at lr 1e-5 as lfpe does; DETR's code also
freezes the stem and layer1) to stride 32, a 1x1 projection to 256, the padding mask
downsampled by nearest interpolation, DETR's sine positions (normalised, 2*pi, 128 per axis)
added to queries and keys of every attention, 6 + 6 post-norm `nn.MultiheadAttention` layers
(8 heads, FFN 2048, ReLU, dropout 0.1), 100 learned queries, a shared final decoder norm and
class / 3-layer box heads after every decoder layer. Loss at every layer after Hungarian
matching (scipy on the CPU; costs class 1, L1 5, GIoU 2, one device-to-host copy per step):
cross-entropy with no-object weight 0.1, L1 5, GIoU 2, over the number of boxes. 800 px
canvas, each image a random top-left region of 480-800 px, 7 random boxes per image (COCO's
mean). AdamW 1e-4 (backbone 1e-5), weight decay 1e-4, clipping at 0.1. float32 with TF32
matmuls and convolutions: JAX's default float32 matmul precision on an H100 is TF32 too.

reformer: reformer-pytorch's `ReformerLM`, the peer of `lfpe.models.reformer` "imagenet64":
64x64x3 = 12,288 tokens of 256 values, width 1024, 6 reversible layers, 8 heads of 128,
FFN 4096 (GELU) in 12 chunks (lfpe's ff_chunk_len 1024), causal shared-QK LSH attention with
2 hash rounds and random rotations per head, no dropout; bfloat16 autocast over float32
weights, next-token cross-entropy, Adam 1e-3, clipping at 1. reformer-pytorch's chunk length
is its `bucket_size` and its bucket count is L / bucket_size, so bucket_size 128 gives lfpe's
chunks of 128 but 96 buckets where lfpe has 192 (= 2 L / chunk_len, the paper's buckets of
half a chunk); the two cannot both match, and the chunk length sets the cost. Set as lfpe:
a query sees only keys of its own bucket (`_attend_across_buckets=False`, not a ReformerLM
argument), no duplicate-pair counting. Differences left: positions are reformer-pytorch's
fixed sinusoids added to the tokens (lfpe: a 2-D encoding plus a channel embedding), the
streams are averaged, not concatenated, before the final norm, and the input is the tokens
themselves (logits at t predict t + 1) rather than a shifted sequence. `backward()` runs
inside autocast so that the reversible layers recompute in bfloat16 as their forward ran
(reformer-pytorch's autograd Function has no `custom_bwd`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import statistics
import time

DETR = dict(canvas=800, min_side=480, batch=8, queries=100, classes=91, targets=7)
DETR_CPU = dict(DETR, canvas=128, min_side=64, batch=2)
REFORMER = dict(hwc=(64, 64, 3), width=1024, depth=6, heads=8, mlp=4096, chunk=128, batch=4)
REFORMER_CPU = dict(hwc=(16, 16, 3), width=64, depth=2, heads=2, mlp=128, chunk=32, batch=2)


def time_steps(step, steps: int, cuda: bool) -> list[float]:
  """Seconds of each synchronised `step()` after three warm-up steps."""
  import torch

  sync = torch.cuda.synchronize if cuda else (lambda: None)
  for _ in range(3):
    step()
  sync()
  times = []
  for _ in range(steps):
    t0 = time.perf_counter()
    step()
    sync()
    times.append(time.perf_counter() - t0)
  return times


def build_detr(queries: int, classes: int):
  """DETR-R50 (post-norm, 6 + 6 layers): `(images, mask) -> (logits, boxes)`, `[L, B, Q, .]`."""
  import torch
  import torchvision
  from torch import nn
  from torchvision.ops.misc import FrozenBatchNorm2d

  def sine_positions(mask, feats=128, temperature=10000.0, scale=2 * math.pi):
    valid = (~mask).float()
    y, x = valid.cumsum(1), valid.cumsum(2)
    y = y / (y[:, -1:, :] + 1e-6) * scale
    x = x / (x[:, :, -1:] + 1e-6) * scale
    freqs = temperature ** (2 * (torch.arange(feats, device=mask.device) // 2) / feats)

    def encode(t):
      t = t[..., None] / freqs
      return torch.stack((t[..., 0::2].sin(), t[..., 1::2].cos()), -1).flatten(3)

    return torch.cat((encode(y), encode(x)), -1).flatten(1, 2)  # [B, HW, 256]

  def ffn(d, hidden, drop):
    return nn.Sequential(
      nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(drop), nn.Linear(hidden, d), nn.Dropout(drop)
    )

  class EncoderLayer(nn.Module):
    def __init__(self, d=256, heads=8, hidden=2048, dropout=0.1):
      super().__init__()
      self.attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
      self.ffn, self.drop = ffn(d, hidden, dropout), nn.Dropout(dropout)
      self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, pos, pad):
      q = x + pos
      x = self.norm1(x + self.drop(self.attn(q, q, x, key_padding_mask=pad)[0]))
      return self.norm2(x + self.ffn(x))

  class DecoderLayer(nn.Module):
    def __init__(self, d=256, heads=8, hidden=2048, dropout=0.1):
      super().__init__()
      self.self_attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
      self.cross_attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
      self.ffn, self.drop = ffn(d, hidden, dropout), nn.Dropout(dropout)
      self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3))

    def forward(self, t, memory, pos, query_pos, pad):
      q = t + query_pos
      t = self.norms[0](t + self.drop(self.self_attn(q, q, t)[0]))
      attended = self.cross_attn(t + query_pos, memory + pos, memory, key_padding_mask=pad)[0]
      t = self.norms[1](t + self.drop(attended))
      return self.norms[2](t + self.ffn(t))

  class Detr(nn.Module):
    def __init__(self, d=256, layers=6):
      super().__init__()
      resnet = torchvision.models.resnet50(weights=None, norm_layer=FrozenBatchNorm2d)
      self.backbone = nn.Sequential(*list(resnet.children())[:-2])  # to layer4: stride 32
      self.proj = nn.Conv2d(2048, d, 1)
      self.encoder = nn.ModuleList(EncoderLayer(d) for _ in range(layers))
      self.decoder = nn.ModuleList(DecoderLayer(d) for _ in range(layers))
      self.decoder_norm = nn.LayerNorm(d)
      self.query_pos = nn.Embedding(queries, d)
      self.class_head = nn.Linear(d, classes + 1)
      self.box_head = nn.Sequential(
        nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4)
      )
      for p in [*self.encoder.parameters(), *self.decoder.parameters()]:
        if p.dim() > 1:
          nn.init.xavier_uniform_(p)  # as DETR's transformer

    def forward(self, images, mask):
      features = self.backbone(images)
      pad = nn.functional.interpolate(mask[:, None].float(), size=features.shape[-2:])[:, 0]
      pad = pad.bool()
      pos = sine_positions(pad)
      memory, pad = self.proj(features).flatten(2).transpose(1, 2), pad.flatten(1)
      for layer in self.encoder:
        memory = layer(memory, pos, pad)
      query_pos = self.query_pos.weight[None].expand(images.shape[0], -1, -1)
      t, outputs = torch.zeros_like(query_pos), []
      for layer in self.decoder:
        t = layer(t, memory, pos, query_pos, pad)
        outputs.append(self.decoder_norm(t))
      hs = torch.stack(outputs)
      return self.class_head(hs), self.box_head(hs).sigmoid()

  return Detr()


def detr_loss(logits, boxes, labels, targets, classes: int):
  """DETR's set loss summed over decoder layers, after scipy Hungarian matching per image."""
  import numpy as np
  import torch
  import torch.nn.functional as F
  from scipy.optimize import linear_sum_assignment
  from torchvision.ops import box_convert, generalized_box_iou, generalized_box_iou_loss

  layers, batch, queries, _ = logits.shape
  n = labels.shape[1]
  xyxy = lambda b: box_convert(b, "cxcywh", "xyxy")
  with torch.no_grad():  # the matching costs, all layers and images at once, as DETR batches
    prob = logits.softmax(-1).gather(-1, labels[None, :, None, :].expand(layers, -1, queries, -1))
    l1 = torch.cdist(boxes, targets[None].expand(layers, -1, -1, -1), p=1)
    giou = generalized_box_iou(xyxy(boxes.reshape(-1, 4)), xyxy(targets.reshape(-1, 4)))
    giou = giou.view(layers, batch, queries, batch, n).diagonal(dim1=1, dim2=3)  # [L, Q, T, B]
    cost = (5 * l1 - prob - 2 * giou.permute(0, 3, 1, 2)).cpu().numpy()
  match = np.empty((layers, batch, n), np.int64)  # the query matched to each target
  for i in np.ndindex(layers, batch):
    rows, cols = linear_sum_assignment(cost[i])
    match[i][cols] = rows
  match = torch.as_tensor(match, device=logits.device)
  wanted = torch.full((layers, batch, queries), classes, device=logits.device)
  wanted.scatter_(2, match, labels[None].expand(layers, -1, -1))
  weight = torch.ones(classes + 1, device=logits.device)
  weight[classes] = 0.1
  ce = F.cross_entropy(logits.flatten(0, 2), wanted.flatten(), weight) * layers  # sum of means
  matched = boxes.gather(2, match[..., None].expand(-1, -1, -1, 4))
  tgt = targets[None].expand_as(matched)
  num_boxes = batch * n
  l1 = F.l1_loss(matched, tgt, reduction="sum") / num_boxes
  giou = generalized_box_iou_loss(xyxy(matched), xyxy(tgt), reduction="sum") / num_boxes
  return ce + 5 * l1 + 2 * giou


def run_detr(args, device: str) -> dict:
  """Times DETR's train step; the RESULT dict."""
  import torch

  cfg = DETR_CPU if args.cpu else DETR
  batch, side = args.batch or cfg["batch"], cfg["canvas"]
  model = build_detr(cfg["queries"], cfg["classes"]).to(device).train()
  backbone = [p for n, p in model.named_parameters() if n.startswith("backbone.")]
  rest = [p for n, p in model.named_parameters() if not n.startswith("backbone.")]
  groups = [{"params": rest}, {"params": backbone, "lr": 1e-5}]
  optimizer = torch.optim.AdamW(groups, lr=1e-4, weight_decay=1e-4, fused=device == "cuda")
  net = torch.compile(model) if args.compile else model

  images = torch.randn(batch, 3, side, side, device=device)
  hw = torch.randint(cfg["min_side"], side + 1, (batch, 2))
  mask = torch.ones(batch, side, side, dtype=torch.bool)
  for i, (h, w) in enumerate(hw.tolist()):
    mask[i, :h, :w] = False
  mask = mask.to(device)
  images = images.masked_fill(mask[:, None], 0.0)
  n = cfg["targets"]
  labels = torch.randint(1, cfg["classes"], (batch, n), device=device)
  size = torch.rand(batch, n, 2, device=device) * 0.45 + 0.05
  centre = size / 2 + torch.rand(batch, n, 2, device=device) * (1 - size)
  targets = torch.cat((centre, size), -1)

  def step():
    logits, boxes = net(images, mask)
    loss = detr_loss(logits, boxes, labels, targets, cfg["classes"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  shape = f"{side}x{side} canvas, {cfg['queries']} queries, {n} boxes/image"
  impl = "torchvision R50 + nn.MultiheadAttention DETR"
  times = time_steps(step, args.steps, device == "cuda")
  return dict(family="detr", impl=impl, times=times, batch=batch, shape=shape, dtype="float32")


def run_reformer(args, device: str) -> dict:
  """Times reformer-pytorch's ReformerLM train step; the RESULT dict."""
  import reformer_pytorch
  import torch
  import torch.nn.functional as F
  from reformer_pytorch.reformer_pytorch import LSHAttention

  cfg = REFORMER_CPU if args.cpu else REFORMER
  batch, width, heads = args.batch or cfg["batch"], cfg["width"], cfg["heads"]
  length = math.prod(cfg["hwc"])
  model = reformer_pytorch.ReformerLM(
    num_tokens=256,
    dim=width,
    depth=cfg["depth"],
    max_seq_len=length,
    heads=heads,
    dim_head=width // heads,
    bucket_size=cfg["chunk"],  # = the chunk length; L / bucket_size buckets
    n_hashes=2,
    ff_chunks=12,
    ff_mult=cfg["mlp"] // width,
    causal=True,
    random_rotations_per_head=True,
    fixed_position_emb=True,
    use_full_attn=False,
    full_attn_thres=0,  # LSH at every length
    reverse_thres=0,  # reversible at every length
  ).to(device)
  lsh = [m for m in model.modules() if isinstance(m, LSHAttention)]
  for m in lsh:
    m._attend_across_buckets = False  # as lfpe: a query sees only its own bucket
  assert len(lsh) == cfg["depth"] and all(m.causal and m.n_hashes == 2 for m in lsh)
  assert model.reformer.layers.reverse_thres < length and length % (2 * cfg["chunk"]) == 0
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=device == "cuda")
  net = torch.compile(model) if args.compile else model
  tokens = torch.randint(0, 256, (batch, length), device=device)

  def step():
    with torch.autocast(device, dtype=torch.bfloat16):
      logits = net(tokens)
      loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
      loss.backward()  # in autocast: the reversible recomputation runs in bfloat16 too
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

  h, w, c = cfg["hwc"]
  shape = f"{h}x{w}x{c} = {length} tokens, chunk {cfg['chunk']}, {length // cfg['chunk']} buckets"
  impl = f"reformer-pytorch {importlib.metadata.version('reformer-pytorch')} ReformerLM"
  times = time_steps(step, args.steps, device == "cuda")
  return dict(family="reformer", impl=impl, times=times, batch=batch, shape=shape, dtype="bfloat16")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("family", choices=("detr", "reformer"))
  parser.add_argument("--cpu", action="store_true", help="tiny shapes on the CPU")
  parser.add_argument("--steps", type=int, default=0, help="timed steps (0: 20, 2 on --cpu)")
  parser.add_argument("--batch", type=int, default=0, help="0: the family's default")
  parser.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
  args = parser.parse_args()
  args.steps = args.steps or (2 if args.cpu else 20)

  import torch

  device = "cpu" if args.cpu else "cuda"
  torch.backends.cuda.matmul.allow_tf32 = True
  torch.backends.cudnn.allow_tf32 = True
  torch.manual_seed(0)
  if device == "cuda":
    torch.cuda.reset_peak_memory_stats()
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
  result = (run_detr if args.family == "detr" else run_reformer)(args, device)
  times = result.pop("times")
  result["impl"] += ", torch.compile" if args.compile else ", eager"
  result.update(
    step_ms=min(times) * 1e3,
    median_ms=statistics.median(times) * 1e3,
    peak_bytes=torch.cuda.max_memory_allocated() if device == "cuda" else None,
  )
  print(f"{result['impl']}: best {result['step_ms']:.1f} ms, median {result['median_ms']:.1f} ms")
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  main()
