r"""Widget captioning on synthetic screens (002 Sec. 4.4, Tables 3 and 4 at CPU scale).

`layout_screens/grid` (lfpe.data.screens: 20,000 training / 2,000 test screens of up to 32
objects, boxes in 100 bins, 4 reference captions naming the target's cell of a 10 x 10
grid of the screen, so a caption is right only if the model resolves the box finely; 16
held-out bins never occur in training and test targets on them are marked unseen);
`captions=templates` reads `layout_screens/full`, whose template captions ("second tab in
the bottom bar") a tiny model learns to the metric's ceiling. The `tiny` layout
captioner (lfpe.models.layout: width 64, 2 encoder + 2 decoder pre-LN layers, 4 heads, MLP
256, dropout 0.1) with the box encoding `posemb`, teacher forcing on all 4 references, Adam
without weight decay (002 and Li et al. use Adam; decay would also pull the Embed-4D rows of
unseen bins away from their init), greedy decoding for evaluation (lfpe.tasks.captioning:
BLEU-1/2, ROUGE-L, CIDEr, and CIDEr on seen / unseen targets).

  python -m lfpe.main --config=configs/layout_synthetic.py:posemb=fourier --workdir=/tmp/lay

Expected (measured with `captions=templates`): about 7 steps/s on 2 CPU cores (AMD EPYC,
batch 64), so 800 steps plus the final greedy decoding and scoring of the 2,000 test
captions take 2.5-3 minutes; CIDEr about 300 on templates. The Table 3 / Table 4 record
is in experiments/layout/README.md.

Arguments: posemb=NAME (002 Table 3, `lfpe.models.layout.TABLE3`: `embed_nd` Embed-4D,
`mlp`, `sine_nd` Sine-4D, `fourier_no_mlp`, `fixed_fourier_mlp`, `fourier`; `none`, the
no-position control), captions=grid|templates, groups=1|2|4
(the 1/4, 2/2, 4/1 box partitions of the Fourier encodings; default 4; `mlp` reads the box
as one 4-D group, as 002's MLP), gamma=G (Fourier
kernel width in unit coordinates; 0.05 ≈ 5 bins: 002 gives none), beam=K (beam search,
1 = greedy); small=1 for the CI variant (a few steps on `layout_screens/small`; plumbing
only). Or replace the encoding whole: --config.model.posemb='fourier(groups=2, gamma=0.1)'.
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop

# captions -> the layout_screens configs of the record and of the `small=1` variant
DATASETS = {"grid": ("grid", "grid_small"), "templates": ("full", "small")}


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="fourier", groups=4, gamma=0.05, beam=1, captions="grid", small=False)
  if arg.captions not in DATASETS:
    raise ValueError(f"config argument captions={arg.captions!r}; use one of {tuple(DATASETS)}.")
  config = base_config()
  config.seed = 0
  config.total_steps = 800
  config.batch_size = 64
  config.eval_batch_size = 200
  config.log_every = 100
  config.eval_every = 800
  config.checkpoint_every = 400
  config.dropout_prng = "rbg"  # dropout's random bits were a fifth of the step (benchmarks/)

  config.data = data_config(f"layout_screens/{DATASETS[arg.captions][0]}")
  config.model_name = "layout"
  config.model = dict(variant="tiny", posemb=spec(arg.posemb, gamma=arg.gamma, **_groups(arg)))
  config.task = dict(name="captioning", beam_size=arg.beam, meteor=False)
  config.optim.update(lr=1e-3, weight_decay=0.0, grad_clip_norm=1.0)
  config.schedule.warmup_steps = 100

  if arg.small:
    small_loop(config, batch_size=8, eval_batch_size=64)
    config.data = data_config(f"layout_screens/{DATASETS[arg.captions][1]}")
    config.data.eval_split = "test[:64]"
    config.model.update(width=32, num_heads=2, mlp_dim=64, encoder_depth=1, decoder_depth=1)
  config.lock()
  return config


def _groups(arg) -> dict:
  """`groups` for the Fourier encodings only: 002's MLP reads the 4-D box as one group."""
  return {"groups": arg.groups} if "fourier" in arg.posemb else {}
