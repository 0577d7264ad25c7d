"""FlexiViT training: each step cuts its images at a patch size drawn from
`config.train_patch_sizes` (Beyer et al. 2023, "FlexiViT: One Model for All Patch Sizes").

The parameters stay laid out at the trained patch size (`vit.kernel_patch`: FlexiViT's
underlying 32x32 kernel; its 7x7 table under 240 px images is `model.posemb_grid=7`): a step at
another patch size PI-resizes the kernel in its forward pass (`lfpe.nn.patches`,
`ViT(trained_patch_size=...)`) and the position encodings meet the step's grid by their own
policies (a learned table resampled, a coordinate encoding evaluated), so one set of parameters
trains at every size. The size of step `s` is drawn from (`config.seed`, `s`) alone (uniform,
big_vision's FlexiViT default), so a resumed run draws the sizes an uninterrupted one does;
every seed of `config.seeds` shares it. Each size is one jitted step, compiled on first use
(`model.patch_size`'s is the program's `train_step`).
"""

from __future__ import annotations

from typing import Any

from lfpe import resolution
from lfpe.errors import ConfigError
from lfpe.models import vit

FIELD = "config.train_patch_sizes"


def sizes(config: Any) -> tuple[Any, ...]:
  """`config.train_patch_sizes` checked: () when unset, else distinct sizes, each an int or an
  (h, w) pair of positive ints, for a ViT (a model with a patch kernel) trained at one image
  size on unpacked batches."""
  given = config.get("train_patch_sizes")
  if not given:
    return ()
  if vit.config_patch(config.model) is None:
    raise ConfigError(
      f"{FIELD}={given!r} needs a ViT with a patch size (`model.patch_size` or a `model.variant`"
      " such as 'B/16'); this model has none. Leave it unset."
    )
  for other, why in (
    ("naflex", "packed batches are cut into patches by the data pipeline at naflex.patch"),
    ("train_sizes", "each step draws one of the two; draw patch sizes at one image size"),
  ):
    if config.data.get(other):
      raise ConfigError(f"{FIELD} with config.data.{other}: {why}. Set one of the two.")
  out = []
  for patch in given:
    given_pair = tuple(patch) if isinstance(patch, list) else patch
    pair = None if isinstance(patch, bool) else vit.config_patch({"patch_size": given_pair})
    if pair is None or min(pair) < 1 or any(isinstance(p, bool) for p in pair):
      raise ConfigError(
        f"{FIELD} has {patch!r}: give each patch size as a positive int or an (h, w) pair, "
        "e.g. (8, 16, (8, 16))."
      )
    if pair in {vit.config_patch({"patch_size": p}) for p in out}:
      raise ConfigError(f"{FIELD} has {patch!r} twice: each size once (sizes are drawn evenly).")
    out.append(patch if isinstance(patch, int) else pair)
  return tuple(out)


def at_patch(config: Any, patch: Any) -> Any:
  """`config` with images cut at `patch`, the kernel kept where it is laid out
  (`vit.kernel_patch`); explicit sizes override a `variant`'s."""
  kept = vit.kernel_patch(config.model)
  at = config.copy_and_resolve_references()
  with at.unlocked():
    for field in ("patch_size", "trained_patch_size"):  # an int field takes a pair once deleted
      if field in at.model:
        del at.model[field]
    at.model.patch_size = patch
    at.model.trained_patch_size = kept
  return at


# The draw's own stream: (seed, step) alone would repeat `data.train_sizes`' draw of the batch
# before, and (seed, (batch, row)) NaFlex's per-example draws.
_STREAM = 0x464C4558


def patch_at(patches: tuple[Any, ...], seed: int, step: int) -> Any:
  """The patch size of training step `step` (1-based): uniform over `patches` (`sizes`), from
  (`seed`, `step`) alone."""
  return resolution.draw_size(patches, seed, (step, _STREAM))
