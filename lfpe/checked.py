"""Config checks that run once, when a module is defined, not each time flax copies it.

Flax runs a module's `__post_init__` again for every copy it makes to `init` or `apply`
the module, and for every submodule that a parent builds while it is traced. A `Checked`
module checks its fields (`check()`, ValueError naming the field and the fix) only when
user code defines it: at top level, or inside a module that is not itself `Checked`.
An lfpe module's `check()` covers everything it builds, so the copies and children made
while tracing are not checked again.
"""

from __future__ import annotations

from flax.core.scope import Scope


class Checked:
  """Mixin for flax.linen modules (list it before `nn.Module`): runs `check()` once."""

  def __post_init__(self):
    super().__post_init__()
    if defined_by_user(self):
      self.check()

  def check(self) -> None:
    """Raises ValueError naming a bad field; subclasses extend it (call super().check())."""


def defined_by_user(module) -> bool:
  """False for flax's copies (parent: a Scope) and for children of a `Checked` module."""
  return not isinstance(module.parent, (Scope, Checked))
