"""What the resolution benchmark trains and how it tests each model at other sizes.

An *arm* is one trained model family: an encoding spec plus training-time choices (the
coordinate mode, coordinate augmentation, mixed-resolution training). Every arm trains at
32 px (an 8x8 grid of 4x4 patches) and is tested at each of `TEST_SIZES` without
fine-tuning, under each *policy* that applies to it: how the encoding meets a grid it was not
trained on, given as the encoding options used at test time (the parameters are the same).

Each (policy, size) is a named evaluation of the run's config (`evals`, lfpe.train.evaluation):
the 32 px test split resized to the size with `nearest`, which is exactly the scene drawn
natively at that size (the squares and their grid scale with the image, `size // 8` pixels;
tests/experiments/test_resolution_plan.py), scored by the classification task's own eval.

Policies (docs/encodings.md, "Changing resolution"):
* `extrapolate`: the encoding evaluated at the new grid's coordinates, in its own mode
  (`index`: positions beyond the training range; `unit`/`centered`: the same range, finer).
* `bilinear` / `bicubic`: learned tables (absolute, relative-bias, relative-attention)
  resampled to the new grid.
* `pi` / `ntk`: 2-D RoPE with position interpolation (coordinates scaled back into the
  training range per axis) or NTK-aware frequency scaling.
"""

from __future__ import annotations

from experiments.resolution.plan import Arm, eval_name  # one arm type, one name, both editions
from lfpe import encodings

TRAIN_SIZE = 32
TEST_SIZES = (16, 24, 32, 48, 64, 96)  # 0.5x to 3x
TASKS = ("direction", "absolute")
SEEDS = 3
TABLE_POLICIES = {
  "bilinear": {"resample_method": "bilinear"},
  "bicubic": {"resample_method": "bicubic"},
}
ROPE_POLICIES = {
  "extrapolate": {},
  "pi": {"scaling": "pi"},  # the model gives RoPE its training grid
  "ntk": {"scaling": "ntk"},
}


# DINOv3's three perturbations at lfpe's values, on lfpe's `extent` convention (DINOv3's
# released preset is rescale 2 alone, pixel centres: `lfpe.encodings.coords.DINOV3`).
AUGMENT = {"coord_augment": {"shift": 0.1, "jitter": 1.1, "rescale": 1.25}}
MIXED = (24, 32, 48)


def arms(quick: bool = False) -> tuple[Arm, ...]:
  """Every arm of the benchmark (`quick`: three for CI, covering tables, RoPE policies,
  coordinate augmentation and mixed resolution)."""
  every = (
    Arm("none", "none"),
    Arm("embed_1d", "embed_1d", policies=TABLE_POLICIES),
    Arm("embed_2d", "embed_2d", policies=TABLE_POLICIES),
    Arm("embed_2d mixed-res", "embed_2d", train_sizes=MIXED, policies=TABLE_POLICIES),
    Arm("sine_2d index", "sine_2d", {"coords_mode": "index"}),
    Arm("sine_2d unit", "sine_2d", {"coords_mode": "unit"}),
    Arm("sine_2d unit +aug", "sine_2d", {"coords_mode": "unit"}, AUGMENT),
    Arm("fourier index", "fourier", {"coords_mode": "index", "gamma": 0.25}),
    Arm("fourier unit", "fourier", {"coords_mode": "unit"}),
    Arm("fourier unit +aug", "fourier", {"coords_mode": "unit"}, AUGMENT),
    Arm("fourier unit mixed-res", "fourier", {"coords_mode": "unit"}, train_sizes=MIXED),
    Arm("learnable_sine unit", "learnable_sine", {"coords_mode": "unit"}),
    Arm("mlp unit", "mlp", {"coords_mode": "unit"}),
    Arm("gabor_edge", "gabor_edge"),
    Arm("rel_bias_2d", "rel_bias_2d", policies=TABLE_POLICIES),
    Arm("rel_attn_2d", "rel_attn_2d", policies=TABLE_POLICIES),
    Arm("rope_axial", "rope_axial", policies=ROPE_POLICIES),
    Arm("rope_axial +aug", "rope_axial", model=AUGMENT, policies=ROPE_POLICIES),
    Arm("rope_mixed", "rope_mixed", policies={k: ROPE_POLICIES[k] for k in ("extrapolate", "pi")}),
    Arm(  # PI into the nominal 8x8 grid, as recorded (the second edition: the largest trained)
      "rope_mixed mixed-res",
      "rope_mixed",
      train_sizes=MIXED,
      policies={"extrapolate": {}, "pi": {"scaling": "pi", "trained_grid": (8, 8)}},
    ),
  )
  if quick:
    quick_arms = ("none", "embed_2d mixed-res", "rope_axial +aug")
    return tuple(a for a in every if a.name in quick_arms)
  return every


def evals(arm: Arm, posemb: str, sizes) -> dict:
  """`config.evals` testing a run of `arm` (trained with the encoding spec `posemb`) at each
  of `sizes` under each of its policies: the test split resized (nearest) to the size, with
  the policy's encoding options, run at the last step."""
  return {
    eval_name(policy, size): {
      "data": {"image_size": size, "eval_preprocess": f"resize({size}, method='nearest')"},
      "model": {"posemb": encodings.with_options(posemb, **options)},
    }
    for policy, options in arm.policies.items()
    for size in sizes
  }
