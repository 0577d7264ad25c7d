r"""The Reformer of 002 Sec. 4.1 (Fig. 3) on ImageNet 64x64: the full-scale recipe.

`downsampled_imagenet/64x64` (TFDS catalog; prepare it once, see the error message for
how): 64 x 64 x 3 = 12,288 sub-pixel tokens, vocabulary 256. 6 reversible layers, d_model
1024 (a 768-wide pixel-position encoding beside a `[3, 256]` channel embedding), d_ff 4096
(chunked), 8 heads, LSH attention with chunks of 128 and 2 hashes (n_buckets = 2 L / 128 =
192), batch 256, 100k steps; Embed-2D is two `[64, 384]` tables, Learnable-Fourier+MLP has
|F| = 384, |H| = 32, D = 768 (002). Optimiser: AdamW with linear warmup over 8k steps and
reciprocal-square-root decay (the Reformer's schedule; it trained with Adafactor, which
lfpe does not ship).

  python -m lfpe.main --config=configs/reformer_imagenet64.py:posemb=fourier --workdir=DIR

Expected: 002 Fig. 3a plots held-out bits per dim over 100k steps (no table); nothing at
this scale has been run here. The compiled step's memory is checked ahead of time:
`python -m benchmarks.reformer_memory --topology v5e:1x1` (benchmarks/README.md).

Arguments: posemb=NAME; attention=lsh|full|full_shared; small=1 (the CI variant: tiny sizes
on `photo_crops/8x8`, a few steps).
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import parse, spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="fourier", attention="lsh", small=False)
  config = base_config()
  config.seed = 0
  config.total_steps = 100_000
  config.batch_size = 256
  config.eval_batch_size = 256
  config.log_every = 100
  config.eval_every = 5_000
  config.checkpoint_every = 2_000
  config.compute_dtype = "bfloat16"

  config.data = data_config("downsampled_imagenet/64x64")
  config.data.eval_split = "validation[:10000]"
  config.data.worker_count = 16
  config.model_name = "reformer"
  # 002: |F| = 384, |H| = 32 for Learnable-Fourier+MLP; other encodings take their defaults.
  options = dict(fourier_dim=384, hidden_dim=32) if parse(arg.posemb)[0] == "fourier" else {}
  config.model = dict(
    variant="imagenet64", posemb=spec(arg.posemb, **options), attention=arg.attention
  )
  config.task = dict(name="generation")
  config.optim.update(lr=1e-3, weight_decay=0.0, grad_clip_norm=1.0)
  config.schedule = dict(name="warmup_rsqrt", warmup_steps=8_000, timescale=8_000.0)

  if arg.small:
    small_loop(config, batch_size=8, eval_batch_size=64)
    config.data = data_config("photo_crops/8x8")
    config.data.eval_split = "test[:64]"
    config.model = dict(
      variant="tiny", posemb=spec(arg.posemb), attention=arg.attention, width=16, channel_dim=4
    )
    config.model.update(num_heads=2, mlp_dim=32, chunk_len=16)
  config.lock()
  return config
