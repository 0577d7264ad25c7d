"""Vision Transformer with any `lfpe.encodings` position encoding, injected anywhere.

`ViT` takes explicit sizes; `Model(num_classes, variant="B/16", **kwargs)` decodes a
variant string (`Ti/16`, `S/16`, `B/16`, `L/16`, `H/14`, and the tiny `mu`, `nano` for tests
and the 1-block models of 003) into them once, as big_vision's `Model(num_classes,
**config.model)`: a config becomes a model in one call. Class token or global average
pooling, and the position options of `lfpe.nn.transformer.Encoder` (`posemb`, an encoding
spec such as `"fourier(gamma=0.25)"`, `pos_injection`, `pos_hook`, `concat_channels`,
`pos_layers`). Positions are added to the patch tokens before the class token is
prepended; the class token has its own learned position (a `prefix` row). Images of
another size than `image_size` work for every encoding: the grid follows the input and
learned tables resample.

Every field is checked once, when the model is defined (`lfpe.checked`), with a message
that names the `model.*` field and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe import resolution
from lfpe.checked import Checked
from lfpe.models.fields import check_dtype
from lfpe.nn.patches import PatchEmbedding
from lfpe.nn.transformer import ACTIVATIONS, Encoder

# name: (width, depth, num_heads, mlp_dim), as big_vision's ViT (mu, nano: tests, 003).
VARIANTS = {
  "mu": (32, 1, 2, 128),
  "nano": (32, 2, 4, 64),
  "Ti": (192, 12, 3, 768),
  "S": (384, 12, 6, 1536),
  "M": (512, 12, 8, 2048),
  "B": (768, 12, 12, 3072),
  "L": (1024, 24, 16, 4096),
  "H": (1280, 32, 16, 5120),
}
POOLS = ("token", "gap")


def decode_variant(variant: str) -> dict[str, int | None]:
  """`'B/16'` -> dict(width=768, depth=12, num_heads=12, mlp_dim=3072, patch_size=16)."""
  if not isinstance(variant, str):
    raise ValueError(f"model.variant must be a string like 'B/16', got {variant!r}.")
  name, _, patch = variant.partition("/")
  if name not in VARIANTS or (patch and not patch.isdigit()):
    raise ValueError(
      f"model.variant={variant!r} is unknown; use NAME or NAME/PATCH with NAME "
      f"in {tuple(VARIANTS)}, e.g. 'B/16'."
    )
  width, depth, heads, mlp = VARIANTS[name]
  return dict(
    width=width, depth=depth, num_heads=heads, mlp_dim=mlp, patch_size=int(patch) if patch else None
  )


def _pair(value, field: str) -> tuple[int, int]:
  value = (value, value) if isinstance(value, int) else tuple(value)
  if len(value) != 2 or not all(
    isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
  ):
    raise ValueError(f"{field} must be a positive int or a pair of them, got {value!r}.")
  return value


def grid_shape(
  image_hw: Sequence[int], patch: Sequence[int], field: str, patch_field: str = "model.patch_size"
) -> tuple[int, int]:
  """Patches per axis `(H / ph, W / pw)`; ValueError naming `field` if they do not divide."""
  if any(s % p for s, p in zip(image_hw, patch, strict=True)):
    raise ValueError(
      f"{field}={tuple(image_hw)} is not divisible by {patch_field}="
      f"{tuple(patch)}; use an image size that is a multiple of the patch size."
    )
  return tuple(s // p for s, p in zip(image_hw, patch, strict=True))


def config_patch(model: Any) -> tuple[int, int] | None:
  """A model config's (height, width) patch: `patch_size` (an int or a pair), else the one its
  `variant` names (e.g. "B/16"); None where neither gives one (`Model` then refuses)."""
  patch = model.get("patch_size")
  if patch is None and isinstance(model.get("variant"), str) and "/" in model["variant"]:
    patch = model["variant"].rpartition("/")[2]
    patch = int(patch) if patch.isdigit() else None
  if isinstance(patch, int):
    return (patch, patch)
  is_pair = isinstance(patch, (tuple, list)) and len(patch) == 2
  return tuple(patch) if is_pair and all(isinstance(p, int) for p in patch) else None


def kernel_patch(model: Any) -> tuple[int, int] | None:
  """The (ph, pw) a ViT's patch kernel is laid out for (its `trained_patch_size`, else its
  patch from `patch_size` or `variant`; a module or its config), None for a model without."""
  if not hasattr(model, "get"):  # a module: its fields
    model = {k: getattr(model, k, None) for k in ("patch_size", "trained_patch_size")}
  trained = model.get("trained_patch_size")
  return config_patch(model if trained is None else {"patch_size": trained})


class ViT(Checked, nn.Module):
  """ViT classifier: `__call__(images [B, H, W, C], *, train) -> logits [B, num_classes]`.

  Sizes default to B/16. `image_size` is the training size (it sizes learned position
  tables). `trained_patch_size` (None: `patch_size`) is the patch size the parameters were
  trained at, when images are cut at another `patch_size`: the patch kernel is applied
  PI-resized on the fly (FlexiViT; `lfpe.nn.patches`) and the position tables, sized by
  `image_size / trained_patch_size`, meet the new grid by their resampling policy.
  `posemb_grid` (None: that grid) lays learned tables out at a grid of their own, resampled to
  every grid the model sees: FlexiViT's 7x7 table under 240 px images and a 32x32 kernel
  (`posemb_grid=7`), which 240 / 32 cannot give. The
  evaluations of `config.evals` set it for a changed `patch_size`. `head_init_std` draws
  the classifier from N(0, std²) instead of zeros (big_vision's zero head); the position
  studies use it. `coord_augment` ({shift, jitter, rescale, convention},
  off by default) perturbs the coordinates of coordinate-based encodings while training
  (DINOv3's box jittering, `lfpe.encodings.coords.augment`: `convention='extent'`, the default,
  is lfpe's (n − 1)/n shift, `'dinov3'` DINOv3's own; `coords.DINOV3` is its released preset);
  evaluation reads the plain grid. `activation` is the MLPs' GELU: 'gelu', flax's tanh form
  (big_vision's), or 'gelu_exact', the erf form of timm's and PyTorch's `nn.GELU`.
  """

  num_classes: int
  image_size: Any = 224
  patch_size: Any = 16
  trained_patch_size: Any = None
  posemb_grid: Any = None
  width: int = 768
  depth: int = 12
  num_heads: int = 12
  mlp_dim: int = 3072
  posemb: Any = "embed_1d"
  pos_injection: str = "auto"
  pos_hook: str = "qk"
  concat_channels: int = 16
  pos_layers: int | None = None
  pool: str = "token"
  dropout: float = 0.0
  attention_dropout: float = 0.0
  head_init_std: float = 0.0
  dtype: str = "float32"
  coord_augment: Any = None
  activation: str = "gelu"

  def check(self) -> None:
    """ValueError naming the `model.*` field that is wrong, before anything is traced."""
    _check_types(self)
    _pair(self.patch_size, "model.patch_size")
    self._kernel_patch()
    self._nominal_grid()
    if self.width % self.num_heads:
      raise ValueError(
        f"model.num_heads={self.num_heads} must divide model.width={self.width}; "
        "change one of them."
      )
    try:
      self._encoder(parent=None)  # the Encoder checks its position options and encoding
    except ValueError as e:
      raise ValueError(f"model.posemb / position fields: {e}") from None

  def _kernel_patch(self) -> tuple[tuple[int, int], str]:
    """The patch size the parameters are laid out for, and its field: `trained_patch_size`,
    else `patch_size`."""
    if self.trained_patch_size is None:
      return _pair(self.patch_size, "model.patch_size"), "model.patch_size"
    return _pair(self.trained_patch_size, "model.trained_patch_size"), "model.trained_patch_size"

  def _nominal_grid(self) -> tuple[int, int]:
    """What learned tables are sized by: `posemb_grid`, else the grid of `image_size` at the
    kernel's patch size."""
    if self.posemb_grid is not None:
      return _pair(self.posemb_grid, "model.posemb_grid")
    patch, field = self._kernel_patch()
    return grid_shape(_pair(self.image_size, "image_size"), patch, "image_size", field)

  def _encoder(self, **kwargs) -> Encoder:
    return Encoder(
      depth=self.depth,
      width=self.width,
      num_heads=self.num_heads,
      mlp_dim=self.mlp_dim,
      grid_shape=self._nominal_grid(),
      posemb=self.posemb,
      pos_injection=self.pos_injection,
      pos_hook=self.pos_hook,
      concat_channels=self.concat_channels,
      pos_layers=self.pos_layers,
      num_prefix=int(self.pool == "token"),
      dropout=self.dropout,
      attention_dropout=self.attention_dropout,
      dtype=jnp.dtype(self.dtype),
      coord_augment=dict(self.coord_augment) if self.coord_augment else None,
      activation=self.activation,
      **kwargs,
    )

  @nn.compact
  def __call__(self, images: jnp.ndarray | Mapping[str, Any], *, train: bool) -> jnp.ndarray:
    """`images [B, H, W, C]`, or a packed batch of per-example sizes (`lfpe.resolution.pack`:
    `patches`, `index`, `shape`, `valid`; NaFlex) -> logits `[B, num_classes]`."""
    dtype, width = jnp.dtype(self.dtype), self.width
    patch = _pair(self.patch_size, "model.patch_size")
    packed, valid = None, None
    if isinstance(images, Mapping):
      x, packed = images["patches"], (images["index"], images["shape"])
      valid = jnp.asarray(images["valid"]).astype(bool)  # a 0/1 mask from a user's pipeline too
      grid = None
    else:
      if images.ndim != 4:
        raise ValueError(
          f"ViT takes images [B, H, W, C] (channels last, a batch axis first), got shape "
          f"{tuple(images.shape)}: add a batch axis (images[None]) for one image."
        )
      grid = grid_shape(images.shape[1:3], patch, "images [B, H, W, C] spatial size")
      x = resolution.patchify(images, patch)  # [B, N, P²C]
    x, b = x.astype(dtype), x.shape[0]
    # A Dense on flattened (ph, pw, C) patches = a stride-P conv with kernel [ph, pw, C, D].
    x = PatchEmbedding(
      width,
      patch_size=self._kernel_patch()[0],
      input_patch_size=patch,
      dtype=dtype,
      name="embedding",
      kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("patch", "embed")),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
    )(x)
    if self.pool == "token":
      cls = self.param(
        "cls",
        nn.with_logical_partitioning(nn.initializers.zeros, (None, None, "embed")),
        (1, 1, width),
      )
      x = jnp.concatenate([jnp.broadcast_to(cls.astype(dtype), (b, 1, width)), x], axis=1)
    prefix = int(self.pool == "token")
    padding = None if valid is None else jnp.pad(~valid, ((0, 0), (prefix, 0)))  # [B, P + L]
    encoder = self._encoder(name="Transformer")
    x = encoder(x, grid, deterministic=not train, key_padding_mask=padding, packed=packed)
    if self.pool == "token":
      x = x[:, 0]  # [B, D]
    elif valid is None:
      x = x.mean(axis=1)
    else:  # the mean over each example's own tokens
      weights = valid[..., None].astype(x.dtype)
      x = (x * weights).sum(axis=1) / weights.sum(axis=1)
    head_init = nn.initializers.normal(self.head_init_std) if self.head_init_std else None
    return nn.Dense(
      self.num_classes,
      name="head",
      dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(
        head_init or nn.initializers.zeros, ("embed", "classes")
      ),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("classes",)),
    )(x)


FIELDS = tuple(f.name for f in dataclasses.fields(ViT) if f.name not in ("parent", "name"))


def Model(num_classes: int, *, variant: str | None = None, **kwargs: Any) -> ViT:
  """The ViT of `config.model` in one call: `Model(num_classes, **config.model)`.

  `variant` (e.g. `"B/16"`) is decoded once into sizes; explicit `kwargs` override them.
  A key that is not a ViT field fails with a message naming it.
  """
  unknown = sorted(set(kwargs) - set(FIELDS))
  if unknown:
    hint = REMOVED.get(unknown[0], f"valid fields: variant, {', '.join(FIELDS[1:])}")
    raise ValueError(f"model.{unknown[0]} is not a ViT field; {hint}.")
  sizes = {} if variant is None else decode_variant(variant)
  if sizes.get("patch_size", 0) is None:
    if kwargs.get("patch_size") is None:
      raise ValueError(
        f"model.patch_size is needed: variant={variant!r} names none "
        f"(use e.g. variant='{variant}/16')."
      )
    del sizes["patch_size"]
  return ViT(num_classes=num_classes, **{**sizes, **kwargs})


REMOVED = {
  "posemb_kwargs": (
    "the encoding and its options are one value now: model.posemb='fourier(gamma=0.25)'"
  ),
  "name": "the model family is config.model_name",
}


def _check_types(model: ViT) -> None:
  classes = model.num_classes
  if not isinstance(classes, int) or isinstance(classes, bool) or classes < 1:
    raise ValueError(f"num_classes must be a positive int, got {model.num_classes!r}.")
  for key in ("width", "depth", "num_heads", "mlp_dim"):
    value = getattr(model, key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise ValueError(f"model.{key} must be a positive int, got {value!r}.")
  pos_layers = model.pos_layers
  if pos_layers is not None and (not isinstance(pos_layers, int) or pos_layers < 1):
    raise ValueError(f"model.pos_layers must be None or a positive int, got {pos_layers!r}.")
  for key in ("dropout", "attention_dropout"):
    value = getattr(model, key)
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
      raise ValueError(f"model.{key} must be a rate in [0, 1), got {value!r}.")
  if not isinstance(model.head_init_std, (int, float)) or model.head_init_std < 0:
    raise ValueError(f"model.head_init_std must be >= 0 (0: zeros), got {model.head_init_std!r}.")
  if model.pool not in POOLS:
    raise ValueError(f"model.pool={model.pool!r} is unknown; use one of {POOLS}.")
  if model.activation not in ACTIVATIONS:
    raise ValueError(
      f"model.activation={model.activation!r} is unknown; use one of {tuple(ACTIVATIONS)}."
    )
  check_dtype(model)
