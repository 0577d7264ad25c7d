r"""DETR-lite on procedurally drawn shapes (002 Sec. 4.2, Tables 1 and 2 at CPU scale).

Six shape classes, 0-8 objects per image on a textured background, drawn natively at 32,
40, 48, 56 and 64 px (`shapes_detection/full`, 20k training images, built offline in about
80 CPU-seconds). A tiny DETR (small conv backbone of stride 8, 2+2 post-norm layers of
width 64, 4 heads, 20 queries) with the set loss of DETR (Hungarian matching with class,
L1 and GIoU costs 1, 5, 2; no-object weight 0.1; auxiliary losses after every decoder
layer; the in-graph `optax` matcher, whose step does not wait on a host callback,
benchmarks/README.md). Deviations from DETR, for the CPU budget: no dropout (DETR's 0.1; the
runs are too short to overfit 20k images) and two in `lfpe.models.detr` (pilots in
experiments/detection/README.md): `reference_points=True`
(boxes relative to learned per-query centres), with learning rate 2e-3 (with DETR's plain
box head and 3e-4 to 1e-3 the model stays on its first plateau, AP < 0.2 %, for the steps
a run can afford here), and `query_groups=4` (Group DETR: four groups of 20 queries in
training, each matched one-to-one on its own; group 0 alone at evaluation), which reaches
a lower class loss in fewer steps for 1.6x the step time; 4,000 steps (the learning curve
in experiments/detection/README.md: AP 12 % at 1,000 steps, 45 % at 2,000, 61 % at 3,000,
64.5 % at 4,000). Two protocols (002):
* `protocol=all` (Table 1): every size in training and testing, feature-map positions
  normalised to (0, 1] (`normalize_positions=True`);
* `protocol=heldout` (Table 2): the sizes name the shorter image side, as DETR's scales
  do (`data.detection.train_side="short"`): training images have a shorter side of 32-48
  px and a longer side of up to 64 px (windows cut from the natively drawn squares), and
  the test images are squares of 56 and 64 px, shorter sides never trained on; positions
  as raw feature-map indices (`normalize_positions=False`). As on COCO, every row and every
  column index is seen in training (along an image's longer side) while the test images
  reach positions that no training image holds in both coordinates, and objects keep the
  scale they have at 56-64 px.

  python -m lfpe.main --config=configs/detr_shapes.py:posemb=fourier --workdir=/tmp/detr

Expected: about 10 min on 2 quiet CPU cores: 4,000 steps of batch 32 (6.6 steps/s), an
evaluation on the first 500 test images at each test size every 1,000 steps; eval AP
about 64 % for `fourier` (summary.json, eval.AP; per encoding in
experiments/detection/README.md).

Arguments: posemb=NAME (`detr_sine`, `embed_2d`, `mlp`, `fourier`, or any absolute
encoding); gamma=G (given to the encodings that take it); protocol=all|heldout;
small=1 for the CI variant (a few steps on `shapes_detection/small`; plumbing only).
Or replace the encoding whole: --config.model.posemb='fourier(gamma=0.5)'.
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop

PROTOCOLS = {
  "all": ((32, 40, 48, 56, 64), (32, 40, 48, 56, 64)),
  "heldout": ((32, 40, 48), (56, 64)),
}


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="fourier", gamma=1.0, protocol="all", small=False)
  if arg.protocol not in PROTOCOLS:
    raise ValueError(f"config argument protocol={arg.protocol!r}; use one of {tuple(PROTOCOLS)}.")
  config = base_config()
  config.seed = 0
  config.total_steps = 4000
  config.batch_size = 32
  config.eval_batch_size = 64
  config.log_every = 50
  config.eval_every = 1000
  config.checkpoint_every = 1000

  config.data = data_config("shapes_detection/full")
  config.data.eval_split = "test[:500]"  # x 5 sizes: 2,500 scored images (see docstring)
  _sizes(config.data.detection, arg.protocol)

  config.model_name = "detr"
  config.model = dict(
    variant="tiny",
    posemb=spec(arg.posemb, gamma=arg.gamma),
    normalize_positions=arg.protocol == "all",
    reference_points=True,
    query_groups=4,
    dropout=0.0,
    attention_dropout=0.0,
  )
  config.task = dict(name="detection", matcher="optax", eos_coef=0.1, aux_loss=True)
  config.optim.update(lr=2e-3, weight_decay=1e-4, grad_clip_norm=0.1)
  config.schedule.warmup_steps = 100

  if arg.small:
    small_loop(config, batch_size=8)
    config.data = data_config("shapes_detection/small")
    _sizes(config.data.detection, arg.protocol)
    config.data.detection.test_sizes = config.data.detection.test_sizes[-1:]
    config.model.update(width=16, mlp_dim=32, num_heads=2, num_queries=10)
  config.lock()
  return config


def _sizes(detection, protocol: str) -> None:
  """The protocol's training and test sizes on the 64 px canvas."""
  detection.train_sizes, detection.test_sizes = PROTOCOLS[protocol]
  detection.train_side = "short" if protocol == "heldout" else "long"
  detection.max_size = 64
