r"""Reformer-style image generation on crops of real photographs (002 Sec. 4.1, Fig. 3, CPU scale).

`photo_crops/8x8` (crops of scikit-learn's two sample photographs; test crops from a region
no training crop touches, so bits per dim are measured on unseen pixels): 8 x 8 x 3 = 192
sub-pixel tokens in raster order. A tiny causal Reformer (2 reversible layers, width 64 =
48 pixel-position channels + 16 channel-embedding channels, 4 heads, d_ff 128) with LSH
attention (chunks of 32, 4 buckets, 2 hashes) or dense causal attention (`attention=full`),
next-token cross-entropy, held-out bits per dim (`lfpe.tasks.generation`).

  python -m lfpe.main --config=configs/reformer_crops.py:posemb=fourier --workdir=/tmp/gen

Expected: about 5 min on 2 CPU cores for 1,000 steps of batch 32 (3.3-3.7 steps/s measured
with LSH); held-out bits per dim about 5.7 after 300 steps (8.0 is uniform); the
per-encoding record (300 steps, 3 seeds) is in experiments/generation/README.md.

Arguments: posemb=NAME (`embed_2d`, `embed_1d`, `sine_2d`, `sine_1d`, `fourier`,
`fourier_no_mlp`, `mlp`, or any absolute encoding); gamma=G (given to the encodings that
take it); attention=lsh|full|full_shared; strict=1 for LSH's strictly causal sliding
window (`lfpe.nn.lsh`; 0, the default and the record's, is the Reformer paper's chunk pairs,
whose chunking lets later tokens' hashes shape earlier outputs); size=8|16|32 (the crop size);
small=1 for the CI variant (a few steps; plumbing only).
Or replace the encoding whole: --config.model.posemb='fourier(gamma=0.5)'.
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop


def get_config(arg: str | None = None):
  arg = parse_arg(
    arg, posemb="fourier", gamma=1.0, attention="lsh", strict=False, size=8, small=False
  )
  config = base_config()
  config.seed = 0
  config.total_steps = 1000
  config.batch_size = 32
  config.eval_batch_size = 128
  config.log_every = 50
  config.eval_every = 250
  config.checkpoint_every = 500

  config.data = data_config(f"photo_crops/{arg.size}x{arg.size}")
  config.model_name = "reformer"
  config.model = dict(
    variant="tiny",
    posemb=spec(arg.posemb, gamma=arg.gamma),
    attention=arg.attention,
    strictly_causal=bool(arg.strict),
  )
  config.task = dict(name="generation")
  config.optim.update(lr=1e-3, weight_decay=0.0, grad_clip_norm=1.0)
  config.schedule.warmup_steps = 100

  if arg.small:
    small_loop(config, batch_size=8, eval_batch_size=64)
    config.data.eval_split = "test[:64]"
    config.model.update(width=16, channel_dim=4, num_heads=2, mlp_dim=32, chunk_len=16)
  config.lock()
  return config
