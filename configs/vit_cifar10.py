r"""ViT on CIFAR-10 from scratch: 32x32 images, 4x4 patches (an 8x8 grid), for one accelerator.

A 6-block ViT of width 256 (8 heads, MLP 512, class token) trained for 30k steps of
batch 256 (~150 epochs) with random crops (4-pixel padding) and flips, AdamW and
label smoothing 0.1: the setting where Embed-1D, Embed-2D, Sine-2D and Learnable-
Fourier+MLP can be compared at small cost.

Prepare CIFAR-10 once (needs TensorFlow and the network; see lfpe/data), then:

  python -m lfpe.main --config=configs/vit_cifar10.py:posemb=fourier --workdir=/tmp/vit_cifar10

Expected: roughly 30 min on one A100/H100-class GPU; test accuracy around 0.80-0.85
(an estimate from similar small ViTs trained from scratch, not a recorded result).

Arguments: posemb=NAME (any name in lfpe.encodings.NAMES); gamma=G (given to the
encodings that take it, the Fourier family; default 0.25 as for the 8x8 grid of
vit_digits); small=1 for the CI variant (a few steps of a 1-block model; checks plumbing,
not accuracy). Or replace the encoding whole: --config.model.posemb='fourier(gamma=0.5)'.
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="fourier", gamma=0.25, small=False)
  config = base_config()
  config.seed = 0
  config.total_steps = 30_000
  config.batch_size = 256
  config.eval_batch_size = 512
  config.log_every = 100
  config.eval_every = 2_000
  config.checkpoint_every = 2_000
  config.compute_dtype = "bfloat16"

  config.data = data_config("cifar10")
  config.data.image_size = 32
  config.data.augment = "random_crop(32, 4)|flip_lr"

  config.model_name = "vit"
  config.model = dict(
    patch_size=4,
    width=256,
    depth=6,
    num_heads=8,
    mlp_dim=512,
    pool="token",
    posemb=spec(arg.posemb, gamma=arg.gamma),
    dropout=0.1,
  )
  config.task.label_smoothing = 0.1
  config.optim.lr = 1e-3
  config.optim.weight_decay = 0.05
  config.schedule.warmup_steps = 1_000

  if arg.small:
    small_loop(config)
    config.model.update(width=16, depth=1, num_heads=2, mlp_dim=32)
  config.lock()
  return config
