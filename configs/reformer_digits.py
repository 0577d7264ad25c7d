r"""Reformer-style generation of whole digit images (002 Sec. 4.1, Fig. 3, CPU scale).

`digit_images/16x16` (scikit-learn's handwritten digits upsampled to 16x16, 8 grey levels;
`lfpe.data.digit_images`): 256 tokens in raster order, vocabulary 8, held-out bits per dim
on 360 test digits (3.0 is uniform). Unlike crops of photographs, where a crop may come from
anywhere, every image is a centred digit on a blank border, so where a pixel is tells much
about its value: the setting where 002 compares position encodings. The model, loss and
optimiser are `configs/reformer_crops.py`'s (a tiny causal Reformer, LSH attention).

  python -m lfpe.main --config=configs/reformer_digits.py:posemb=fourier --workdir=/tmp/gen

Expected (the pilot in experiments/generation/pilot.json): 3,000 steps of batch 32 at 1.2
steps/s on 2 CPU cores shared with two other jobs (45 min; faster on quiet cores); held-out
bits per dim about 0.88 for `fourier` (3.0 is uniform), and about 1.6 for `none` after 500
steps against 1.20 for `fourier`.

At 256 tokens the LSH layers run every hash round in one pass (`model.rounds_at_once`, the
same numbers without the per-round recompute; benchmarks/README.md, "Record steps").

Arguments: those of `configs/reformer_crops.py` (posemb=NAME, or `none` for the control;
gamma, attention, strict) and size=8|16 (the image side); small=1 for the CI variant (a few
steps of a smaller model; plumbing only).
"""

from configs import reformer_crops
from lfpe.data import default_config as data_config
from lfpe.train.config_lib import parse_arg


def get_config(arg: str | None = None):
  arg = parse_arg(
    arg, posemb="fourier", gamma=1.0, attention="lsh", strict=False, size=16, small=False
  )
  shared = f"posemb={arg.posemb},gamma={arg.gamma},attention={arg.attention}"
  config = reformer_crops.get_config(f"{shared},strict={int(arg.strict)},small={int(arg.small)}")
  with config.unlocked():
    eval_split = config.data.eval_split  # the small variant's shorter evaluation
    config.data = data_config(f"digit_images/{arg.size}x{arg.size}")
    config.data.eval_split = eval_split
    config.model.rounds_at_once = True  # 256 tokens: every hash round in one pass is faster
    if not arg.small:  # long enough for the curves to plateau (experiments/generation)
      config.total_steps, config.eval_every, config.checkpoint_every = 3000, 250, 1000
  config.lock()
  return config
