r"""DETR-R50 on COCO 2017 (002 Sec. 4.2, Tables 1 and 2 at full scale), for accelerators.

DETR's recipe: ResNet-50 backbone with frozen batch statistics (learning rate 1e-5, the
transformer's 1e-4), 6 encoder + 6 decoder post-norm layers of width 256, 8 heads, MLP
2048, 100 object queries, dropout 0.1; AdamW with weight decay 1e-4, gradient clipping at
0.1, batch 64, 300 epochs with the learning rate divided by 10 after epoch 200; set loss
with class / L1 / GIoU costs 1 / 5 / 2, no-object weight 0.1, auxiliary losses after every
decoder layer. Training images are resized to one of DETR's scales 480-800 and padded to
an 800 px canvas, the largest scale (a static shape; lfpe resizes the longer side to the
scale, so no image exceeds it: a 1333 px canvas held 2.8x the pixels, all of them padding).
* `protocol=all` (002 Table 1): every scale in training and testing, positions normalised.
* `protocol=heldout` (002 Table 2): 736, 768 and 800 for testing only, normalisation off.

Prepare coco/2017 once (see lfpe/data: TFDS with TensorFlow, or `lfpe.data.coco.CocoFolder`
for a COCO-format folder), then on each host of an accelerator slice:

  python -m lfpe.main --config=configs/detr_coco.py:posemb=fourier --workdir=DIR

Expected (estimates, not reproduced here): about 3 days on 64 TPU v3 cores as in 002;
AP near 002's 40.2 (fourier), 40.1 (detr_sine), 40.0 (mlp), 39.3 (embed_2d).

DETR's own settings where lfpe's defaults differ (lfpe/models/detr.py): ReLU feed-forward
layers, no dropout on the encoder's input, ImageNet's mean and std before the zero padding,
and the ResNet's stem and first stage frozen (`optim.freeze`).

Differences from DETR, stated: lfpe's detection preprocessing resizes the LONGER side to
the chosen scale (DETR: the shorter side, longer side capped at 1333) and has no random
crop or flip; the ResNet-50 starts from random weights (no pretrained checkpoint is
loaded), where DETR starts from ImageNet weights.

Arguments: posemb=NAME (an absolute encoding); gamma=G (given to the encodings that take
it); protocol=all|heldout; small=1 for the CI variant (the tiny DETR for a few steps on
`shapes_detection/small`; checks plumbing only).
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop

SCALES = (480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800)
PROTOCOLS = {"all": (SCALES, SCALES), "heldout": (SCALES[:-3], SCALES[-3:])}
TRAIN_IMAGES = 118_287
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # torchvision's
RESNET_FROZEN = r"^params/backbone/(conv1|layer1_\d+)/"  # DETR trains layer2-4 only


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="detr_sine", gamma=1.0, protocol="all", small=False)
  if arg.protocol not in PROTOCOLS:
    raise ValueError(f"config argument protocol={arg.protocol!r}; use one of {tuple(PROTOCOLS)}.")
  config = base_config()
  config.seed = 0
  config.batch_size = 64
  steps_per_epoch = TRAIN_IMAGES // config.batch_size
  config.total_steps = 300 * steps_per_epoch
  config.eval_batch_size = 64
  config.log_every = 100
  config.eval_every = 10 * steps_per_epoch
  config.checkpoint_every = steps_per_epoch
  config.compute_dtype = "float32"

  train_sizes, test_sizes = PROTOCOLS[arg.protocol]
  config.data = data_config("coco/2017")
  config.data.detection = dict(
    train_sizes=train_sizes,
    test_sizes=test_sizes,
    max_targets=100,  # canvas: the largest
  )
  config.data.preprocess = f"value_range(0, 1)|normalize({IMAGENET_MEAN}, {IMAGENET_STD})"
  config.data.worker_count = 16

  config.model_name = "detr"
  config.model = dict(
    variant="R50",
    posemb=spec(arg.posemb, gamma=arg.gamma),
    normalize_positions=arg.protocol == "all",
    activation="relu",
    input_dropout=False,
  )
  # auto: scipy's host solver on a GPU (10x faster there than the in-graph loop), optax's
  # in-graph solver on a TPU or CPU (lfpe/tasks/detection_ops.resolve_method).
  config.task = dict(name="detection", matcher="auto", eos_coef=0.1, aux_loss=True)
  config.optim.update(lr=1e-4, weight_decay=1e-4, grad_clip_norm=0.1)
  config.optim.lr_multipliers = {"backbone": 0.1}  # 1e-5 for the ResNet
  config.optim.freeze = (RESNET_FROZEN,)
  config.schedule = dict(
    name="warmup_step", warmup_steps=0, decay_steps=(200 * steps_per_epoch,), decay_factor=0.1
  )

  if arg.small:
    small_loop(config, batch_size=8)
    config.data = data_config("shapes_detection/small")
    config.data.detection.update(train_sizes=(32, 40), test_sizes=(48,), max_size=48)
    config.optim.freeze = ()  # the tiny backbone has no stem or layer1
    config.data.worker_count = 0
    config.model.update(variant="tiny", width=16, mlp_dim=32, num_heads=2, num_queries=10)
    config.schedule.decay_steps = (3,)
  config.lock()
  return config
