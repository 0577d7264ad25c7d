r"""Widget captioning at the paper's scale (002 Sec. 4.4, Table 3; Li et al. 2020's model).

The `widget` layout captioner (lfpe.models.layout; Li et al.'s widget_caption_config.py:
width 128, 6 encoder + 6 decoder layers, 8 heads, MLP 512, dropout 0.2, captions of 12
tokens) with a 10,000-word caption vocabulary, batch 64, 100k steps, Adam (no weight decay)
with the T2T schedule of Li et al.: linear warmup over 2,000 steps to 128^-0.5 · 2000^-0.5 ≈
2e-3, then rsqrt decay; gradients clipped at global norm 5; beam search of 4 (α = 0.6);
METEOR (needs `java`).

Data: `widget_caption/full` (lfpe.data.widget_caption): Li et al.'s released widget captions on
RICO screens (boxes in 100 bins, Li et al.'s 11 object types, one 10,000-word vocabulary for
captions and screen texts, built from the training split). It is built offline on first use
from a manual download in {data_dir}/downloads/manual/widget_caption/ (widget_captions.csv,
split/, and RICO's combined/ view hierarchies); without it, the run stops with the download
instructions (docs/training.md, "Widget captioning data").

Parameters (jax.eval_shape): 6.69M with posemb=embed_nd (Embed-4D: 6,692,752) and with
posemb=fourier (Learnable-Fourier+MLP: 6,693,520 for groups 4, 6,694,768 for 2, 6,697,264 for
1); two [10,000, 128] word tables (texts, captions) are 2.56M of it. 002 reports 5.11M and
5.07M for a model that differs: Li et al.'s adds a pixel encoder of the widget image, shares
one word embedding (GloVe, frozen in their config) between screen texts and captions, and
its Embed-4D is four [100, 128] tables with a 128 x 128 projection
each (about 117k parameters) where lfpe's is four [100, 32] tables concatenated (12,800), so
Fourier+MLP (13,568 with |F| = 384, |H| = 32) saves nothing here, unlike 002's 0.04M.

  python -m lfpe.main --config=configs/widget_caption.py:posemb=fourier --workdir=/tmp/widget

Expected: not run here (needs the widget-caption data and an accelerator; 002: 12 hours on
4 V100s). 002 Table 3 reports CIDEr 97.0 (Embed-4D) and 100.7 (Learnable-Fourier+MLP-4/1).

Arguments: posemb=NAME, groups=1|2|4, gamma=G as in configs/layout_synthetic.py; small=1
for the CI variant (a few steps of a small model on `layout_screens/small`, no METEOR).
"""

from lfpe.data import default_config as data_config
from lfpe.encodings import spec
from lfpe.train.config_lib import base_config, parse_arg, small_loop

CAPTION_VOCAB = 10_000  # Li et al.'s vocab_size


def get_config(arg: str | None = None):
  arg = parse_arg(arg, posemb="fourier", groups=4, gamma=0.05, small=False)
  config = base_config()
  config.seed = 0
  config.total_steps = 100_000
  config.batch_size = 64
  config.eval_batch_size = 256
  config.log_every = 100
  config.eval_every = 10_000
  config.checkpoint_every = 10_000

  config.data = data_config("layout_screens/small" if arg.small else "widget_caption/full")
  config.model_name = "layout"
  config.model = dict(
    variant="widget",
    caption_vocab=CAPTION_VOCAB,
    posemb=spec(arg.posemb, gamma=arg.gamma, **_groups(arg)),
  )
  config.task = dict(name="captioning", beam_size=4, length_penalty=0.6, meteor=True)
  # Captions are decoded with the vocabulary of this build of the data (a flag override of
  # config.data.name or data_dir carries over).
  config.task.data_name = config.data.get_ref("name")
  config.task.data_dir = config.data.get_ref("data_dir")
  config.optim.update(lr=128**-0.5 * 2000**-0.5, weight_decay=0.0, grad_clip_norm=5.0)
  config.schedule.update(name="warmup_rsqrt", warmup_steps=2000, timescale=2000.0)

  if arg.small:
    small_loop(config, batch_size=8)
    config.data.eval_split = "test[:16]"
    config.model.update(width=32, num_heads=2, mlp_dim=64, encoder_depth=1, decoder_depth=1)
    config.task.update(beam_size=2, meteor=False)
  config.lock()
  return config


def _groups(arg) -> dict:
  """`groups` for the Fourier encodings only: 002's MLP reads the 4-D box as one group."""
  return {"groups": arg.groups} if "fourier" in arg.posemb else {}
