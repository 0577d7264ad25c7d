"""DETR-lite: DETR (Carion et al.) with any absolute `lfpe.encodings` position encoding.

`DETR(images [B, H, W, 3], mask [B, H, W], *, train) -> {"logits": [L, B, Q, K + 1],
"boxes": [L, B, Q, 4]}`, one entry per decoder layer (DETR's auxiliary losses; the last is
the prediction). `mask` is True on padding (DETR's convention); logit `K` (the last) is
"no object"; boxes are (cx, cy, w, h) in (0, 1) relative to the unpadded image.

The parts are DETR's: a CNN backbone (`lfpe.models.backbones`: `small`, or `resnet50` with
frozen batch norms), the padding mask downsampled to the feature map by nearest
interpolation, a 1x1 projection to `width`, a transformer encoder and decoder
(`lfpe.nn`, post-LN as DETR or pre-LN: `norm`), `num_queries` learned query positions
with zero decoder inputs, and a class head and a 3-layer box MLP shared by all decoder
layers. Positions enter as in DETR (001 Sec. 4.2): one table of the feature map (`posemb`)
is added to the queries and keys of every encoder self-attention and to the keys of every
cross-attention, the query positions to the queries and keys of decoder self-attention and
the queries of cross-attention; never to values.

`reference_points=True` is a deviation from DETR, off by default (Deformable DETR's
reference points, Zhu et al. 2021, without its deformable attention): each query owns a
learned centre `r` in (0, 1)², drawn uniformly from [0.1, 0.9]² at init, and the box head
predicts the offset from it in logit space, `boxes = sigmoid(mlp(x) + logit([r, ½, ½]))`.
Queries then start spread over the image instead of all predicting the mean box, which
shortens DETR's first plateau on small data (experiments/detection/README.md); positions of
the feature map enter exactly as above, so the encodings are compared as in DETR.

`query_groups=G > 1` is a second deviation, for training speed, off by default (Group
DETR, Chen et al. 2023): in training the decoder runs G groups of `num_queries` queries,
each with its own query positions (and reference points), self-attention only within a
group (`group_attention_bias`), so `lfpe.tasks.detection` matches every group to the
targets one-to-one on its own: G times as many queries learn from each object. Evaluation
and inference run group 0 alone, so the detector that is scored is DETR's size.

Smaller deviations from DETR's code are defaults shared with lfpe's ViT, kept so that every
record's runs stay comparable, and each has DETR's setting as an option (all four set in
configs/detr_coco.py): the feed-forward layers use GELU (`activation='relu'`: DETR's);
dropout also applies to the encoder's input (`input_dropout=False`: none, DETR's); images
are scaled to [0, 1] (`data.preprocess` with `normalize(...)` after `value_range(0, 1)`:
ImageNet's mean and std before the zero padding, DETR's); with `resnet50` every stage trains
(`optim.freeze` of the stem and `layer1`: DETR's).

Feature-map coordinates come from the padding mask (`coords.detr`, `feature_positions`):
`normalize_positions=True` divides them by the valid size, (0, 1] per axis (002 Sec. 4.2,
Table 1; (0, 2π] for `detr_sine`, as DETR), `False` keeps the 1-based counts (DETR's
`normalize=False`, 002 Table 2: larger images reach positions never seen in training).
Learned tables (`embed_2d`, `embed_1d`) always read 0-based indices (002: "all the methods
except Embed-2D leverage position normalization"); their size is `max_grid`, the feature
map of the largest padded image, and rows beyond the training images keep their init.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from lfpe import encodings
from lfpe.checked import Checked
from lfpe.encodings import coords as coords_lib
from lfpe.encodings.base import uniform_init
from lfpe.models import fields
from lfpe.models.backbones import BACKBONES, feature_grid
from lfpe.models.fields import DTYPES, positive_int, variant_fields
from lfpe.nn.decoder import Decoder
from lfpe.nn.positions import PositionSource, encoding_context
from lfpe.nn.transformer import ACTIVATIONS, NORMS, Encoder

Array = jnp.ndarray
TABLES = (encodings.Embed1D, encodings.EmbedND)  # looked up by integer index
REFERENCE_EPS = 1e-5  # learned reference centres are read within [eps, 1 - eps]
# name: the fields it sets (R50: DETR's defaults, 41M parameters; tiny: CPU tests).
VARIANTS = {
  "R50": dict(
    backbone="resnet50",
    width=256,
    encoder_depth=6,
    decoder_depth=6,
    num_heads=8,
    mlp_dim=2048,
    num_queries=100,
    max_grid=(42, 42),
  ),
  "tiny": dict(
    backbone="small",
    width=64,
    encoder_depth=2,
    decoder_depth=2,
    num_heads=4,
    mlp_dim=256,
    num_queries=20,
    max_grid=(16, 16),
  ),
}


def downsample_mask(mask: Array, shape: tuple[int, int]) -> Array:
  """DETR's nearest interpolation of a mask `[B, H, W]` to `[B, h, w]`: cell i reads i·H/h."""
  rows, cols = (
    np.minimum(np.floor(np.arange(n) * (size / n)).astype(np.int32), size - 1)
    for n, size in zip(shape, mask.shape[1:], strict=True)
  )
  return mask[:, rows][:, :, cols]


def group_attention_bias(groups: int, size: int) -> Array:
  """Group DETR's self-attention mask as a logit bias `[G·size, G·size]`: 0 within a group of
  `size` consecutive queries, -1e9 across groups (no query sees another group)."""
  group = np.repeat(np.arange(groups), size)
  return jnp.asarray(np.where(group[:, None] == group[None, :], 0.0, -1e9), jnp.float32)


def feature_positions(mask: Array, encoding: Any, normalize: bool) -> Array:
  """The coordinates `encoding` reads on a feature map with padding `mask` `[B, h, w]`.

  2-D encodings get (y, x) from `coords.detr` (normalised with scale 2π for `DetrSine`,
  else 1); 1-D ones (`flatten`) the raster index of the valid region; learned tables
  0-based indices. Padded cells get 0 (they are never attended to). Returns `[B, h·w, M]`
  (`[B, h·w, 1, M]` for encodings that read a group axis, e.g. `fourier`).
  """
  table = isinstance(encoding, TABLES)
  scale = 2 * math.pi if isinstance(encoding, encodings.DetrSine) else 1.0
  pos = coords_lib.detr(mask, normalize=normalize and not table, scale=scale)  # [B, h, w, 2]
  if encoding.flatten:
    pos = _raster_positions(coords_lib.detr(mask, normalize=False), normalize and not table)
  pos = jnp.where(mask[..., None], 0.0, pos - 1 if table else pos)
  b, h, w, m = pos.shape
  groups = encoding.grid_coords((1, 1)).ndim - 2  # 1 for `[..., G, M]` encodings
  return pos.reshape(b, h * w, *(1,) * groups, m)


def _raster_positions(counts: Array, normalize: bool) -> Array:
  """1-based raster index `[B, h, w, 1]` of the valid region from 1-based (y, x) counts
  (divided by the number of valid cells when `normalize`)."""
  size = counts.max(axis=(1, 2), keepdims=True)  # [B, 1, 1, 2]: valid (rows, cols)
  index = (counts[..., :1] - 1) * size[..., 1:] + counts[..., 1:]
  return index / jnp.maximum(size[..., :1] * size[..., 1:], 1.0) if normalize else index


class DETR(Checked, nn.Module):
  """DETR-lite (module docstring); defaults are DETR-R50's (`VARIANTS['R50']`).

  Attributes:
    backbone: `small` or `resnet50` (`lfpe.models.backbones.BACKBONES`).
    width, encoder_depth, decoder_depth, num_heads, mlp_dim: the transformer's sizes.
    num_queries: object queries Q (learned positions, zero inputs).
    norm: `post` (DETR) or `pre` (ViT) LayerNorm blocks.
    posemb: an absolute `lfpe.encodings` spec for the feature-map positions.
    normalize_positions: (0, 1] coordinates (002 Table 1) or raw counts (Table 2).
    reference_points: boxes relative to learned per-query centres (a deviation; docstring).
    query_groups: Group DETR's G query groups in training, group 0 at eval (a deviation).
    max_grid: (rows, cols) of the largest feature map: the size of learned tables.
    dropout, attention_dropout: DETR's 0.1 on residual branches and attention weights.
    activation: the feed-forward nonlinearity (`lfpe.nn.transformer.ACTIVATIONS`); DETR's is
      'relu', the default 'gelu' is lfpe's ViT's (module docstring).
    input_dropout: dropout on the encoder's input too (lfpe's ViT); False is DETR's.
    dtype: compute dtype of backbone and transformer; the heads compute in float32.
  """

  num_classes: int
  backbone: str = "resnet50"
  width: int = 256
  encoder_depth: int = 6
  decoder_depth: int = 6
  num_heads: int = 8
  mlp_dim: int = 2048
  num_queries: int = 100
  norm: str = "post"
  posemb: Any = "detr_sine"
  normalize_positions: bool = True
  reference_points: bool = False
  query_groups: int = 1
  max_grid: Any = (42, 42)
  dropout: float = 0.1
  attention_dropout: float = 0.1
  activation: str = "gelu"
  input_dropout: bool = True
  dtype: str = "float32"

  @property
  def no_object_class(self) -> int:
    """Index of the "no object" logit: the last, `num_classes`."""
    return self.num_classes

  def check(self) -> None:
    """ValueError naming the `model.*` field that is wrong, before anything is traced."""
    _check_fields(self)
    try:
      self._positions(parent=None)  # the encoding's own checks
    except ValueError as e:
      raise ValueError(f"model.posemb={self.posemb!r}: {e}") from None
    self._encoder(parent=None)
    self._decoder(parent=None)

  def _encoding(self):
    context = encoding_context(self.width, tuple(self.max_grid), self.num_heads, "qk")
    return encodings.build(self.posemb, **context, parent=None)

  def _positions(self, **kwargs) -> PositionSource:
    return PositionSource(
      posemb=self.posemb,
      grid_shape=tuple(self.max_grid),
      dim=self.width,
      num_heads=self.num_heads,
      hook="qk",
      **kwargs,
    )

  def _encoder(self, **kwargs) -> Encoder:
    return fields.encoder(
      self,
      grid_shape=tuple(self.max_grid),
      norm=self.norm,
      activation=self.activation,
      input_dropout=self.input_dropout,
      **kwargs,
    )

  def _decoder(self, **kwargs) -> Decoder:
    return fields.decoder(self, norm=self.norm, activation=self.activation, **kwargs)

  @nn.compact
  def __call__(self, images: Array, mask: Array, *, train: bool) -> dict[str, Array]:
    """`images` `[B, H, W, C]`, `mask` `[B, H, W]` (True = padding) -> `{"logits":
    [L, B, Q, K + 1], "boxes": [L, B, Q, 4]}` (cx, cy, w, h in (0, 1)), L = decoder_depth;
    in training Q = query_groups · num_queries, group g in queries g·num_queries onwards."""
    _check_inputs(images, mask)
    dtype = jnp.dtype(self.dtype)
    features = BACKBONES[self.backbone](dtype=dtype, name="backbone")(images.astype(dtype), mask)
    x = nn.Conv(
      features=self.width,
      kernel_size=(1, 1),
      kernel_init=fields.lecun_kernel((None, None, None, "embed")),
      dtype=dtype,
      name="input_proj",
    )(features)
    b, h, w, d = x.shape
    pad = downsample_mask(mask, (h, w))  # [B, h, w]
    hooks = {}  # posemb='none', the no-position control: neither encoder nor decoder adds any
    if encodings.kind(self.posemb) != "none":
      encoding = self._encoding()
      self._check_table_size(encoding, (h, w), images.shape[1:3])
      coords = feature_positions(pad, encoding, self.normalize_positions)
      hooks = self._positions(name="pos")((h, w), coords)  # {'pos_q', 'pos_k'}: [B, h·w, D]
    pad = pad.reshape(b, h * w)
    memory = self._encoder(name="encoder")(
      x.reshape(b, h * w, d), (h, w), hooks=hooks, key_padding_mask=pad, deterministic=not train
    )  # [B, h·w, D]
    groups = self.query_groups if train else 1
    num = groups * self.num_queries  # the queries that run: group 0 alone at eval
    query_pos = self.param(
      "query_pos",
      nn.with_logical_partitioning(nn.initializers.normal(1.0), (None, "embed")),
      (self.query_groups * self.num_queries, d),
    )[:num]  # DETR's nn.Embedding: N(0, 1)
    out = self._decoder(name="decoder")(
      jnp.zeros((b, num, d), dtype),
      memory,
      query_pos=query_pos,
      memory_pos=hooks.get("pos_k"),
      memory_padding_mask=pad,
      self_attention_bias=group_attention_bias(groups, self.num_queries) if groups > 1 else None,
      deterministic=not train,
    )  # [L, B, num, D]
    return self._heads(out.astype(jnp.float32))

  def _heads(self, x: Array) -> dict[str, Array]:
    """Class logits `[..., K + 1]` and sigmoid boxes `[..., 4]` of decoder outputs `[L, B, Q, D]`
    (boxes relative to each query's learned centre with `reference_points`)."""
    dense = lambda features, axes, name: nn.Dense(
      features=features, kernel_init=fields.lecun_kernel(axes), name=name
    )
    logits = dense(self.num_classes + 1, ("embed", "classes"), "class_head")(x)
    for i in range(2):
      x = nn.relu(dense(self.width, ("embed", None), f"box_head_{i}")(x))
    boxes = dense(4, ("embed", None), "box_head_2")(x)
    if self.reference_points:
      shape = (self.query_groups * self.num_queries, 2)
      centre = self.param("reference_points", uniform_init(0.1, 0.9), shape)[: x.shape[-2]]
      # inside (0, 1) before the logit, as Deformable DETR's clamped inverse_sigmoid: a centre
      # that an update moves past 0 or 1 would otherwise make every box NaN
      centre = jnp.clip(centre, REFERENCE_EPS, 1.0 - REFERENCE_EPS)
      centre = jnp.log(centre) - jnp.log1p(-centre)  # logit
      boxes = boxes + jnp.concatenate([centre, jnp.zeros_like(centre)], axis=-1)
    return {"logits": logits, "boxes": nn.sigmoid(boxes)}

  def _check_table_size(self, encoding, grid: tuple[int, int], image_hw) -> None:
    if isinstance(encoding, TABLES) and any(
      g > m for g, m in zip(grid, self.max_grid, strict=True)
    ):
      raise ValueError(
        f"DETR: images {tuple(image_hw)} give a feature map {grid} larger than "
        f"model.max_grid={tuple(self.max_grid)}, the size of the {self.posemb!r} tables; "
        "set model.max_grid to the feature map of the largest padded image."
      )


FIELDS = tuple(f.name for f in dataclasses.fields(DETR) if f.name not in ("parent", "name"))


def Model(
  num_classes: int, *, variant: str | None = None, image_size: Any = None, **kwargs: Any
) -> DETR:
  """The DETR of `config.model` in one call: `Model(num_classes, **config.model)`.

  `variant` (`'R50'`, `'tiny'`) sets sizes once; explicit `kwargs` override them.
  `image_size` (the largest padded image, what a task knows, as for ViT) sets `max_grid` to
  its feature map unless `max_grid` is given. A key that is not a DETR field fails with a
  message naming it.
  """
  shown = ("variant", "image_size", *FIELDS[1:])
  fields = variant_fields("DETR", variant, VARIANTS, kwargs, FIELDS, shown)
  if image_size is not None and "max_grid" not in kwargs:
    backbone = fields.get("backbone", DETR.backbone)
    if backbone in BACKBONES:  # else check() names model.backbone
      fields["max_grid"] = feature_grid(backbone, _image_hw(image_size))
  return DETR(num_classes=num_classes, **fields)


def _image_hw(value) -> tuple[int, int]:
  hw = (value, value) if isinstance(value, int) else tuple(value)
  if len(hw) != 2 or not all(map(positive_int, hw)):
    raise ValueError(f"image_size must be a positive int or a pair of them, got {value!r}.")
  return hw


def _check_fields(model: DETR) -> None:
  if not positive_int(model.num_classes):
    raise ValueError(f"num_classes must be a positive int, got {model.num_classes!r}.")
  sizes = ("width", "encoder_depth", "decoder_depth", "num_heads", "mlp_dim")
  for key in (*sizes, "num_queries", "query_groups"):
    if not positive_int(getattr(model, key)):
      raise ValueError(f"model.{key} must be a positive int, got {getattr(model, key)!r}.")
  if model.width % model.num_heads:
    raise ValueError(
      f"model.num_heads={model.num_heads} must divide model.width={model.width}; "
      "change one of them."
    )
  choices = {
    "backbone": tuple(BACKBONES),
    "norm": NORMS,
    "activation": tuple(ACTIVATIONS),
    "dtype": DTYPES,
  }
  for key, valid in choices.items():
    if getattr(model, key) not in valid:
      raise ValueError(f"model.{key}={getattr(model, key)!r} is unknown; use one of {valid}.")
  grid = model.max_grid
  if isinstance(grid, str) or len(tuple(grid)) != 2 or not all(map(positive_int, grid)):
    raise ValueError(f"model.max_grid must be a (rows, cols) pair of positive ints, got {grid!r}.")
  for key in ("normalize_positions", "reference_points", "input_dropout"):
    if not isinstance(getattr(model, key), bool):
      raise ValueError(f"model.{key} must be True or False, got {getattr(model, key)!r}.")
  for key in ("dropout", "attention_dropout"):
    value = getattr(model, key)
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
      raise ValueError(f"model.{key} must be a rate in [0, 1), got {value!r}.")
  _check_posemb(model.posemb)


def _check_posemb(posemb) -> None:
  try:
    name, options = encodings.parse(posemb)
    kind = encodings.kind(posemb)
  except ValueError as e:
    raise ValueError(f"model.posemb: {e}") from None
  if kind not in ("absolute", "none"):
    absolute = [n for n in encodings.NAMES if encodings.kind(n) == "absolute"]
    raise ValueError(
      f"model.posemb={posemb!r} is a {kind!r} encoding; DETR adds positions to queries "
      f"and keys, so use an absolute one ({', '.join(absolute)}) or 'none'."
    )
  if "normalize" in options:
    raise ValueError(
      f"model.posemb={posemb!r} sets 'normalize'; set model.normalize_positions instead "
      f"(it applies to every encoding)."
    )


def _check_inputs(images: Array, mask: Array) -> None:
  if images.ndim != 4 or mask.shape != images.shape[:3] or mask.dtype != jnp.bool_:
    raise ValueError(
      f"DETR: expected images [B, H, W, C] and a boolean mask [B, H, W] (True = padding), "
      f"got images {tuple(images.shape)} and mask {mask.dtype}{tuple(mask.shape)}."
    )
