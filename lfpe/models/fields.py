"""What the model families' factories and field checks share: one place, one wording."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")


def positive_int(value) -> bool:
  """A positive int that is not a bool."""
  return isinstance(value, int) and not isinstance(value, bool) and value > 0


def variant_fields(
  family: str,
  variant: Any,
  variants: Mapping[str, Mapping[str, Any]],
  kwargs: Mapping[str, Any],
  fields: Sequence[str],
  shown: Sequence[str],
) -> dict[str, Any]:
  """The fields of `variant` updated by `kwargs` (`config.model` less the variant).

  ValueError naming the first key of `kwargs` not in `fields` (the message lists `shown`,
  the keys a config may set), or an unknown `variant`.
  """
  unknown = sorted(set(kwargs) - set(fields))
  if unknown:
    raise ValueError(
      f"model.{unknown[0]} is not a {family} field; valid fields: {', '.join(shown)}."
    )
  if variant is not None and (not isinstance(variant, str) or variant not in variants):
    raise ValueError(f"model.variant={variant!r} is unknown; use one of {tuple(variants)}.")
  return {**variants.get(variant, {}), **kwargs}
