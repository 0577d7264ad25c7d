r"""A small ViT on `shape_layout`: the class of the left-most shape (the resolution benchmark's
second edition, experiments/resolution).

`shape_layout/colour` (lfpe/data/shape_layout.py; built offline on first use): 64x64 scenes of
3-5 shapes of distinct classes, each class in its own hue, on textured backgrounds (with
random colours, `shape_layout/full`, this model stays at chance), 20,000 training and 10,000 test
scenes from disjoint draws; the label needs both content (which shape) and position (which
is left-most). The model: 8x8 patches (an 8x8 grid at 64 px), width 64, 2 heads of dimension
32 (RoPE gets 8 frequency pairs per axis), depth 3, MLP 128, global average pooling; AdamW
(lr 1e-3, weight decay 0.05, warmup 500 steps, cosine) for 6,000 steps of 64 (about 19
epochs) by default; the resolution benchmark trains it for 1,000 steps (warmup 100,
`experiments/resolution/plan.STEPS`), the length its pilot's rule chose. Tested at other
sizes through named evaluations that draw the test scenes again at that size (`redraw(S)`),
never resized.

  python -m lfpe.main --config=configs/vit_shape_layout.py:posemb=rope_mixed \
      --workdir=/tmp/shape_layout

Expected: the benchmark's pilot (experiments/resolution/README.md) records this config's time
and accuracy per encoding; it set the training length so that the best encoding sits below
the ceiling at 64 px. An evaluation at another size, in Python:

  config = vit_shape_layout.get_config("posemb=rope_mixed")
  with config.unlocked():
    config.evals = {"at_128": {"data": {"image_size": 128, "eval_preprocess": "redraw(128)"}}}
  trainer.train_and_evaluate(config, "/tmp/shape_layout")

Arguments: posemb=NAME (an encoding spec); small=1 (CI: `shape_layout/small`, a few steps).
"""

from lfpe.data import default_config as data_config
from lfpe.train.config_lib import base_config, parse_arg, small_loop


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="sine_2d", small=False)
  config = base_config()
  config.total_steps = 6000
  config.batch_size = 64
  config.eval_batch_size = 200  # divides the 10,000 test scenes and an 8-way data axis
  config.log_every = 100
  config.eval_every = 1000
  config.checkpoint_every = 1000
  config.data = data_config("shape_layout/small" if arg.small else "shape_layout/colour")
  config.data.cache = True  # 20,000 images of 64 px (250 MB): decode once
  config.model_name = "vit"
  config.model = dict(
    patch_size=8,
    width=64,
    depth=3,
    num_heads=2,
    mlp_dim=128,
    pool="gap",
    posemb=arg.posemb,
  )
  config.optim.update(lr=1e-3, weight_decay=0.05)
  config.schedule.warmup_steps = 500
  if arg.small:
    small_loop(config, total_steps=6, eval_batch_size=64)
  config.lock()
  return config
