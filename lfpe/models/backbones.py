"""CNN backbones of DETR-lite: `__call__(images [B, H, W, C], mask [B, H, W]) -> [B, h, w, C']`.

* `small`: three 3x3 stride-2 convolutions (32, 64, 128 channels), each followed by a
  per-pixel LayerNorm and ReLU; output stride 8, for CPU-scale runs. Padded cells
  (`mask`, True = padding) are zeroed at the input and after every layer, and the
  convolutions pad like PyTorch's (`kernel // 2` on each side), so an image's features do
  not depend on how much padding surrounds it.
* `resnet50`: torchvision's ResNet-50 (v1.5: stride on the 3x3 convolution of a
  bottleneck), output stride 32, 2048 channels, without the classifier, every batch norm a
  `FrozenBatchNorm` as in DETR. Like DETR's, it reads the padding (the mask is unused).
  DETR starts it from ImageNet weights: load them into `params` (convolutions) and
  `constants` (batch norms); at random init its activations grow with depth.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from lfpe.models import fields

Array = jnp.ndarray
SMALL_FEATURES = (32, 64, 128)
RESNET50_STAGES = ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2))  # blocks, width, stride
# Logical axes of a convolution kernel `[kh, kw, in, out]`: its output channels are
# 'channels', which FSDP splits over `data` (lfpe.train.sharding).
CONV_AXES = (None, None, None, "channels")
# torchvision's init: He normal over the output fan.
_conv_init = nn.with_logical_partitioning(
  nn.initializers.variance_scaling(2.0, "fan_out", "normal"), CONV_AXES
)


class FrozenBatchNorm(nn.Module):
  """Batch norm with fixed statistics and affine map (DETR's `FrozenBatchNorm2d`).

  `(x - mean) / sqrt(var + eps) * scale + bias` over the channels; all four `[C]` vectors
  live in the `constants` collection, so nothing trains or updates them (init: identity).
  """

  eps: float = 1e-5
  dtype: Any = None

  @nn.compact
  def __call__(self, x: Array) -> Array:
    c = x.shape[-1]
    const = lambda name, fill: self.variable("constants", name, jnp.full, (c,), fill).value
    mult = const("scale", 1.0) * jax.lax.rsqrt(const("var", 1.0) + self.eps)  # [C]
    shift = const("bias", 0.0) - const("mean", 0.0) * mult
    return (x * mult + shift).astype(self.dtype or x.dtype)


class SmallBackbone(nn.Module):
  """The `small` backbone of the module docstring: `[B, H, W, C]` -> `[B, H/8, W/8, 128]`."""

  features: tuple[int, ...] = SMALL_FEATURES
  dtype: Any = None
  stride: ClassVar[int] = 2 ** len(SMALL_FEATURES)  # with the default `features`

  @nn.compact
  def __call__(self, images: Array, mask: Array) -> Array:
    keep = ~mask  # [B, H, W]
    x = images * keep[..., None].astype(images.dtype)
    for i, features in enumerate(self.features):
      x = nn.Conv(
        features=features,
        kernel_size=(3, 3),
        strides=2,
        padding=((1, 1), (1, 1)),
        kernel_init=fields.lecun_kernel(CONV_AXES),
        dtype=self.dtype,
        name=f"conv_{i}",
      )(x)
      x = nn.relu(nn.LayerNorm(dtype=self.dtype, name=f"norm_{i}")(x))
      keep = keep[:, ::2, ::2]  # output cell i is centred on input cell 2i
      x = x * keep[..., None].astype(x.dtype)
    return x


class Bottleneck(nn.Module):
  """ResNet v1.5 bottleneck: 1x1, 3x3 (stride), 1x1 to `4 * width`, projection shortcut."""

  width: int
  strides: int = 1
  dtype: Any = None

  @nn.compact
  def __call__(self, x: Array) -> Array:
    conv = functools.partial(nn.Conv, use_bias=False, kernel_init=_conv_init, dtype=self.dtype)
    bn = functools.partial(FrozenBatchNorm, dtype=self.dtype)
    out = 4 * self.width
    y = nn.relu(bn(name="bn1")(conv(features=self.width, kernel_size=(1, 1), name="conv1")(x)))
    y = conv(
      features=self.width,
      kernel_size=(3, 3),
      strides=self.strides,
      padding=((1, 1), (1, 1)),
      name="conv2",
    )(y)
    y = nn.relu(bn(name="bn2")(y))
    y = bn(name="bn3")(conv(features=out, kernel_size=(1, 1), name="conv3")(y))
    if x.shape[-1] != out or self.strides != 1:
      x = conv(features=out, kernel_size=(1, 1), strides=self.strides, name="downsample_conv")(x)
      x = bn(name="downsample_bn")(x)
    return nn.relu(x + y)


class ResNet50(nn.Module):
  """The `resnet50` backbone of the module docstring: `[B, H, W, C]` -> `[B, H/32, W/32, 2048]`."""

  dtype: Any = None
  stride: ClassVar[int] = 32

  @nn.compact
  def __call__(self, images: Array, mask: Array) -> Array:
    del mask  # DETR's ResNet sees the zero padding
    x = nn.Conv(
      features=64,
      kernel_size=(7, 7),
      strides=2,
      padding=((3, 3), (3, 3)),
      use_bias=False,
      kernel_init=_conv_init,
      dtype=self.dtype,
      name="conv1",
    )(images)
    x = nn.relu(FrozenBatchNorm(dtype=self.dtype, name="bn1")(x))
    x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
    for s, (blocks, width, strides) in enumerate(RESNET50_STAGES):
      for b in range(blocks):
        x = Bottleneck(
          width=width,
          strides=strides if b == 0 else 1,
          dtype=self.dtype,
          name=f"layer{s + 1}_{b}",
        )(x)
    return x


BACKBONES = {"small": SmallBackbone, "resnet50": ResNet50}


def feature_grid(backbone: str, image_hw) -> tuple[int, ...]:
  """The feature map of `backbone` on an image of `image_hw`: `ceil(size / stride)` per axis
  (every stride-2 layer pads so that it rounds up)."""
  return tuple(math.ceil(s / BACKBONES[backbone].stride) for s in image_hw)
