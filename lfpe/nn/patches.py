"""The ViT's patch embedding, and its kernel carried to another patch size (FlexiViT).

A ViT embeds each flattened `(ph, pw, C)` patch (`lfpe.resolution.patchify`) with one Dense:
a stride-P convolution whose kernel `[ph, pw, C, D]` is stored as `[ph·pw·C, D]`. A kernel
trained at one patch size means nothing row for row at another, even where the shapes agree
(2x4 and 4x2 patches: one shape, two layouts), so `PatchEmbedding` knows its patch size and
`config.init_from` resamples the kernel with `resize_patch_kernel` when it changes, as it
resamples position tables when the grid changes. Given patches of another size
(`input_patch_size`), it applies the same PI-resize on the fly, so that a model trained at
one patch size is evaluated at another (FlexiViT's evaluation) with its parameters as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe.encodings.resample import resample


def patch_resize_matrix(old_patch: Sequence[int], new_patch: Sequence[int]) -> np.ndarray:
  """FlexiViT's PI-resize (Beyer et al. 2023, Sec. 3.4; big_vision's `resample_patchemb`) as
  a matrix M = pinv(Bᵀ), `[ph'·pw', ph·pw]` float64: a kernel's per-pixel rows w become
  ŵ = M w for `new_patch`.

  With B the bilinear resize of a patch from `old_patch` to `new_patch` (half-pixel centres,
  no antialiasing: `tf.image.resize`, as big_vision), ŵ solves <B x, ŵ> = <x, w> for every
  patch x, i.e. Bᵀ ŵ = w. Enlarging, Bᵀ has full row rank and a patch resized up gives
  exactly the token the old kernel gave the original (the minimum-norm such kernel);
  shrinking (or 2x4 -> 4x2), it is the least-squares fit. B is jax's float32 resize of each
  basis pixel (as exact as big_vision's float32 TF one), the pseudo-inverse float64 numpy.
  """
  old, new = tuple(old_patch), tuple(new_patch)
  # Column j of B is the j-th pixel's indicator patch, resized: [ph'·pw', ph·pw]; a constant
  # even when called while a model is traced.
  with jax.ensure_compile_time_eval():
    basis = resample(jnp.eye(math.prod(old)), old, new, "bilinear", antialias=False)
  return np.linalg.pinv(np.asarray(basis, np.float64).T)


def resize_patch_kernel(kernel, old_patch: Sequence[int], new_patch: Sequence[int]) -> np.ndarray:
  """A patch kernel `[ph·pw·C, D]` for `old_patch` as one for `new_patch`, `[ph'·pw'·C, D]`,
  by `patch_resize_matrix` (solved in float64, returned in the kernel's dtype)."""
  old, new = tuple(old_patch), tuple(new_patch)
  kernel = np.asarray(kernel)
  rows, features = kernel.shape
  if rows % math.prod(old):
    raise ValueError(
      f"resize_patch_kernel: a kernel of {rows} rows is not (ph·pw·C) for patches {old}."
    )
  if old == new:
    return kernel
  channels = rows // math.prod(old)
  per_pixel = kernel.astype(np.float64).reshape(math.prod(old), channels * features)
  out = patch_resize_matrix(old, new) @ per_pixel  # [ph'·pw', C·D]
  return out.reshape(math.prod(new) * channels, features).astype(kernel.dtype)


class PatchEmbedding(nn.Dense):
  """`nn.Dense` on flattened `(ph, pw, C)` patches that knows its kernel's `patch_size`, so
  that `config.init_from` carries a kernel trained at another patch size over by
  `resize_patch_kernel` (its `resize_params`; the bias is kept). Parameters and outputs are
  exactly `nn.Dense`'s (`params/embedding/{kernel,bias}` in lfpe's ViT).

  `input_patch_size` (None: `patch_size`): the patches it is given, when they differ from the
  kernel's (FlexiViT's evaluation at another patch size). The kernel parameter stays at
  `patch_size` and is PI-resized in the forward pass, in float32 (`patch_resize_matrix`, a
  constant): the tokens `resize_patch_kernel`'s kernel gives, to float32 rounding.
  """

  patch_size: tuple[int, int] | None = None
  input_patch_size: tuple[int, int] | None = None

  resize_field: ClassVar[str] = "patch_size"  # init_from: resample when this differs

  @nn.compact
  def __call__(self, inputs: jnp.ndarray) -> jnp.ndarray:
    given = self.input_patch_size
    if given is not None and self.patch_size is None:
      raise ValueError("PatchEmbedding: input_patch_size needs patch_size, the kernel's.")
    if given is None or tuple(given) == tuple(self.patch_size):
      return super().__call__(inputs)
    old, new = tuple(self.patch_size), tuple(given)
    if inputs.shape[-1] % math.prod(new):
      raise ValueError(
        f"PatchEmbedding: patches of {inputs.shape[-1]} values are not (ph·pw·C) for "
        f"input_patch_size={new}."
      )
    channels = inputs.shape[-1] // math.prod(new)
    shape = (math.prod(old) * channels, self.features)
    kernel = self.param("kernel", self.kernel_init, shape, self.param_dtype)
    per_pixel = jnp.asarray(kernel, jnp.float32).reshape(math.prod(old), -1)
    resize = jnp.asarray(patch_resize_matrix(old, new), jnp.float32)
    kernel = jnp.dot(resize, per_pixel, precision="highest").reshape(-1, self.features)
    bias = None
    if self.use_bias:
      bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
    inputs, kernel, bias = nn.dtypes.promote_dtype(inputs, kernel, bias, dtype=self.dtype)
    y = jnp.dot(inputs, kernel, precision=self.precision)
    return y if bias is None else y + bias

  def resize_params(self, params: dict, source_patch: Sequence[int]) -> dict:
    """This module's params from those of one trained at `source_patch` (`init_from`)."""
    kernel = resize_patch_kernel(params["kernel"], source_patch, self.patch_size)
    return {**params, "kernel": kernel}
