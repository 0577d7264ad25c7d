"""Changing resolution from your own training loop: what lfpe's ViT and trainer do, as functions.

lfpe's trainer trains at several sizes (`config.data.train_sizes`) and its ViT perturbs the
coordinates of coordinate-based encodings while training (`model.coord_augment`). A user with
their own model and loop gets the same from here, on the core install (jax and flax only):

  size = resolution.draw_size((24, 32, 48), seed=0, step=step)    # one size per batch
  images = resolution.resize_batch(images, size)                   # nearest, as the trainer
  coords = resolution.train_coords(pos, grid, key, **coords.DINOV3)  # training only
  table = pos(coords)                # an absolute encoding (RoPE: pos(x, coords)); eval: pos.grid

`draw_size` is a function of (seed, step) only, so every host draws the same size and a
resumed run draws what the interrupted one would have. After training at several sizes, tell
RoPE's scaling policies the largest grid trained at (`rope_axial(scaling='pi',
trained_grid=(12, 12))`): by default they take the model's own grid as the training length.

Per-example sizes and aspect ratios in one batch (NaFlex, as SigLIP 2 and timm's NaFlexViT):

  batch = resolution.pack(images, patch=(16, 16), max_tokens=256)  # a list of [H_i, W_i, C]
  logits = vit.apply(params, batch, train=False)                  # lfpe's ViT takes it whole

Several sizes in one step (DINO's multi-crop): `multi_crop` cuts each image into views of
several sizes, and `pack` puts them all in one batch:

  views = resolution.multi_crop(image, rng, ((32, 2, (0.4, 1.0)), (16, 6, (0.05, 0.4))))
  batch = resolution.pack(views, patch=(4, 4), max_tokens=64)    # 2 views of 8x8, 6 of 4x4

`pack` resizes each image that does not fit to `naflex_size` (its aspect ratio kept, at most
`max_tokens` patches), cuts it into patches in raster order and pads the batch to
`max_tokens` tokens: `patches [B, L, P²C]`, `index [B, L, 2]` (each token's cell),
`shape [B, 2]` (each example's grid) and `valid [B, L]`. Absolute encodings give each token
the row its example's own grid would (`AbsoluteEncoding.packed`: learned tables resampled per
example, coordinates in the example's own convention), rotary ones rotate by its cell, and
attention never reads padding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lfpe.encodings import coords as coords_lib
from lfpe.encodings.registry import augment_refusal


def _pair(value: Any, name: str) -> tuple[int, int]:
  """`value` as (height, width) of positive ints (an int: square), or ValueError naming it."""
  pair = (value, value) if isinstance(value, (int, np.integer)) else value
  ok = isinstance(pair, Sequence) and len(pair) == 2
  if not ok or not all(isinstance(v, (int, np.integer)) and v > 0 for v in pair):
    raise ValueError(f"{name} must be a positive int or (height, width) of them, got {value!r}.")
  return int(pair[0]), int(pair[1])


def _tokens(max_tokens: Any) -> int:
  if not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1:
    raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}.")
  return int(max_tokens)


def _image(image: Any, where: str) -> np.ndarray:
  """`image` as float32 `[H, W, C]`, or ValueError naming `where`."""
  image = np.asarray(image, np.float32)
  if image.ndim != 3 or min(image.shape) < 1:
    raise ValueError(f"{where} must be an image [H, W, C], got shape {image.shape}.")
  return image


def draw_size(sizes: Sequence[Any], seed: int, step: int | Sequence[int]) -> Any:
  """The image size of training batch `step`: uniform over `sizes`, from (seed, step) alone
  (`step` may be a tuple, e.g. (batch, row): one size per example)."""
  if not sizes:
    raise ValueError("draw_size: give at least one size.")
  steps = list(step) if isinstance(step, Sequence) else [step]
  chosen = sizes[np.random.default_rng([seed, *steps]).integers(len(sizes))]
  return int(chosen) if isinstance(chosen, (int, np.integer)) else tuple(chosen)


def resize_batch(images: Any, size: int | Sequence[int], method: str = "nearest") -> jax.Array:
  """`images` `[B, H, W, C]` resized to `size` (int: square) with `jax.image.resize`
  (`nearest` repeats pixels exactly at integer factors, as lfpe's trainer resizes)."""
  h, w = _pair(size, "resize_batch: size")
  images = jnp.asarray(images)
  if images.ndim != 4:
    raise ValueError(f"resize_batch takes images [B, H, W, C], got shape {images.shape}.")
  if images.shape[1:3] == (h, w):
    return images
  return jax.image.resize(images, (images.shape[0], h, w, images.shape[3]), method)


def patchify(images: Any, patch: Sequence[int]) -> Any:
  """`[..., H, W, C]` -> `[..., (H/ph)(W/pw), ph·pw·C]`: raster-order patches, each flattened
  as (ph, pw, C), as a stride-P conv (the ViT's patch embedding) reads them; numpy or jax."""
  *lead, h, w, c = images.shape
  ph, pw = _pair(patch, "patchify: patch")
  if h % ph or w % pw:
    raise ValueError(f"patchify: the image size {(h, w)} is not whole patches of {(ph, pw)}.")
  x = images.reshape(*lead, h // ph, ph, w // pw, pw, c).swapaxes(-4, -3)  # [.., gh, gw, ph, pw, C]
  return x.reshape(*lead, (h // ph) * (w // pw), ph * pw * c)


def naflex_size(
  image_hw: Sequence[int], patch: Sequence[int], max_tokens: int, tolerance: float = 1e-5
) -> tuple[int, int]:
  """The size NaFlex resizes an image to (timm's `get_image_size_for_seq` rule): the largest
  scale r, found by bisection on (tolerance/10, 100), whose whole-patch size
  (ceil(H·r / ph)·ph, ceil(W·r / pw)·pw; at least one patch a side) has at most `max_tokens`
  patches. Small images are enlarged to fill the budget, large ones shrunk (`pack` calls it
  only for an image that is not already whole patches within the budget, which it keeps as
  it is; timm's `ResizeToSequence` resizes every image)."""
  image_hw, patch = _pair(tuple(image_hw), "image_hw"), _pair(patch, "patch")
  max_tokens = _tokens(max_tokens)

  def size(r: float) -> tuple[int, int]:
    return tuple(max(p * math.ceil(s * r / p), p) for s, p in zip(image_hw, patch, strict=True))

  fits = lambda r: math.prod(s // p for s, p in zip(size(r), patch, strict=True)) <= max_tokens
  low, high = tolerance / 10.0, 100.0
  while high - low >= tolerance:
    mid = (low + high) / 2.0
    low, high = (mid, high) if fits(mid) else (low, mid)
  if not fits(low):  # an aspect ratio past what the budget holds at the smallest scale
    raise ValueError(
      f"naflex_size: an image of {image_hw} does not fit max_tokens={max_tokens} patches of "
      f"{patch} at any scale ({size(low)} at the smallest); crop it or raise max_tokens."
    )
  return size(low)


def packed_grid(image_hw: Sequence[int], patch: Sequence[int], max_tokens: int) -> tuple[int, int]:
  """The (rows, columns) patch grid `pack` gives an image of `image_hw`: its own where it is
  whole patches and at most `max_tokens`, else that of `naflex_size`."""
  image_hw, patch = _pair(tuple(image_hw), "image_hw"), _pair(patch, "patch")
  max_tokens = _tokens(max_tokens)
  grid = tuple(s // p for s, p in zip(image_hw, patch, strict=True))
  aligned = all(s % p == 0 for s, p in zip(image_hw, patch, strict=True))
  if aligned and math.prod(grid) <= max_tokens:
    return grid
  hw = naflex_size(image_hw, patch, max_tokens)
  return tuple(s // p for s, p in zip(hw, patch, strict=True))


def pack(images: Sequence[Any], patch: Sequence[int], max_tokens: int) -> dict[str, np.ndarray]:
  """A NaFlex batch (module docstring) of `images` (each `[H_i, W_i, C]`): an image whose
  grid is whole patches and at most `max_tokens` is kept as it is, any other is resized
  (bilinear, antialiased) to `naflex_size`; padding tokens are zeros at cell (0, 0)."""
  patch, max_tokens = _pair(patch, "pack: patch"), _tokens(max_tokens)
  if isinstance(images, np.ndarray | jax.Array) and np.ndim(images) != 4 or not len(images):
    raise ValueError("pack takes a list of images [H_i, W_i, C] (or a batch [B, H, W, C]).")
  images = [_image(image, f"pack: images[{b}]") for b, image in enumerate(images)]
  channels = {image.shape[-1] for image in images}
  if len(channels) > 1:
    raise ValueError(f"pack: the images must share their channels, got {sorted(channels)}.")
  out = {
    "patches": np.zeros((len(images), max_tokens, math.prod(patch) * channels.pop()), np.float32),
    "index": np.zeros((len(images), max_tokens, 2), np.int32),
    "shape": np.zeros((len(images), 2), np.int32),
    "valid": np.zeros((len(images), max_tokens), bool),
  }
  for b, image in enumerate(images):
    grid = packed_grid(image.shape[:2], patch, max_tokens)
    hw = tuple(g * p for g, p in zip(grid, patch, strict=True))
    if hw != image.shape[:2]:
      image = np.asarray(resize_batch(image[None], hw, "bilinear")[0])
    n = math.prod(grid)
    cells = np.stack(np.meshgrid(*map(np.arange, grid), indexing="ij"), -1).reshape(-1, 2)
    out["patches"][b, :n] = patchify(image, patch)
    out["index"][b, :n], out["shape"][b], out["valid"][b, :n] = cells, grid, True
  return out


DINO_VIEWS = ((224, 2, (0.4, 1.0)), (96, 8, (0.05, 0.4)))  # DINO's (size, count, area) views


def crop_window(
  rng: np.random.Generator, height: int, width: int, area: Sequence[float] = (0.05, 1.0)
) -> tuple[int, int, int, int]:
  """`(top, left, h, w)` of an Inception crop (torchvision's `RandomResizedCrop` window): a
  uniform fraction of the image area in `area`, a log-uniform aspect ratio in [3/4, 4/3], at
  a uniform position; after 10 tries that do not fit, torchvision's fallback: the central
  crop of the whole image, its aspect ratio clamped to [3/4, 4/3]."""
  low, high = 3 / 4, 4 / 3
  for _ in range(10):
    size = rng.uniform(*area) * height * width
    aspect = math.exp(rng.uniform(math.log(low), math.log(high)))
    h, w = round(math.sqrt(size / aspect)), round(math.sqrt(size * aspect))
    if 0 < h <= height and 0 < w <= width:
      return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
  h, w = height, width
  if width / height < low:
    h = round(width / low)
  elif width / height > high:
    w = round(height * high)
  return (height - h) // 2, (width - w) // 2, h, w


def multi_crop(
  image: Any,
  rng: np.random.Generator,
  views: Sequence[tuple[int, int, Sequence[float]]],
  method: str = "bicubic",
) -> list[np.ndarray]:
  """DINO's multi-crop (Caron et al. 2021): for each `(size, count, area)` of `views`, `count`
  crops of `image` `[H, W, C]` (`crop_window` with that `area`) resized to `size` x `size`,
  in order; `DINO_VIEWS` are DINO's. `method`: `jax.image.resize`'s, antialiased; its
  `bicubic` has the kernel of PIL's BICUBIC (Keys a = -0.5, widened when shrinking), which
  DINO's `RandomResizedCrop` uses on PIL images (PIL also rounds to uint8). Flips and colour
  jitter are the caller's. `pack` trains the views in one step."""
  image = _image(image, "multi_crop: image")
  if not isinstance(rng, np.random.Generator):
    raise ValueError(f"multi_crop: rng must be a np.random.Generator, got {rng!r}.")
  for view in views:
    ok = isinstance(view, Sequence) and len(view) == 3 and isinstance(view[2], Sequence)
    if not ok or len(view[2]) != 2 or not 0 < view[2][0] <= view[2][1] <= 1:
      raise ValueError(
        f"multi_crop: each view is (size, count, (low, high)) with 0 < low <= high <= 1, the "
        f"fractions of the image's area, got {view!r}; DINO's: {DINO_VIEWS}."
      )
  out = []
  for size, count, area in views:
    for _ in range(count):
      top, left, h, w = crop_window(rng, *image.shape[:2], area)
      window = image[top : top + h, left : left + w]
      out.append(np.asarray(resize_batch(window[None], size, method)[0]))
  return out


def train_coords(encoding: Any, shape: Sequence[int], key: jax.Array, **augment: Any) -> jax.Array:
  """The coordinates `encoding` reads on a grid of `shape`, perturbed for training by
  `coords.augment` with `augment` ({shift, jitter, rescale, convention}, e.g.
  `coords.DINOV3`); evaluation reads `encoding.grid_coords(shape)` unperturbed."""
  options = coords_lib.check_augment(augment, "train_coords")
  refusal = augment_refusal(encoding)
  if refusal:
    raise ValueError(f"train_coords: {refusal}.")
  grid = encoding.grid_coords(tuple(shape))
  return coords_lib.augment(grid, key, **options, num_positions=tuple(shape))
