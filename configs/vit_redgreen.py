r"""The position study's 1-block ViT on a red-green task, through the trainer (003 Sec. 4).

`red_green/TASK` (lfpe/data/redgreen.py; built offline on first use): 32x32 black images with
a green and a red 4x4 square on a 4-pixel grid, 5,000 training images. The model is the
position study's (`lfpe.studies.sweep.BASE_MODEL`): width 32, 2 heads, MLP 128, 4x4 patches
(an 8x8 grid, each square exactly one token), global average pooling, a classifier drawn
from N(0, 0.2²), and the study's larger initial position signal for the encodings that take
it (`sweep.POSITION_INIT`). AdamW (lr 1e-3, weight decay 1e-4), 10 epochs of batch 32
(1,562 steps) with one epoch of warmup and cosine decay, as the study's `TrainSpec`.

  python -m lfpe.main --config=configs/vit_redgreen.py:task=absolute,posemb=rope_mixed \
      --workdir=/tmp/redgreen

Expected: about a minute on 2 CPU cores. Every encoding but `none` solves `direction` and
`absolute` at 32 px (experiments/position_study); `experiments/resolution_redgreen` tests
these models at other image sizes.

Arguments: task=direction|direction4|absolute|color_shift; posemb=NAME (an encoding spec);
small=1 (CI: a few steps).
"""

from lfpe.data import default_config as data_config
from lfpe.data import redgreen
from lfpe.studies import sweep
from lfpe.train.config_lib import base_config, parse_arg, small_loop

EPOCHS, BATCH = 10, 32


def get_config(arg: str | None = None):
  arg = parse_arg(arg, task="direction", posemb="embed_1d", small=False)
  config = base_config()
  steps_per_epoch = redgreen.RedGreenConfig(name="default").num_train // BATCH
  config.total_steps = EPOCHS * steps_per_epoch
  config.batch_size = BATCH
  config.eval_batch_size = 200  # divides the 1,000 test images and an 8-way data axis
  config.log_every = 100
  config.eval_every = config.total_steps
  config.checkpoint_every = config.total_steps
  config.data = data_config(f"red_green/{arg.task}")
  config.data.cache = True  # 5,000 tiny images: decode once
  config.model_name = "vit"
  config.model = sweep.Config(arg.task, arg.posemb).model_config()
  config.optim.update(lr=1e-3, weight_decay=1e-4, grad_clip_norm=0.0)
  config.schedule.warmup_steps = steps_per_epoch
  if arg.small:
    small_loop(config, total_steps=6)
  config.lock()
  return config
