"""Layout captioner (002 Sec. 4.4, Tables 3-4): the caption of one object of a screen.

Li et al.'s widget captioner (2020, "Pixel+Local+Context" less the pixels) with any absolute
`lfpe.encodings` encoding of the boxes. Each object of a screen is one token of a transformer
encoder; its vector is three parts concatenated and mapped by one Dense to `width` (the same
as one linear map per part, summed: positions enter by addition, as everywhere in 002):
  * text: the mean embedding of the object's text tokens (0 = padding, left out; zeros
    for an object without text),
  * type: a learned embedding of the object's type,
  * box: the encoding `posemb` of (top, left, bottom, right), integer bins 0 .. bins-1 read
    in the encoding's `coords_mode`, `coords.axis_values(bins, mode)[bin]` (the bin itself
    for learned tables and `sine_nd`, bin / (bins - 1) for `unit`: `fourier`, `mlp`), and for
    encodings with `groups` split by `coords.boxes`: G = 1 one 4-D group (002's "1/4"),
    G = 2 (top, left) and (bottom, right) ("2/2"), G = 4 four 1-D groups ("4/1");
    zeros for `posemb='none'` (the no-position control: objects without their boxes).
A learned `target_embedding` is added to the object to caption. The encoder (pre-LN, no
positions: objects are a set) masks the padding rows (`>= num_objects`) as keys. The decoder
embeds the caption tokens, adds learned positions `caption_pos` as DETR's query positions
(queries and keys of causal self-attention, queries of cross-attention), attends to the
objects with their padding mask, and a Dense maps to `caption_vocab` logits.

`encode` and `decode` are separate methods: `greedy_decode` and `beam_decode`
(lfpe.models.layout_decode) encode once and run the decoder over a fixed token buffer in a
`lax.fori_loop` (jit-able). The box
encoding's parameters live under `box_encoding`; for `embed_nd` (Embed-4D) these are
`table_0..3` with one row per bin, and rows of bins absent from training get zero gradient:
Adam leaves them at their init, AdamW's decay (lfpe.train.optim decays every matrix) would
shrink them, so the captioning configs train without weight decay.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe import encodings
from lfpe.checked import Checked
from lfpe.encodings import coords as coords_lib
from lfpe.models import fields
from lfpe.models.fields import check_dtype, positive_int, variant_fields
from lfpe.nn.decoder import Decoder
from lfpe.nn.positions import encoding_context
from lfpe.nn.transformer import Encoder

Array = jnp.ndarray
PAD, BOS, EOS = 0, 1, 2  # caption ids (lfpe.data.screens)
INPUTS = ("boxes", "types", "texts", "num_objects", "target")  # what `encode` reads
# name: the fields it sets. `widget`: 002 / Li et al.'s (widget_caption_config.py: hidden
# 128, 6 + 6 layers, 8 heads, filter 512, dropout 0.2); `tiny`: CPU runs and tests.
VARIANTS = {
  "widget": dict(
    width=128,
    encoder_depth=6,
    decoder_depth=6,
    num_heads=8,
    mlp_dim=512,
    caption_len=12,
    dropout=0.2,
    attention_dropout=0.2,
  ),
  "tiny": dict(
    width=64,
    encoder_depth=2,
    decoder_depth=2,
    num_heads=4,
    mlp_dim=256,
    caption_len=12,
    dropout=0.1,
    attention_dropout=0.1,
  ),
}
# 002 Table 3's rows as encoding specs (groups G: "1/4" G = 1, "2/2" G = 2, "4/1" G = 4).
TABLE3 = {
  "Embed-4D": "embed_nd",
  "MLP": "mlp",
  "Sine-4D": "sine_nd",
  "Learnable-Fourier-2/2": "fourier_no_mlp(groups=2)",
  "Fixed-Fourier+MLP-1/4": "fixed_fourier_mlp(groups=1)",
  "Fixed-Fourier+MLP-2/2": "fixed_fourier_mlp(groups=2)",
  "Fixed-Fourier+MLP-4/1": "fixed_fourier_mlp(groups=4)",
  "Learnable-Fourier+MLP-1/4": "fourier(groups=1)",
  "Learnable-Fourier+MLP-2/2": "fourier(groups=2)",
  "Learnable-Fourier+MLP-4/1": "fourier(groups=4)",
}


class LayoutCaptioner(Checked, nn.Module):
  """The model of the module docstring; defaults are the `tiny` variant with Embed-4D.

  Attributes:
    caption_vocab, text_vocab, num_types: sizes of the caption, object-text and type ids.
    bins: coordinate bins per box side (sizes learned tables; 100 in 002 and Li et al.).
    width, encoder_depth, decoder_depth, num_heads, mlp_dim: the transformers' sizes.
    caption_len: stored caption length (`<bos>` .. `<eos>`); the decoder reads up to
      `caption_len - 1` input positions.
    posemb: an absolute `lfpe.encodings` spec for the boxes (002 Table 3: `TABLE3`).
    dropout, attention_dropout: on residual branches and inputs, on attention weights.
    dtype: compute dtype of the transformers; embeddings and logits stay float32.
  """

  caption_vocab: int
  text_vocab: int
  num_types: int
  bins: int = 100
  width: int = 64
  encoder_depth: int = 2
  decoder_depth: int = 2
  num_heads: int = 4
  mlp_dim: int = 256
  caption_len: int = 12
  posemb: Any = "embed_nd"
  dropout: float = 0.1
  attention_dropout: float = 0.1
  dtype: str = "float32"

  def check(self) -> None:
    """ValueError naming the `model.*` field that is wrong, before anything is traced."""
    _check_fields(self)
    if not self._no_position:
      self._check_box_encoding()
    self._encoder(parent=None)
    self._decoder(parent=None)

  def _check_box_encoding(self) -> None:
    """ValueError naming `model.posemb` unless its encoding reads and fits 4-D boxes."""
    try:
      name = encodings.parse(self.posemb)[0]
      if not encodings.info(name).reads_boxes:
        raise ValueError(
          f"encoding {name!r} cannot read 4-D boxes; use one that can: "
          f"{', '.join(n for n in encodings.NAMES if encodings.info(n).reads_boxes)}."
        )
      encoding = self._encoding(parent=None)  # the encoding's own checks
      groups = getattr(encoding, "groups", None)
      box = jnp.zeros((1, 4) if groups is None else (1, groups, 4 // groups))
      jax.eval_shape(encoding.init, jax.random.key(0), box)  # its options fit 4-D boxes
    except ValueError as e:
      raise ValueError(f"model.posemb={self.posemb!r}: {e}") from None

  @property
  def _no_position(self) -> bool:
    """`posemb='none'`: the control, objects without their boxes."""
    return encodings.kind(self.posemb) == "none"

  def _encoding(self, **kwargs):
    """The box encoding: `ndim` is 4, or 4 / G coordinates per group for grouped encodings."""
    context = encoding_context(self.width, (self.bins,) * 4, self.num_heads)
    groups = getattr(encodings.build(self.posemb, **context, parent=None), "groups", None)
    if groups is not None:
      if groups not in (1, 2, 4):
        raise ValueError(f"groups={groups!r} must split the 4 box sides evenly: use 1, 2 or 4.")
      context["ndim"] = 4 // groups
    return encodings.build(self.posemb, **context, **kwargs)

  def _encoder(self, **kwargs) -> Encoder:
    return fields.encoder(
      self, grid_shape=(1,), **kwargs
    )  # objects form no grid: `encode` passes (N,)

  def _decoder(self, **kwargs) -> Decoder:
    return fields.decoder(self, causal=True, **kwargs)

  def setup(self):
    embed = nn.with_logical_partitioning(nn.initializers.normal(1.0), (None, "embed"))
    self.text_embedding = nn.Embed(self.text_vocab, self.width, embedding_init=embed)
    self.type_embedding = nn.Embed(self.num_types, self.width, embedding_init=embed)
    self.box_encoding = None if self._no_position else self._encoding()
    self.object_proj = nn.Dense(self.width, kernel_init=fields.lecun_kernel((None, "embed")))
    vector = nn.with_logical_partitioning(nn.initializers.normal(1.0), ("embed",))
    self.target_embedding = self.param("target_embedding", vector, (self.width,))
    self.encoder = self._encoder()
    self.caption_embedding = nn.Embed(self.caption_vocab, self.width, embedding_init=embed)
    self.caption_pos = self.param("caption_pos", embed, (self.caption_len - 1, self.width))
    self.decoder = self._decoder()
    self.input_dropout = nn.Dropout(self.dropout)
    self.head = nn.Dense(self.caption_vocab, kernel_init=fields.lecun_kernel(("embed", "classes")))

  def box_coords(self, boxes: Array) -> Array:
    """Bins `[..., 4]` -> what `box_encoding` reads: `[..., 4]` or `[..., G, 4 / G]` float32.

    A bin outside 0 .. bins-1 reads NaN (a non-finite loss, never a silently clamped box).
    """
    values = jnp.asarray(coords_lib.axis_values(self.bins, self.box_encoding.coords_mode))
    x = jnp.take(values, boxes, mode="fill", fill_value=jnp.nan)
    groups = getattr(self.box_encoding, "groups", None)
    return x if groups is None else coords_lib.boxes(x, groups)

  def encode(self, boxes, types, texts, num_objects, target, *, train: bool):
    """Objects `[B, N, ...]` -> (memory `[B, N, width]`, padding `[B, N]`, True = no object)."""
    _check_inputs(boxes, types, texts, num_objects, target)
    n = boxes.shape[1]
    padding = jnp.arange(n) >= num_objects[:, None]
    real = (texts > 0)[..., None]  # [B, N, K, 1]
    words = jnp.sum(self.text_embedding(texts) * real, axis=-2) / jnp.maximum(real.sum(-2), 1)
    if self.box_encoding is None:  # the control: a box adds nothing
      box = jnp.zeros((*boxes.shape[:2], self.width), jnp.float32)
    else:
      box = self.box_encoding(self.box_coords(boxes)).astype(jnp.float32)
    x = self.object_proj(jnp.concatenate([words, self.type_embedding(types), box], axis=-1))
    x = x + jax.nn.one_hot(target, n)[..., None] * self.target_embedding
    memory = self.encoder(
      x.astype(self.dtype), (n,), key_padding_mask=padding, deterministic=not train
    )
    return memory, padding

  def decode(self, memory: Array, padding: Array, caption_inputs: Array, *, train: bool) -> Array:
    """Caption inputs `[B, T]` (`<bos>` first) -> logits `[B, T, caption_vocab]`."""
    t = caption_inputs.shape[-1]
    if caption_inputs.ndim != 2 or t > self.caption_len - 1:
      raise ValueError(
        f"LayoutCaptioner: caption inputs {tuple(caption_inputs.shape)} must be [B, T] with "
        f"T <= model.caption_len - 1 = {self.caption_len - 1}; raise model.caption_len."
      )
    x = self.input_dropout(self.caption_embedding(caption_inputs), deterministic=not train)
    y = self.decoder(
      x.astype(self.dtype),
      memory,
      query_pos=self.caption_pos[:t],
      memory_padding_mask=padding,
      deterministic=not train,
    )[-1]
    return self.head(y.astype(jnp.float32))

  def __call__(self, boxes, types, texts, num_objects, target, caption_inputs, *, train: bool):
    """Teacher-forced logits `[B, T, V]` of `caption_inputs` `[B, T]`, or `[B, R, T, V]` of
    `[B, R, T]` (R captions per screen: the memory is repeated, the screen encoded once)."""
    memory, padding = self.encode(boxes, types, texts, num_objects, target, train=train)
    if caption_inputs.ndim != 3:
      return self.decode(memory, padding, caption_inputs, train=train)
    b, r, t = caption_inputs.shape
    repeat = lambda a: jnp.repeat(a, r, axis=0)
    logits = self.decode(
      repeat(memory), repeat(padding), caption_inputs.reshape(b * r, t), train=train
    )
    return logits.reshape(b, r, t, -1)


FIELDS = tuple(
  f.name for f in dataclasses.fields(LayoutCaptioner) if f.name not in ("parent", "name")
)


def Model(
  *, caption_vocab: int, text_vocab: int, num_types: int, variant: str | None = None, **kwargs
) -> LayoutCaptioner:
  """The captioner of `config.model` in one call (the vocabularies come from the data).

  `variant` (`'widget'`, `'tiny'`) sets sizes once; explicit `kwargs` override them.
  """
  fields = variant_fields(
    "LayoutCaptioner", variant, VARIANTS, kwargs, FIELDS, ("variant", *FIELDS)
  )
  return LayoutCaptioner(
    caption_vocab=caption_vocab, text_vocab=text_vocab, num_types=num_types, **fields
  )


def _check_fields(model: LayoutCaptioner) -> None:
  sizes = ("caption_vocab", "text_vocab", "num_types", "bins", "width", "encoder_depth")
  for key in (*sizes, "decoder_depth", "num_heads", "mlp_dim", "caption_len"):
    if not positive_int(getattr(model, key)):
      raise ValueError(f"model.{key} must be a positive int, got {getattr(model, key)!r}.")
  if model.width % model.num_heads:
    raise ValueError(
      f"model.num_heads={model.num_heads} must divide model.width={model.width}; "
      "change one of them."
    )
  if model.caption_len < 2 or model.bins < 2:
    raise ValueError(
      f"model.caption_len={model.caption_len} and model.bins={model.bins} must be >= 2 "
      "(<bos> and one token; two coordinate values)."
    )
  for key in ("dropout", "attention_dropout"):
    value = getattr(model, key)
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
      raise ValueError(f"model.{key} must be a rate in [0, 1), got {value!r}.")
  check_dtype(model)
  _check_posemb(model.posemb)


def _check_posemb(posemb) -> None:
  try:
    kind = encodings.kind(posemb)
    name = encodings.parse(posemb)[0]
  except ValueError as e:
    raise ValueError(f"model.posemb: {e}") from None
  if kind == "none":  # the control
    return
  module = encodings.resolve(name)
  module = getattr(module, "func", module)
  mode = getattr(module, "coords_mode", None)
  if kind != "absolute" or getattr(module, "flatten", False) or mode == "detr":
    raise ValueError(
      f"model.posemb={posemb!r} cannot encode a box: the captioner adds an absolute "
      "encoding of (top, left, bottom, right) to each object; use one of "
      f"{sorted(set(TABLE3.values()))} (002 Table 3)."
    )


def _check_inputs(boxes, types, texts, num_objects, target) -> None:
  b, n = types.shape[:2] if types.ndim == 2 else (None, None)
  if (
    boxes.shape != (b, n, 4)
    or texts.ndim != 3
    or texts.shape[:2] != (b, n)
    or num_objects.shape != (b,)
    or target.shape != (b,)
  ):
    raise ValueError(
      "LayoutCaptioner: expected boxes [B, N, 4], types [B, N], texts [B, N, K], "
      f"num_objects [B], target [B]; got {tuple(boxes.shape)}, {tuple(types.shape)}, "
      f"{tuple(texts.shape)}, {tuple(num_objects.shape)}, {tuple(target.shape)}."
    )
