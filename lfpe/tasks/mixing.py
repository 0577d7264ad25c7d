"""Mixup and CutMix of a training batch, inside the jitted step (DeiT / AugReg recipes).

Mixup (Zhang et al. 2018): with λ ~ Beta(α, α), every image and its one-hot label become
`λ · x + (1 − λ) · x'` with the partner example `x'`. CutMix (Yun et al. 2019): with
λ ~ Beta(α, α), a box of `√(1 − λ)` of the height and width, centred uniformly and clipped
to the image, is pasted from the partner, and λ becomes the share of the own image kept,
`1 − box area / image area`. As timm's `Mixup` (mode 'batch'): one λ per batch, the partner
is the batch reversed, a batch is mixed with probability `prob`, and with both enabled
CutMix is chosen with probability `switch_prob`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cutmix_box(key: jax.Array, lam: jax.Array, height: int, width: int) -> jax.Array:
  """The CutMix region `[H, W]` (True: the partner's pixels) of a box with area ratio
  `1 − lam` before clipping, centred uniformly in the image."""
  cut = jnp.sqrt(1.0 - lam)
  ky, kx = jax.random.split(key)
  cy, cx = jax.random.randint(ky, (), 0, height), jax.random.randint(kx, (), 0, width)
  half_h = jnp.floor(height * cut / 2).astype(jnp.int32)
  half_w = jnp.floor(width * cut / 2).astype(jnp.int32)
  rows, cols = jnp.arange(height)[:, None], jnp.arange(width)[None, :]
  inside_y = (rows >= jnp.clip(cy - half_h, 0, height)) & (rows < jnp.clip(cy + half_h, 0, height))
  inside_x = (cols >= jnp.clip(cx - half_w, 0, width)) & (cols < jnp.clip(cx + half_w, 0, width))
  return inside_y & inside_x


def mix(
  images: jax.Array,
  key: jax.Array,
  *,
  mixup_alpha: float = 0.0,
  cutmix_alpha: float = 0.0,
  prob: float = 1.0,
  switch_prob: float = 0.5,
) -> tuple[jax.Array, jax.Array]:
  """(images `[B, H, W, C]` mixed with the reversed batch, λ []): the target of example i is
  `λ · y_i + (1 − λ) · y_{B−1−i}` (a loss linear in the target, as cross-entropy, may take
  λ times its loss on y_i plus 1 − λ times its loss on the partner's)."""
  k_apply, k_switch, k_mixup, k_cutmix, k_box = jax.random.split(key, 5)
  partner = images[::-1]
  mixed, lam = images, jnp.ones((), jnp.float32)
  if mixup_alpha > 0:
    lam = jax.random.beta(k_mixup, mixup_alpha, mixup_alpha)
    mixed = lam * images + (1.0 - lam) * partner
  if cutmix_alpha > 0:
    height, width = images.shape[1:3]
    box = cutmix_box(k_box, jax.random.beta(k_cutmix, cutmix_alpha, cutmix_alpha), height, width)
    cut_images = jnp.where(box[None, :, :, None], partner, images)
    cut_lam = 1.0 - jnp.mean(box.astype(jnp.float32))
    use_cutmix = jax.random.bernoulli(k_switch, switch_prob) if mixup_alpha > 0 else True
    mixed = jnp.where(use_cutmix, cut_images, mixed)
    lam = jnp.where(use_cutmix, cut_lam, lam)
  applied = jax.random.bernoulli(k_apply, prob)
  lam = jnp.where(applied, lam, 1.0)
  return jnp.where(applied, mixed.astype(images.dtype), images), lam
