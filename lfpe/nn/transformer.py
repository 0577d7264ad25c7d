"""Transformer blocks (pre- or post-LN) and an encoder that injects positions where a config says.

`Encoder` puts an encoding from `lfpe.encodings` into the model in one of these ways
(`pos_injection`):
* `stem`: added once to the token stream before the first block;
* `every_layer`: added to the input of every block, one encoding per block;
* `every_layer_shared`: the same, one encoding shared by all blocks (ViT paper's ablation, 004);
* `attention`, `attention_shared`: through the attention hooks of `lfpe.nn.attention`, one
  encoding per block or one shared; absolute encodings go where `pos_hook` says (any of
  q, k, v, e.g. `qk` as DETR, or `concat` for 000 Eq. 13), bias / logits / rotary
  encodings where their kind says;
* `auto`: `stem` for absolute encodings, `attention` for bias / logits / rotary ones.
`pos_layers=k` gives positions to the first k blocks only (000 Table 5).

Sequences may start with `num_prefix` extra tokens (a class token): absolute encodings give
them their own learned rows; relative biases and logits are zero for them and rotary
embeddings leave them unrotated.

Blocks are pre-LN (`norm="pre"`, ViT: `x + f(LN(x))`, the stack ends in a LayerNorm) or
post-LN (`norm="post"`, the original Transformer and DETR: `LN(x + f(x))`, no final norm).
The decoder (DETR's) is in `lfpe.nn.decoder`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe import encodings
from lfpe.checked import Checked
from lfpe.nn.attention import Attention

Array = jnp.ndarray
INJECTIONS = ("auto", "stem", "every_layer", "every_layer_shared", "attention", "attention_shared")
QKV_HOOKS = ("q", "k", "v", "qk", "qv", "kv", "qkv")
HOOKS = (*QKV_HOOKS, "concat")
NORMS = ("pre", "post")
_ADD = "add"


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


def check_norm(norm: str, owner: str) -> None:
  """ValueError naming `norm` unless it is one of NORMS."""
  if norm not in NORMS:
    raise ValueError(
      f"{owner}: norm={norm!r} is unknown; use one of {NORMS} ('pre': ViT, 'post': DETR)."
    )


def residual(
  x: Array,
  sublayer: Callable[[Array], Array],
  *,
  norm: str,
  name: str,
  dropout: float,
  deterministic: bool,
  dtype,
) -> Array:
  """One residual sub-layer: `x + f(LN(x))` (`norm='pre'`) or `LN(x + f(x))` (`'post'`).

  Called inside a compact module: the LayerNorm `name` and `f`'s modules belong to it.
  """
  check_norm(norm, "residual")
  drop = lambda y: nn.Dropout(dropout)(y, deterministic=deterministic)
  if norm == "pre":
    return x + drop(sublayer(layer_norm(name, dtype)(x)))
  return layer_norm(name, dtype)(x + drop(sublayer(x)))


def layer_norm(name: str, dtype) -> nn.LayerNorm:
  """LayerNorm over the channels, parameters on the `embed` axis."""
  return nn.LayerNorm(
    dtype=dtype,
    name=name,
    scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("embed",)),
    bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
  )


def _dense(features: int, axes: tuple[str, str], dtype, name: str) -> nn.Dense:
  return nn.Dense(
    features,
    dtype=dtype,
    name=name,
    kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), axes),
    bias_init=nn.with_logical_partitioning(nn.initializers.normal(stddev=1e-6), axes[1:]),
  )


def _add_table(x: Array, hooks: dict[str, Any]) -> Array:
  """`x` plus the `add` table of `hooks` (`[(B,) N, D]`) in the dtype of `x`, if any."""
  return x + hooks[_ADD].astype(x.dtype) if _ADD in hooks else x


def _pad_prefix(logits: Array, num_prefix: int) -> Array:
  """Zero logits for prefix tokens: `[..., N, N]` -> `[..., P + N, P + N]`."""
  pad = [(0, 0)] * (logits.ndim - 2) + [(num_prefix, 0), (num_prefix, 0)]
  return jnp.pad(logits, pad) if num_prefix else logits


class PositionSource(Checked, nn.Module):
  """One encoding and the hooks it gives: `{'add': table}` or keyword args of `Attention`.

  `posemb` is an encoding spec (`lfpe.encodings.parse`). `grid_shape` is the training grid
  (it sizes learned tables); calls may use another grid. `hook` is `add` (token stream),
  one of `QKV_HOOKS`, or `concat` (then the encoding has `2 * num_heads * concat_channels`
  channels, split into the q and k channels of each head). `check()` builds the encoding
  unbound once, so its own checks run when the source is defined, not while tracing.
  """

  posemb: Any
  grid_shape: tuple[int, ...]
  dim: int
  num_heads: int
  hook: str = _ADD
  concat_channels: int = 16
  num_prefix: int = 0

  def check(self) -> None:
    self._encoding(parent=None)

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

  def __call__(self, grid_shape: Sequence[int], coords: Array | None = None) -> dict[str, Any]:
    """Hooks for a grid of `grid_shape` (or per-example `coords` `[B, N, M]`, absolute only)."""
    kind, p = self.encoding.kind, self.num_prefix
    if kind == "absolute":
      return self._absolute(tuple(grid_shape), coords)
    if kind == "bias":
      return {"logit_bias": _pad_prefix(self.encoding(grid_shape), p)}
    if kind == "logits":
      return {"relative": lambda q: _pad_prefix(self.encoding(q[:, p:], grid_shape), p)}
    if kind == "rotary":
      grid = self.encoding.grid_coords(grid_shape)  # [N, M]
      rope = lambda x: jnp.concatenate([x[:, :p], self.encoding(x[:, p:], grid)], axis=1)
      return {"rope": rope}
    return {}

  def _absolute(self, grid_shape: tuple[int, ...], coords: Array | None) -> dict[str, Array]:
    table = self.encoding.grid(grid_shape) if coords is None else self.encoding(coords)
    if self.num_prefix:  # table: [N, D] or [B, N, D]
      prefix = jnp.broadcast_to(self.prefix, (*table.shape[:-2], *self.prefix.shape))
      table = jnp.concatenate([prefix, table], axis=-2)  # [(B,) P + N, D]
    if self.hook == _ADD:
      return {_ADD: table}
    if self.hook == "concat":
      table = table.reshape(*table.shape[:-1], 2, self.num_heads, self.concat_channels)
      return {"concat_q": table[..., 0, :, :], "concat_k": table[..., 1, :, :]}
    return {f"pos_{target}": table for target in self.hook}


class MlpBlock(nn.Module):
  """Dense -> GELU -> dropout -> Dense, back to the input width."""

  mlp_dim: int
  dropout: float = 0.0
  dtype: Any = None

  @nn.compact
  def __call__(self, x: Array, deterministic: bool = True) -> Array:
    width = x.shape[-1]
    x = _dense(self.mlp_dim, ("embed", "mlp"), self.dtype, "fc1")(x)  # [B, N, mlp]
    x = nn.Dropout(self.dropout)(nn.gelu(x), deterministic=deterministic)
    return _dense(width, ("mlp", "embed"), self.dtype, "fc2")(x)  # [B, N, D]


class EncoderBlock(nn.Module):
  """Self-attention then MLP, each a `residual` sub-layer (pre-LN by default, `norm='post'`)."""

  num_heads: int
  mlp_dim: int
  dropout: float = 0.0
  attention_dropout: float = 0.0
  causal: bool = False
  norm: str = "pre"
  dtype: Any = None

  @nn.compact
  def __call__(
    self,
    x: Array,
    *,
    hooks: dict[str, Any] | None = None,
    key_padding_mask: Array | None = None,
    deterministic: bool = True,
  ) -> Array:
    """`x` `[B, N, D]` -> `[B, N, D]`; `hooks` are position keyword args of `Attention`."""
    attention = lambda y: Attention(
      num_heads=self.num_heads, dropout=self.attention_dropout, dtype=self.dtype, name="attention"
    )(
      y,
      **(hooks or {}),
      key_padding_mask=key_padding_mask,
      causal=self.causal,
      deterministic=deterministic,
    )
    mlp = lambda y: MlpBlock(
      mlp_dim=self.mlp_dim, dropout=self.dropout, dtype=self.dtype, name="mlp"
    )(y, deterministic)
    sub = dict(norm=self.norm, dropout=self.dropout, deterministic=deterministic, dtype=self.dtype)
    x = residual(x, attention, name="norm1", **sub)
    return residual(x, mlp, name="norm2", **sub)


class Encoder(Checked, nn.Module):
  """A stack of `EncoderBlock`s with positions injected as the module docstring says.

  Attributes:
    depth, width, num_heads, mlp_dim: the stack's sizes (`width` is the token width D).
    grid_shape: the training grid of the non-prefix tokens (sizes learned tables).
    posemb: an `lfpe.encodings` spec: a name, `"name(option=value, ...)"` or a dict.
    pos_injection, pos_hook, concat_channels, pos_layers: where positions enter.
    num_prefix: tokens before the grid tokens (class token).
    causal: causal self-attention (autoregressive models).
    norm: `pre` (ViT; the stack ends in `encoder_norm`) or `post` (DETR; no final norm).
  """

  depth: int
  width: int
  num_heads: int
  mlp_dim: int
  grid_shape: tuple[int, ...]
  posemb: Any = "none"
  pos_injection: str = "auto"
  pos_hook: str = "qk"
  concat_channels: int = 16
  pos_layers: int | None = None
  num_prefix: int = 0
  causal: bool = False
  norm: str = "pre"
  dropout: float = 0.0
  attention_dropout: float = 0.0
  dtype: Any = None

  def check(self) -> None:
    """Position options, the norm, then the encoding's own checks (one source, unbound)."""
    check_positions(
      posemb=self.posemb,
      pos_injection=self.pos_injection,
      pos_hook=self.pos_hook,
      concat_channels=self.concat_channels,
      pos_layers=self.pos_layers,
      depth=self.depth,
      owner="Encoder",
    )
    check_norm(self.norm, "Encoder")
    injection = resolve_injection(self.posemb, self.pos_injection)
    self._source(injection, parent=None)

  def _source(self, injection: str, **kwargs) -> PositionSource:
    return PositionSource(
      posemb=self.posemb,
      grid_shape=tuple(self.grid_shape),
      dim=self.width,
      num_heads=self.num_heads,
      hook=self.pos_hook if injection.startswith("attention") else _ADD,
      concat_channels=self.concat_channels,
      num_prefix=self.num_prefix,
      **kwargs,
    )

  def _block(self, i: int) -> EncoderBlock:
    return EncoderBlock(
      num_heads=self.num_heads,
      mlp_dim=self.mlp_dim,
      dropout=self.dropout,
      attention_dropout=self.attention_dropout,
      causal=self.causal,
      norm=self.norm,
      dtype=self.dtype,
      name=f"encoderblock_{i}",
    )

  def _layer_hooks(self, injection: str, grid_shape, coords, given) -> list[dict[str, Any]]:
    """The position hooks of each block: `given`, one shared source, or one per block."""
    count = self.pos_layers or self.depth
    if given is not None:
      hooks = [given] * count
    elif injection == "stem":
      hooks = []
    elif injection.endswith("_shared"):
      hooks = [self._source(injection, name="pos")(grid_shape, coords)] * count
    else:
      hooks = [self._source(injection, name=f"pos_{i}")(grid_shape, coords) for i in range(count)]
    return hooks + [{}] * (self.depth - len(hooks))

  @nn.compact
  def __call__(
    self,
    x: Array,
    grid_shape: Sequence[int] | None = None,
    *,
    coords: Array | None = None,
    hooks: dict[str, Any] | None = None,
    key_padding_mask: Array | None = None,
    deterministic: bool = True,
  ) -> Array:
    """`x` `[B, P + prod(grid_shape), D]` -> `[B, P + N, D]` (normalised if pre-LN).

    `grid_shape` defaults to the training grid; `coords` `[B, N, M]` replaces the grid
    coordinates of absolute encodings per example (e.g. `coords.detr(mask)`). `hooks`
    (what a `PositionSource` returns) are given to every block instead of this encoder's
    own encoding, whose `posemb` must then be `none`: DETR computes one table for its
    encoder and its decoder's memory keys.
    """
    grid_shape = tuple(grid_shape or self.grid_shape)
    if x.shape[1] != self.num_prefix + math.prod(grid_shape) or x.shape[-1] != self.width:
      raise ValueError(
        f"Encoder: got tokens {tuple(x.shape)}, expected [B, num_prefix={self.num_prefix}"
        f" + prod(grid_shape={grid_shape}), width={self.width}]; pass the grid of the input."
      )
    if hooks is not None and encodings.kind(self.posemb) != "none":
      raise ValueError(
        f"Encoder: got position hooks and posemb={self.posemb!r}; give one of them "
        "(posemb='none' with hooks)."
      )
    injection = resolve_injection(self.posemb, self.pos_injection)
    if injection == "stem":
      x = _add_table(x, self._source(injection, name="pos")(grid_shape, coords))
    x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
    for i, layer_hooks in enumerate(self._layer_hooks(injection, grid_shape, coords, hooks)):
      x = _add_table(x, layer_hooks)
      x = self._block(i)(
        x,
        hooks={k: v for k, v in layer_hooks.items() if k != _ADD},
        key_padding_mask=key_padding_mask,
        deterministic=deterministic,
      )
    return layer_norm("encoder_norm", self.dtype)(x) if self.norm == "pre" else x
