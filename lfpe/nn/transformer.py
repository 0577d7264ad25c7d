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
The decoder (DETR's) is in `lfpe.nn.decoder`; the position sources and the checks of
the injection options in `lfpe.nn.positions`.
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
from lfpe.nn.positions import ADD, PositionSource, check_positions, resolve_injection

Array = jnp.ndarray
NORMS = ("pre", "post")
# The feed-forward nonlinearity: flax's (and big_vision's) tanh-approximate GELU, the exact
# erf GELU (PyTorch's nn.GELU, timm), or ReLU (the original Transformer and DETR).
ACTIVATIONS = {
  "gelu": nn.gelu,
  "gelu_exact": lambda x: nn.gelu(x, approximate=False),
  "relu": nn.relu,
}


def check_norm(norm: str, owner: str) -> None:
  """ValueError naming `norm` unless it is one of NORMS."""
  if norm not in NORMS:
    raise ValueError(
      f"{owner}: norm={norm!r} is unknown; use one of {NORMS} ('pre': ViT, 'post': DETR)."
    )


def check_activation(activation: str, owner: str) -> None:
  """ValueError naming `activation` unless it is one of ACTIVATIONS."""
  if activation not in ACTIVATIONS:
    raise ValueError(
      f"{owner}: activation={activation!r} is unknown; use one of {tuple(ACTIVATIONS)}."
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
  return x + hooks[ADD].astype(x.dtype) if ADD in hooks else x


class MlpBlock(nn.Module):
  """Dense -> activation (`ACTIVATIONS`, GELU by default) -> dropout -> Dense, back to the
  input width."""

  mlp_dim: int
  dropout: float = 0.0
  dtype: Any = None
  activation: str = "gelu"

  @nn.compact
  def __call__(self, x: Array, deterministic: bool = True) -> Array:
    width = x.shape[-1]
    x = _dense(self.mlp_dim, ("embed", "mlp"), self.dtype, "fc1")(x)  # [B, N, mlp]
    x = ACTIVATIONS[self.activation](x)
    x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
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
  activation: str = "gelu"

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
      mlp_dim=self.mlp_dim,
      dropout=self.dropout,
      dtype=self.dtype,
      activation=self.activation,
      name="mlp",
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
    activation: the feed-forward nonlinearity, one of `ACTIVATIONS` (DETR's is 'relu').
    input_dropout: dropout on the encoder's input, after a stem encoding (ViT's); DETR has
      none there (False).
    coord_augment: {shift, jitter, rescale, convention} of the encoding's coordinates when
      training (`PositionSource`, `lfpe.encodings.coords.augment`; off by default).
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
  coord_augment: Any = None
  activation: str = "gelu"
  input_dropout: bool = True

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
    check_activation(self.activation, "Encoder")
    injection = resolve_injection(self.posemb, self.pos_injection)
    self._source(injection, parent=None)

  def _source(self, injection: str, **kwargs) -> PositionSource:
    return PositionSource(
      posemb=self.posemb,
      grid_shape=tuple(self.grid_shape),
      dim=self.width,
      num_heads=self.num_heads,
      hook=self.pos_hook if injection.startswith("attention") else ADD,
      concat_channels=self.concat_channels,
      num_prefix=self.num_prefix,
      coord_augment=self.coord_augment,
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
      activation=self.activation,
      name=f"encoderblock_{i}",
    )

  def _layer_hooks(
    self, injection: str, grid_shape, coords, given, train, packed
  ) -> list[dict[str, Any]]:
    """The position hooks of each block: `given`, one shared source, or one per block."""
    count = self.pos_layers or self.depth
    source = lambda name: self._source(injection, name=name)(
      grid_shape, coords, train=train, packed=packed
    )
    if given is not None:
      hooks = [given] * count
    elif injection == "stem":
      hooks = []
    elif injection.endswith("_shared"):
      hooks = [source("pos")] * count
    else:
      hooks = [source(f"pos_{i}") for i in range(count)]
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
    packed: tuple[Array, Array] | None = None,
  ) -> Array:
    """`x` `[B, P + prod(grid_shape), D]` -> `[B, P + N, D]` (normalised if pre-LN).

    `grid_shape` defaults to the training grid; `coords` `[B, N, M]` replaces the grid
    coordinates of absolute encodings per example (e.g. `coords.detr(mask)`). `hooks`
    (what a `PositionSource` returns) are given to every block instead of this encoder's
    own encoding, whose `posemb` must then be `none`: DETR computes one table for its
    encoder and its decoder's memory keys. `packed` = (`index [B, L, M]`, `shape [B, M]`):
    the L tokens after the prefix are cells of per-example grids (a NaFlex-style packed
    batch; `key_padding_mask` marks the padding), and `grid_shape` is not read.
    """
    grid_shape = tuple(grid_shape or self.grid_shape)
    tokens = packed[0].shape[1] if packed is not None else math.prod(grid_shape)
    if x.shape[1] != self.num_prefix + tokens or x.shape[-1] != self.width:
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
      source = self._source(injection, name="pos")
      x = _add_table(x, source(grid_shape, coords, train=not deterministic, packed=packed))
    if self.input_dropout:
      x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
    train = not deterministic
    layers = self._layer_hooks(injection, grid_shape, coords, hooks, train, packed)
    for i, layer_hooks in enumerate(layers):
      x = _add_table(x, layer_hooks)
      x = self._block(i)(
        x,
        hooks={k: v for k, v in layer_hooks.items() if k != ADD},
        key_padding_mask=key_padding_mask,
        deterministic=deterministic,
      )
    return layer_norm("encoder_norm", self.dtype)(x) if self.norm == "pre" else x
