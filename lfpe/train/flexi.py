"""FlexiViT training: each step cuts its images at a patch size drawn from
`config.train_patch_sizes` (Beyer et al. 2023, "FlexiViT: One Model for All Patch Sizes").

The parameters stay laid out at `model.patch_size` (FlexiViT's underlying 32x32 kernel and
7x7 table): a step at another patch size PI-resizes the kernel in its forward pass
(`lfpe.nn.patches`, `ViT(trained_patch_size=...)`) and the position encodings meet the step's
grid by their own policies (a learned table resampled, a coordinate encoding evaluated), so
one set of parameters trains at every size. The size of step `s` is drawn from
(`config.seed`, `s`) alone (uniform, as FlexiViT's default), so a resumed run draws the
sizes an uninterrupted one does; every seed of `config.seeds` shares it (one compiled step
per size). Each size is one jitted step, compiled on first use.
"""

from __future__ import annotations

from typing import Any

from lfpe import resolution
from lfpe.errors import ConfigError
from lfpe.models import vit

FIELD = "config.train_patch_sizes"


def sizes(config: Any) -> tuple[Any, ...]:
  """`config.train_patch_sizes` checked: () when unset, else each an int or an (h, w) pair of
  positive ints, for a ViT (a model with a patch kernel)."""
  given = config.get("train_patch_sizes")
  if not given:
    return ()
  if vit.config_patch(config.model) is None:
    raise ConfigError(
      f"{FIELD}={given!r} needs a ViT with a patch size (`model.patch_size` or a `model.variant`"
      " such as 'B/16'); this model has none. Leave it unset."
    )
  if config.data.get("naflex"):
    raise ConfigError(
      f"{FIELD} with config.data.naflex: packed batches are cut into patches by the data "
      "pipeline at naflex.patch, one size for the run. Set one of the two."
    )
  out = []
  for patch in given:
    pair = vit.config_patch({"patch_size": tuple(patch) if isinstance(patch, list) else patch})
    if pair is None or min(pair) < 1:
      raise ConfigError(
        f"{FIELD} has {patch!r}: give each patch size as a positive int or an (h, w) pair, "
        "e.g. (8, 16, (8, 16))."
      )
    out.append(patch if isinstance(patch, int) else pair)
  return tuple(out)


def at_patch(config: Any, patch: Any) -> Any:
  """`config` with images cut at `patch`, the kernel kept at the trained patch size
  (`model.trained_patch_size`, else `model.patch_size`)."""
  kept = config.model.get("trained_patch_size") or vit.config_patch(config.model)
  at = config.copy_and_resolve_references()
  with at.unlocked():
    del at.model["patch_size"]  # an int field takes a pair only once deleted
    at.model.patch_size = patch
    at.model.trained_patch_size = kept  # explicit sizes override a `variant`'s
  return at


def patch_at(config: Any, step: int) -> Any:
  """The patch size of training step `step` (1-based): uniform over `sizes(config)`, from
  (`config.seed`, `step`) alone."""
  return resolution.draw_size(sizes(config), config.seed, step)
