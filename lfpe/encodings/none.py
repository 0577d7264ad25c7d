"""`none`: no positional information (the ablation baseline)."""

from typing import ClassVar

import flax.linen as nn

from lfpe.encodings.base import Registration


class NoPosition(nn.Module):
  """Contributes nothing; models skip every position hook for it."""

  kind: ClassVar[str] = "none"

  def __call__(self, *args, **kwargs):
    return None


ENCODINGS = (Registration("none", NoPosition, labels=("No position",)),)
