"""Where positions come from: injection options and `PositionSource` (one encoding, its hooks).

`PositionSource` builds an `lfpe.encodings` spec for a model and turns it into what the
model consumes: `{'add': table}` for the token stream, or keyword arguments of
`lfpe.nn.attention.Attention` (`pos_q`/`pos_k`/`pos_v`, `concat_q`/`concat_k`,
`logit_bias`, `relative`, `rope`). The injection modes are described in
`lfpe.nn.transformer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe import encodings
from lfpe.checked import Checked

Array = jnp.ndarray
INJECTIONS = ("auto", "stem", "every_layer", "every_layer_shared", "attention", "attention_shared")
QKV_HOOKS = ("q", "k", "v", "qk", "qv", "kv", "qkv")
HOOKS = (*QKV_HOOKS, "concat")
ADD = "add"


def resolve_injection(posemb, pos_injection: str) -> str:
  """The concrete injection for encoding spec `posemb` (resolves `auto`); ValueError if invalid."""
  kind = encodings.kind(posemb)
  if pos_injection not in INJECTIONS:
    raise ValueError(f"pos_injection={pos_injection!r} is unknown; use one of {INJECTIONS}.")
  if pos_injection == "auto":
    return "attention" if kind in ("bias", "logits", "rotary") else "stem"
  if kind in ("bias", "logits", "rotary") and not pos_injection.startswith("attention"):
    raise ValueError(
      f"pos_injection={pos_injection!r} cannot inject posemb={posemb!r} of kind "
      f"{kind!r} (it acts inside attention); use 'attention', "
      f"'attention_shared' or 'auto'."
    )
  return pos_injection


def check_positions(
  *,
  posemb,
  pos_injection: str,
  pos_hook: str,
  concat_channels: int,
  pos_layers: int | None,
  depth: int,
  owner: str,
) -> None:
  """ValueError naming the field if the position options of an encoder do not fit together."""
  try:
    injection = resolve_injection(posemb, pos_injection)
  except ValueError as e:
    raise ValueError(f"{owner}: {e}") from None
  if pos_hook not in HOOKS:
    raise ValueError(f"{owner}: pos_hook={pos_hook!r} is unknown; use one of {HOOKS}.")
  if not isinstance(concat_channels, int) or concat_channels < 1:
    raise ValueError(
      f"{owner}: concat_channels={concat_channels!r} must be a positive int "
      f"(position channels per head, 000 Fig. 11), e.g. 16."
    )
  if pos_layers is not None and (
    not isinstance(pos_layers, int) or not 1 <= pos_layers <= depth or injection == "stem"
  ):
    raise ValueError(
      f"{owner}: pos_layers={pos_layers!r} must be None or an int in [1, depth="
      f"{depth}] with a per-layer pos_injection (not 'stem')."
    )


def encoding_context(
  dim: int, grid_shape: Sequence[int], num_heads: int, hook: str = "add", concat_channels: int = 16
) -> dict[str, Any]:
  """What a model tells `encodings.build`: `dim` is the token width, or for `concat`
  `2 * num_heads * concat_channels` (q and k channels of every head)."""
  width = 2 * num_heads * concat_channels if hook == "concat" else dim
  return dict(
    dim=width,
    grid_shape=tuple(grid_shape),
    num_heads=num_heads,
    head_dim=dim // num_heads,
    ndim=len(grid_shape),
  )  # `ndim` sizes the sinusoidal axes; a spec may override it


def _pad_prefix(logits: Array, num_prefix: int) -> Array:
  """Zero logits for prefix tokens: `[..., N, N]` -> `[..., P + N, P + N]`."""
  pad = [(0, 0)] * (logits.ndim - 2) + [(num_prefix, 0), (num_prefix, 0)]
  return jnp.pad(logits, pad) if num_prefix else logits


class PositionSource(Checked, nn.Module):
  """One encoding and the hooks it gives: `{'add': table}` or keyword args of `Attention`.

  `posemb` is an encoding spec (`lfpe.encodings.parse`). `grid_shape` is the training grid
  (it sizes learned tables); calls may use another grid. `hook` is `add` (token stream),
  one of `QKV_HOOKS`, or `concat` (then the encoding has `2 * num_heads * concat_channels`
  channels, split into the q and k channels of each head). `coord_augment` ({shift, jitter,
  rescale}, `lfpe.encodings.coords.augment`) perturbs the grid coordinates of coordinate-based
  encodings when called with `train=True` (one draw per call from the 'dropout' stream, which
  the trainer feeds when training); evaluation sees the plain grid. `check()` builds the
  encoding unbound once, so its own checks run when the source is defined, not while tracing.
  """

  posemb: Any
  grid_shape: tuple[int, ...]
  dim: int
  num_heads: int
  hook: str = ADD
  concat_channels: int = 16
  num_prefix: int = 0
  coord_augment: Any = None

  def check(self) -> None:
    self._encoding(parent=None)
    if self.coord_augment:
      encodings.coords.check_augment(self.coord_augment, "coord_augment")
      refusal = encodings.augment_refusal(self.posemb)
      if refusal:
        raise ValueError(f"coord_augment: posemb={refusal} or set coord_augment=None.")

  def _encoding(self, **kwargs):
    context = encoding_context(
      self.dim, self.grid_shape, self.num_heads, self.hook, self.concat_channels
    )
    return encodings.build(self.posemb, **context, **kwargs)

  def setup(self):
    self.encoding = self._encoding()
    if self.num_prefix and self.encoding.kind == "absolute":
      init = nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02), (None, None))
      self.prefix = self.param("prefix", init, (self.num_prefix, self.encoding.dim))  # [P, D]

  def __call__(
    self,
    grid_shape: Sequence[int],
    coords: Array | None = None,
    *,
    train: bool = False,
    packed: tuple[Array, Array] | None = None,
  ) -> dict[str, Any]:
    """Hooks for a grid of `grid_shape` (or per-example `coords` `[B, N, M]`, absolute only;
    or `packed` = (`index [B, L, 2]`, `shape [B, 2]`): each token's cell and its example's
    grid, a NaFlex-style packed batch)."""
    if packed is not None:
      return self._packed(*packed, train=train)
    kind, p = self.encoding.kind, self.num_prefix
    augmenting = train and bool(self.coord_augment)
    if kind == "absolute":
      if augmenting and coords is None:
        coords = self.encoding.grid_coords(tuple(grid_shape))
      augmented = self._augment(coords, grid_shape) if augmenting else coords
      return self._absolute(tuple(grid_shape), augmented)
    if kind == "bias":
      return {"logit_bias": _pad_prefix(self.encoding(grid_shape), p)}
    if kind == "logits":
      return {"relative": lambda q: _pad_prefix(self.encoding(q[:, p:], grid_shape), p)}
    if kind == "rotary":
      grid = self.encoding.grid_coords(grid_shape)  # [N, M]
      grid = self._augment(grid, grid_shape) if augmenting else grid
      return self._rope(grid, tuple(grid_shape))
    return {}

  def _packed(self, index: Array, shape: Array, *, train: bool) -> dict[str, Any]:
    """The hooks of a packed batch (`__call__`): every kind per example, each example's
    encoding (or bias, logits, rotary coordinates) what its own grid would give."""
    kind = self.encoding.kind
    if train and self.coord_augment:
      raise ValueError(
        "coord_augment: packed batches (several grids in one batch) are not augmented; set "
        "model.coord_augment=None."
      )
    refusal = encodings.packed_refusal(self.posemb)
    if refusal:
      raise ValueError(f"posemb={self.posemb!r} cannot take packed batches: {refusal}.")
    p = self.num_prefix
    if kind == "absolute":
      return self._hooks(self.encoding.packed(index, shape))
    if kind == "rotary":
      return self._rope(self.encoding.packed_coords(index, shape))  # coords [B, L, M]
    if kind == "bias":  # [B, heads, L, L]
      return {"logit_bias": _pad_prefix(self.encoding.packed(index, shape), p)}
    if kind == "logits":
      return {"relative": lambda q: _pad_prefix(self.encoding.packed(q[:, p:], index, shape), p)}
    return {}  # none

  def _rope(self, coords: Array, shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The rotary hook: the grid tokens rotated by `coords` (`[N, M]` or `[B, N, M]`; `shape`
    the grid, for policies that read its length), the prefix tokens left as they are."""
    p = self.num_prefix
    rope = lambda x: jnp.concatenate([x[:, :p], self.encoding(x[:, p:], coords, shape)], axis=1)
    return {"rope": rope}

  def _augment(self, coords: Array, grid_shape: Sequence[int]) -> Array:
    options = encodings.coords.check_augment(self.coord_augment, "coord_augment")
    key = self.make_rng("dropout")
    return encodings.coords.augment(coords, key, **options, num_positions=tuple(grid_shape))

  def _absolute(self, grid_shape: tuple[int, ...], coords: Array | None) -> dict[str, Array]:
    return self._hooks(self.encoding.grid(grid_shape) if coords is None else self.encoding(coords))

  def _hooks(self, table: Array) -> dict[str, Array]:
    """The hooks of an absolute encoding's table `[(B,) N, D]`, with the prefix rows."""
    if self.num_prefix:  # table: [N, D] or [B, N, D]
      prefix = jnp.broadcast_to(self.prefix, (*table.shape[:-2], *self.prefix.shape))
      table = jnp.concatenate([prefix, table], axis=-2)  # [(B,) P + N, D]
    if self.hook == ADD:
      return {ADD: table}
    if self.hook == "concat":
      table = table.reshape(*table.shape[:-1], 2, self.num_heads, self.concat_channels)
      return {"concat_q": table[..., 0, :, :], "concat_k": table[..., 1, :, :]}
    return {f"pos_{target}": table for target in self.hook}
