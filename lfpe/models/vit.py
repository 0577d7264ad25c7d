"""Vision Transformer with any `lfpe.encodings` position encoding, injected anywhere.

Variants by string (`Ti/16`, `S/16`, `B/16`, `L/16`, `H/14`, and the tiny `mu`, `nano` for
tests and the 1-block models of 003), class token or global average pooling, and the
position options of `lfpe.nn.transformer.Encoder` (`posemb`, `pos_injection`, `pos_hook`,
`concat_channels`, `pos_layers`). Positions are added to the patch tokens before the class
token is prepended; the class token has its own learned position (a `prefix` row).
Images of another size than `image_size` work for every encoding: the grid follows the
input and learned tables resample.

`create_model(config.model, num_classes, image_size)` builds it from an ml_collections
config after `validate_model_config` checked every field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from lfpe import encodings
from lfpe.nn.transformer import Encoder, check_posemb_kwargs, check_positions, encoding_context

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
DTYPES = ("float32", "bfloat16", "float16")


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


def grid_shape(image_hw: Sequence[int], patch: Sequence[int], field: str) -> tuple[int, int]:
  """Patches per axis `(H / ph, W / pw)`; ValueError naming `field` if they do not divide."""
  if any(s % p for s, p in zip(image_hw, patch, strict=True)):
    raise ValueError(
      f"{field}={tuple(image_hw)} is not divisible by model.patch_size="
      f"{tuple(patch)}; use an image size that is a multiple of the patch size."
    )
  return tuple(s // p for s, p in zip(image_hw, patch, strict=True))


class ViT(nn.Module):
  """ViT classifier: `__call__(images [B, H, W, C], *, train) -> logits [B, num_classes]`.

  `width`, `depth`, `num_heads`, `mlp_dim`, `patch_size` override the variant's values.
  `image_size` is the training size (it sizes learned position tables).
  """

  num_classes: int
  image_size: Any = 224
  variant: str = "B/16"
  patch_size: Any = None
  width: int | None = None
  depth: int | None = None
  num_heads: int | None = None
  mlp_dim: int | None = None
  posemb: str = "embed_1d"
  posemb_kwargs: Any = None
  pos_injection: str = "auto"
  pos_hook: str = "qk"
  concat_channels: int = 16
  pos_layers: int | None = None
  pool: str = "token"
  dropout: float = 0.0
  attention_dropout: float = 0.0
  dtype: str = "float32"

  def __post_init__(self):
    _validate({f.name: getattr(self, f.name) for f in _config_fields()}, self.image_size)
    super().__post_init__()

  @property
  def arch(self) -> dict[str, Any]:
    """The resolved width, depth, num_heads, mlp_dim and patch_size (a pair)."""
    return _arch({f.name: getattr(self, f.name) for f in _config_fields()})

  @nn.compact
  def __call__(self, images: jnp.ndarray, *, train: bool) -> jnp.ndarray:
    arch, dtype = self.arch, jnp.dtype(self.dtype)
    (ph, pw), width = arch["patch_size"], arch["width"]
    grid = grid_shape(images.shape[1:3], (ph, pw), "images [B, H, W, C] spatial size")
    b, c = images.shape[0], images.shape[-1]
    x = images.astype(dtype).reshape(b, grid[0], ph, grid[1], pw, c)
    x = x.transpose(0, 1, 3, 2, 4, 5).reshape(b, math.prod(grid), ph * pw * c)  # [B, N, P²C]
    # A Dense on flattened (ph, pw, C) patches = a stride-P conv with kernel [ph, pw, C, D].
    x = nn.Dense(
      width,
      dtype=dtype,
      name="embedding",
      kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("patch", "embed")),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed",)),
    )(x)
    num_prefix = int(self.pool == "token")
    if num_prefix:
      cls = self.param(
        "cls",
        nn.with_logical_partitioning(nn.initializers.zeros, (None, None, "embed")),
        (1, 1, width),
      )
      x = jnp.concatenate([jnp.broadcast_to(cls.astype(dtype), (b, 1, width)), x], axis=1)
    x = Encoder(
      depth=arch["depth"],
      num_heads=arch["num_heads"],
      mlp_dim=arch["mlp_dim"],
      grid_shape=self._train_grid(),
      posemb=self.posemb,
      posemb_kwargs=self.posemb_kwargs,
      pos_injection=self.pos_injection,
      pos_hook=self.pos_hook,
      concat_channels=self.concat_channels,
      pos_layers=self.pos_layers,
      num_prefix=num_prefix,
      dropout=self.dropout,
      attention_dropout=self.attention_dropout,
      dtype=dtype,
      name="Transformer",
    )(x, grid, deterministic=not train)  # [B, P + N, D]
    x = x[:, 0] if num_prefix else x.mean(axis=1)  # [B, D]
    return nn.Dense(
      self.num_classes,
      name="head",
      dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(nn.initializers.zeros, ("embed", "classes")),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros, ("classes",)),
    )(x)

  def _train_grid(self) -> tuple[int, int]:
    return grid_shape(_pair(self.image_size, "image_size"), self.arch["patch_size"], "image_size")


def _config_fields() -> list[dataclasses.Field]:
  skip = {"num_classes", "image_size", "parent", "name"}
  return [f for f in dataclasses.fields(ViT) if f.name not in skip]


def _check_types(cfg: Mapping[str, Any]) -> None:
  for key in ("width", "depth", "num_heads", "mlp_dim", "pos_layers"):
    value = cfg[key]
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
      raise ValueError(f"model.{key} must be None or a positive int, got {value!r}.")
  for key in ("dropout", "attention_dropout"):
    if not isinstance(cfg[key], (int, float)) or not 0 <= cfg[key] < 1:
      raise ValueError(f"model.{key} must be a rate in [0, 1), got {cfg[key]!r}.")
  if cfg["pool"] not in POOLS:
    raise ValueError(f"model.pool={cfg['pool']!r} is unknown; use one of {POOLS}.")
  if cfg["dtype"] not in DTYPES:
    raise ValueError(f"model.dtype={cfg['dtype']!r} is unknown; use one of {DTYPES}.")
  if cfg["posemb_kwargs"] is not None and not isinstance(cfg["posemb_kwargs"], Mapping):
    raise ValueError(f"model.posemb_kwargs must be a dict, got {cfg['posemb_kwargs']!r}.")


def _arch(cfg: Mapping[str, Any]) -> dict[str, Any]:
  """The variant's sizes with the `cfg` overrides applied; patch_size as a pair."""
  arch = decode_variant(cfg["variant"])
  arch.update({k: cfg[k] for k in arch if cfg[k] is not None})
  if arch["patch_size"] is None:
    raise ValueError(
      f"model.patch_size is needed: variant={cfg['variant']!r} names none "
      f"(use e.g. variant='{cfg['variant']}/16')."
    )
  arch["patch_size"] = _pair(arch["patch_size"], "model.patch_size")
  return arch


def _validate(cfg: Mapping[str, Any], image_size) -> None:
  """ValueError naming the `model.*` field that is wrong, before anything is traced."""
  _check_types(cfg)
  arch = _arch(cfg)
  grid_shape(_pair(image_size, "image_size"), arch["patch_size"], "image_size")
  if arch["width"] % arch["num_heads"]:
    raise ValueError(
      f"model.num_heads={arch['num_heads']} must divide model.width="
      f"{arch['width']}; change one of them."
    )
  if not isinstance(cfg["posemb"], str):
    raise ValueError(f"model.posemb must be an encoding name, got {cfg['posemb']!r}.")
  try:
    check_positions(
      cfg["posemb"],
      cfg["pos_injection"],
      cfg["pos_hook"],
      cfg["concat_channels"],
      cfg["pos_layers"],
      arch["depth"],
      "model",
    )
    check_posemb_kwargs(cfg["posemb"], cfg["posemb_kwargs"], "model")
  except ValueError as e:
    raise ValueError(f"model.posemb / position fields: {e}") from None


def _check_encoding(cfg: Mapping[str, Any], image_size) -> None:
  """Build the encoding unbound, so that its own checks (dims, options) run before tracing."""
  arch = _arch(cfg)
  grid = grid_shape(_pair(image_size, "image_size"), arch["patch_size"], "image_size")
  context = encoding_context(
    arch["width"], grid, arch["num_heads"], cfg["pos_hook"], cfg["concat_channels"]
  )
  try:
    encodings.build(cfg["posemb"], **{**context, **(cfg["posemb_kwargs"] or {})})
  except ValueError as e:
    raise ValueError(f"model.posemb={cfg['posemb']!r} / model.posemb_kwargs: {e}") from None


def _as_dict(model_config) -> dict[str, Any]:
  cfg = model_config.to_dict() if hasattr(model_config, "to_dict") else dict(model_config)
  cfg.pop("name", None)  # the model family, read by the trainer
  known = {f.name for f in _config_fields()}
  unknown = sorted(set(cfg) - known)
  if unknown:
    raise ValueError(f"model.{unknown[0]} is not a ViT field; valid fields: {sorted(known)}.")
  defaults = {f.name: f.default for f in _config_fields()}
  return {**defaults, **cfg}


def validate_model_config(model_config, image_size) -> None:
  """Check `config.model` (ConfigDict or dict) for a ViT at `image_size`; ValueError if wrong.

  Beyond `ViT`'s own field checks, this builds the encoding (unbound) so that its checks
  (e.g. RoPE's head_dim multiple of 4) fail here rather than when the model is traced.
  """
  cfg = _as_dict(model_config)
  _validate(cfg, image_size)
  _check_encoding(cfg, image_size)


def create_model(model_config, num_classes: int, image_size) -> ViT:
  """The `ViT` described by `config.model` for `num_classes` classes at `image_size`."""
  if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
    raise ValueError(f"num_classes must be a positive int, got {num_classes!r}.")
  validate_model_config(model_config, image_size)
  cfg = _as_dict(model_config)
  if cfg["posemb_kwargs"] is not None:
    cfg["posemb_kwargs"] = dict(cfg["posemb_kwargs"])
  image_size = image_size if isinstance(image_size, int) else tuple(image_size)
  return ViT(num_classes=num_classes, image_size=image_size, **cfg)
