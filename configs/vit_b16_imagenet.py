r"""ViT-B/16 on ImageNet-1k from scratch, 90 epochs (002 Sec. 4.3), for accelerators.

002 Sec. 4.3: ViT-B/16 (12 blocks, width 768, MLP 3072, 12 heads) on a 14x14 grid of
16x16 patches (224x224 images), trained on ImageNet for 90 epochs; validation top-1
Embed-1D 73.6% vs Learnable-Fourier+MLP 74.5%. The paper gives no optimizer settings;
these follow the ViT paper's ImageNet-from-scratch recipe (Dosovitskiy et al. 2021:
Adam b1=0.9, b2=0.999, global-norm clipping at 1, 10k warmup steps, dropout 0.1, class
token) with big_vision's batch 1024, peak lr 1e-3 and cosine decay, decoupled weight
decay 0.1 (big_vision's 1e-4 not scaled by lr), inception crops and flips for training;
evaluation is the standard resize of the shorter side to 256 and a central 224 crop
(`data.eval_preprocess`; at 32 px: 37 and 32). The Fourier
encoding uses lfpe.encodings' defaults (|F|=384, |H|=32 as in 002 Sec. 4.1).

Prepare imagenet2012 once (see lfpe/data: manual download, then tfds build), then on
each host of an accelerator slice:

  python -m lfpe.main --config=configs/vit_b16_imagenet.py:posemb=embed_1d --workdir=DIR1
  python -m lfpe.main --config=configs/vit_b16_imagenet.py:posemb=fourier --workdir=DIR2

Expected (estimates, not reproduced here): about 1.5 days on 8 A100s (~112k steps of
1024); validation top-1 near the paper's 73.6% (embed_1d) and 74.5% (fourier).

Arguments: posemb=NAME (002 compares embed_1d and fourier); gamma=G (given to the
encodings that take it, the Fourier family; default 1.0, lfpe's default, as 002 states
none); small=1 for the CI variant (a few steps of a 1-block model at 32x32 with 16x16
patches; checks plumbing only). Or: --config.model.posemb='fourier(gamma=0.5)'.
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop

IMAGENET_TRAIN_IMAGES = 1_281_167


def eval_crop(size: int) -> str:
  """The standard ImageNet evaluation at `size`: shorter side to size * 256 / 224, central crop."""
  return f"resize_small({round(size * 256 / 224)})|central_crop({size})"


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="embed_1d", gamma=1.0, small=False)
  config = base_config()
  config.seed = 0
  config.batch_size = 1024
  config.total_steps = 90 * IMAGENET_TRAIN_IMAGES // config.batch_size
  config.eval_batch_size = 1024
  config.log_every = 100
  config.eval_every = 5_000
  config.checkpoint_every = 2_500
  config.compute_dtype = "bfloat16"

  config.data = data_config("imagenet2012")
  config.data.image_size = 224
  # big_vision's decode_jpeg_and_inception_crop: a bilinear resize without antialiasing
  config.data.augment = "inception_crop(224, antialias=False)|flip_lr"
  config.data.eval_preprocess = eval_crop(224)
  config.data.worker_count = 8

  config.model_name = "vit"
  config.model = dict(
    variant="B/16",
    pool="token",
    posemb=spec(arg.posemb, gamma=arg.gamma),
    dropout=0.1,
  )
  config.optim.update(name="adamw", lr=1e-3, weight_decay=0.1, b1=0.9, b2=0.999, grad_clip_norm=1.0)
  config.schedule.update(name="warmup_cosine", warmup_steps=10_000)

  if arg.small:
    small_loop(config)
    config.data.image_size = 32
    config.data.augment = "inception_crop(32, antialias=False)|flip_lr"
    config.data.eval_preprocess = eval_crop(32)
    config.data.worker_count = 0
    config.model.update(variant="mu/16")
  config.lock()
  return config
