"""What the resolution benchmark (second edition) trains, and how it tests each model at other
sizes.

An *arm* is one trained model family: an encoding spec plus training-time choices (the
coordinates RoPE reads, coordinate augmentation, mixed-resolution training). Every arm
trains on `shape_layout/colour` at 64 px (an 8x8 grid of 8 px patches,
configs/vit_shape_layout.py) and is tested at each of `TEST_SIZES` without fine-tuning,
under each *policy* that applies to it: the encoding options used at test time (the
parameters are the same).

Each (policy, size) is a named evaluation (`evals`, lfpe.train.evaluation), run on the
trained run (experiments/resolution/run.py, one size at a time): the 10,000 test scenes
drawn natively at that size by the shapes renderer (nothing resized), stored once per size
as `shape_layout/colour_test_S` (what `redraw(S)` draws), scored by the classification
task's own eval. At
the training size every policy is the identity (a table resampled to its own grid, RoPE's
factors at 1), so the trainer's own test evaluation scores them all there.

Sizes: `ALIGNED` ones are k or 1/k times the training size, so every test patch nests in a
training patch or holds whole ones; `UNALIGNED` ones (0.75x, 1.5x, 2.25x) cut across them.
The two are reported apart.

Policies (docs/encodings.md, "Changing resolution"):
* `extrapolate`: the encoding evaluated at the new grid's coordinates, in its own mode
  (index coordinates run past the trained range; RoPE as rope-vit's code does it).
* `bicubic_pytorch` / `bicubic` / `bilinear`: learned tables resampled to the new grid:
  PyTorch's `F.interpolate(mode='bicubic', align_corners=False)`, the kernel of RoPE-ViT's
  and DeiT's APE (and of Swin's relative tables); timm's antialiased bicubic; bilinear.
* `pi`, `ntk`, `yarn`: RoPE-Axial with position interpolation (per axis; lfpe's, as
  rotary-embedding-torch's `interpolate_factor`), NTK-aware base scaling, or NTK-by-parts
  with YaRN's temperature; all three change nothing at or below the training size (they only
  extend), so they are tested above it only.
"""

from __future__ import annotations

import dataclasses

from lfpe import encodings
from lfpe.encodings import coords

TRAIN_SIZE = 64
PATCH = 8
ALIGNED = (32, 64, 128, 192)  # 0.5x, 1x, 2x, 3x
UNALIGNED = (48, 96, 144)  # 0.75x, 1.5x, 2.25x
TEST_SIZES = tuple(sorted(ALIGNED + UNALIGNED))
CLAIM_SIZES = (128, 192)  # 2x and 3x: where the published orderings are tested
STEPS, WARMUP = 1000, 100  # the pilot's schedule: the best arms at 80-90 % at 64 px
RECIPE_BAND = (0.80, 0.90)  # the length rule: the best arm at defaults in this band at 64 px
SEEDS = 10
VALIDATION = 2000  # the first training scenes (a tenth): the sweep's validation split
SWEEP_SEEDS = 2
# Test batches of 8 scenes, not the config's 200: XLA:CPU keeps a small batch's attention
# logits (576 tokens at 192 px: 2.7 MB an example) in cache, so a test pass runs 1.3-1.7x
# faster at 128-192 px, its logits equal to float32 rounding (benchmarks/README.md, "Test
# batch"); runs tested before 2026-11-29 12:30 UTC read batches of 200.
TEST_BATCH = 8

TABLE_POLICIES = {
  "bicubic_pytorch": {"resample_method": "bicubic_pytorch"},
  "bicubic": {"resample_method": "bicubic"},
  "bilinear": {"resample_method": "bilinear"},
}
ROPE_POLICIES = {
  "extrapolate": {},
  "pi": {"scaling": "pi"},  # the model gives RoPE its training grid
  "ntk": {"scaling": "ntk"},
  "yarn": {"scaling": "yarn"},
}
ENLARGING_ONLY = ("pi", "ntk", "yarn")  # the identity at or below the training size
MIXED = (48, 64, 96)  # mixed-resolution training: each batch at one of these sizes
# PI of a mixed-resolution model takes its largest trained grid as the training length (the
# positions it saw run to 12x12), not the nominal 8x8, which would compress 96 px, a trained
# size, too: identity up to 96 px, then 12/L' per axis.
MIXED_POLICIES = {
  "extrapolate": {},
  "pi": {"scaling": "pi", "trained_grid": (max(MIXED) // PATCH,) * 2},
}


@dataclasses.dataclass(frozen=True)
class Arm:
  """One trained model family and the test-time policies that apply to it.

  `options`: the encoding's options at training; `model`: other `config.model` fields set
  at training (e.g. coordinate augmentation); `train_sizes`: sizes trained on, a batch at
  one of them each (mixed resolution; empty: the plan's training size alone); `policies`:
  {policy: encoding options at test time}. The first edition's plan uses it too.
  """

  name: str
  posemb: str
  options: dict = dataclasses.field(default_factory=dict)
  model: dict = dataclasses.field(default_factory=dict)
  train_sizes: tuple[int, ...] = ()
  policies: dict = dataclasses.field(default_factory=lambda: {"extrapolate": {}})

  @property
  def slug(self) -> str:
    """The arm's name as a results key and a folder: `rope_axial dinov3` -> `rope_axial-dinov3`."""
    return self.name.replace(" ", "-")


def arms(quick: bool = False) -> tuple[Arm, ...]:
  """Every arm (`quick`: three for CI: a table under every resampling, RoPE under every
  policy, and the control)."""
  rope = lambda *names: {k: ROPE_POLICIES[k] for k in names}
  table = lambda *names: {k: TABLE_POLICIES[k] for k in names}
  every = (
    Arm("none", "none"),
    # ViT's and DeiT's one table over the 2-D grid (`embed_1d` on 8x8), resized as an image:
    # RoPE-ViT's APE baseline with `bicubic_pytorch`
    Arm("embed_1d", "embed_1d", policies=TABLE_POLICIES),
    Arm("embed_2d", "embed_2d", policies=table("bicubic_pytorch", "bilinear")),  # 002's tables
    Arm("sine_2d", "sine_2d"),
    # 002's Learnable-Fourier+MLP on raw (index) coordinates (Table 2), and on lfpe's default
    Arm("fourier", "fourier", {"coords_mode": "index"}),
    Arm("fourier unit", "fourier", {"coords_mode": "unit"}),
    Arm("rope_axial", "rope_axial", policies=ROPE_POLICIES),
    Arm("rope_mixed", "rope_mixed", policies=rope("extrapolate", "pi")),
    # DINOv3's released RoPE recipe: normalised pixel-centre coordinates, rescale 2
    Arm(
      "rope_axial dinov3",
      "rope_axial",
      {"coords_mode": "dinov3"},
      {"coord_augment": coords.DINOV3},
    ),
    # its ablation: DINOv3's coordinates without the augmentation, so that the recipe's two
    # parts are read apart (coordinates vs indices; augmentation on top of the coordinates)
    Arm("rope_axial dinov3-coords", "rope_axial", {"coords_mode": "dinov3"}),
    Arm("rope_mixed mixed-res", "rope_mixed", train_sizes=MIXED, policies=MIXED_POLICIES),
  )
  if quick:
    return tuple(a for a in every if a.name in ("none", "embed_1d", "rope_axial"))
  return every


def by_slug(quick: bool = False) -> dict[str, Arm]:
  return {arm.slug: arm for arm in arms(quick)}


# How a reader outside the record names each arm and policy (docs/which_encoding.md).
ARM_LABELS = {
  "none": "No position",
  "embed_1d": "2-D table (APE)",
  "embed_2d": "Embed-2D",
  "sine_2d": "Sine-2D",
  "fourier": "Learnable-Fourier+MLP on indices",
  "fourier unit": "Learnable-Fourier+MLP on unit coordinates",
  "rope_axial": "RoPE-Axial",
  "rope_mixed": "RoPE-Mixed",
  "rope_axial dinov3": "RoPE-Axial with DINOv3's recipe",
  "rope_axial dinov3-coords": "RoPE-Axial on DINOv3's coordinates",
  "rope_mixed mixed-res": "RoPE-Mixed trained at mixed sizes",
}
POLICY_LABELS = {
  "extrapolate": "extrapolated",
  "bicubic_pytorch": "PyTorch bicubic",
  "bicubic": "timm's antialiased bicubic",
  "bilinear": "bilinear",
  "pi": "position interpolation",
  "ntk": "NTK-aware scaling",
  "yarn": "YaRN",
}


def label(arm: str, policy: str) -> str:
  """An (arm, policy) cell in words, without commas (pages list cells by commas):
  `("rope_axial dinov3", "extrapolate")` -> "RoPE-Axial with DINOv3's recipe
  (extrapolated)"; a name without a label stays as it is."""
  return f"{ARM_LABELS.get(arm, arm)} ({POLICY_LABELS.get(policy, policy)})"


def eval_name(policy: str, size: int) -> str:
  return f"{policy}_{size}px"


def policy_and_size(name: str) -> tuple[str, str]:
  """`eval_name`'s inverse: `("pi", "128")` from `"pi_128px"` (the size as results keys it)."""
  policy, size = name.rsplit("_", 1)
  return policy, size.removesuffix("px")


def tested(arm: Arm, sizes) -> list[tuple[str, int]]:
  """Every (policy, size) of `arm` that needs its own evaluation: not the training size
  (the trainer's test evaluation), PI, NTK and YaRN above it only."""
  return [
    (policy, size)
    for policy in arm.policies
    for size in sizes
    if size != TRAIN_SIZE and (size > TRAIN_SIZE or policy not in ENLARGING_ONLY)
  ]


def evals(arm: Arm, posemb: str, sizes, dataset: str) -> dict:
  """`config.evals` testing a run of `arm` (trained with the encoding spec `posemb` on
  `dataset`) at each of `sizes` under each of its policies (`tested`), run once it is trained:
  the policy's encoding options on `dataset`'s test scenes drawn at the size, as stored once
  (`shape_layout.at_size`: `<dataset>_test_<size>`, equal to `redraw(size)`), read in one
  pass per size for all policies (not cached: each run reads them once)."""
  return {
    eval_name(policy, size): {
      "data": {"name": f"{dataset}_test_{size}", "image_size": size, "cache": False},
      "model": {"posemb": encodings.with_options(posemb, **arm.policies[policy])},
    }
    for policy, size in tested(arm, sizes)
  }
