"""lfpe against numbers the reference code itself computed (tests/encodings/reference_values.npz,
written by scripts/reference_values.py with PyTorch 2.13, rotary-embedding-torch, rope-vit and
DINOv3; the versions and commits are in the file): PyTorch's `F.interpolate` kernels as Swin,
MAE, DeiT/RoPE-ViT and timm resize tables; rope-vit's RoPE-Axial and RoPE-Mixed, also past
the training grid; rotary-embedding-torch's `interpolate_factor` (PI) and
`theta_rescale_factor` (NTK) per axis; DINOv3's RoPE with and without its coordinate
augmentation, on the draws it made. The other tests check the same against transcriptions
of the formulas; these pin the references' own output.
"""

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.encodings import coords as coords_lib
from lfpe.encodings.resample import resample
from lfpe.encodings.rotary import Rotary2D

FILE = pathlib.Path(__file__).with_name("reference_values.npz")
VALUES = np.load(FILE)
INDEX = json.loads(str(VALUES["cases"]))
CASES = INDEX["cases"]


def _cases(kind):
  chosen = [c for c in CASES if c["kind"] == kind]
  return pytest.mark.parametrize("case", chosen, ids=[c["name"] for c in chosen])


def test_the_file_holds_every_reference():
  kinds = {c["kind"] for c in CASES}
  assert kinds == {"resize", "rope_vit", "rotary_embedding_torch", "dinov3"}, kinds
  assert len(CASES) == 25 and {"torch", "naver-ai/rope-vit"} <= set(INDEX["versions"])


@_cases("resize")
def test_resample_equals_pytorch_interpolate(case):
  table = VALUES[f"{case['name']}/table"]  # a class-token row, then the grid
  got = np.asarray(
    resample(jnp.asarray(table), case["old"], case["new"], case["method"], num_prefix=1,
             align_corners=case["align_corners"], antialias=case["antialias"])
  )  # fmt: skip
  np.testing.assert_array_equal(got[0], table[0])
  np.testing.assert_allclose(got[1:], VALUES[f"{case['name']}/out"], rtol=1e-5, atol=1e-5)


@_cases("rope_vit")
def test_rotary_equals_rope_vit(case):
  """rope-vit rotates q `[B, heads, N, d]` with `freqs_cis`; lfpe takes `[B, N, heads, d]`.
  RoPE-Mixed's frequencies are rope-vit's own random init, its rows (x, y) put as lfpe's
  (y, x)."""
  q = VALUES[f"{case['name']}/q"].transpose(0, 2, 1, 3)
  module = Rotary2D(head_dim=case["d"], num_heads=case["heads"], mode=case["mode"])
  params = {}
  if case["mode"] == "mixed":
    params = {"freqs": jnp.asarray(VALUES["rope_vit/mixed_freqs"][::-1])}
  got = module.apply({"params": params}, jnp.asarray(q), module.grid_coords(tuple(case["grid"])))
  want = VALUES[f"{case['name']}/out"].transpose(0, 2, 1, 3)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@_cases("rotary_embedding_torch")
def test_pi_and_ntk_equal_rotary_embedding_torch_per_axis(case):
  """Its channels are [y's d/2 | x's d/2] (`get_axial_freqs`' order), lfpe's x's first: a
  half-turn of the channels maps one onto the other."""
  d, grid = case["d"], tuple(case["grid"])
  perm = (np.arange(d) + d // 2) % d
  module = Rotary2D(head_dim=d, scaling=case["policy"], grid_shape=tuple(case["train"]))
  x = VALUES[f"{case['name']}/x"][:, perm]
  got = module.apply({}, jnp.asarray(x)[None, :, None], module.grid_coords(grid), grid)
  want = VALUES[f"{case['name']}/out"][:, perm]
  np.testing.assert_allclose(np.asarray(got)[0, :, 0], want, rtol=1e-5, atol=1e-5)


@_cases("dinov3")
def test_dinov3_coords_and_augmentation_equal_dinov3_rope(case, monkeypatch):
  """`coords_mode='dinov3'`, and `coords.augment(convention='dinov3')` fed the uniform draws
  DINOv3's `RopePositionEmbedding` made (shift, log-jitter, log-rescale, as it draws them):
  the rotated x equals its `rope_apply`, up to the channel layout (its rotate-half pairs (j,
  j + d/2), y first; lfpe's adjacent pairs, x first)."""
  d, (h, w) = case["d"], case["grid"]
  pairs = [d // 4 + i if i < d // 4 else i - d // 4 for i in range(d // 2)]
  perm = np.ravel([[j, j + d // 2] for j in pairs])
  module = Rotary2D(head_dim=d, coords_mode="dinov3")  # theta 100: DINOv3's base
  coords = module.grid_coords((h, w))
  options = {k.removesuffix("_coords"): v for k, v in case["options"].items()}
  if options:
    draws = list(VALUES[f"{case['name']}/draws"])

    def drawn(key, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0):
      if maxval == 0:  # an augmentation that is off: lfpe draws it at width 0, DINOv3 not
        return jnp.zeros(shape, dtype)
      size = math.prod(shape)
      values, draws[:size] = draws[:size], []
      return jnp.asarray(values, dtype).reshape(shape)

    monkeypatch.setattr(jax.random, "uniform", drawn)
    coords = coords_lib.augment(
      coords, jax.random.key(0), **options, convention="dinov3", num_positions=(h, w)
    )
    assert not draws  # each of DINOv3's draws was used, in its order
  x = VALUES[f"{case['name']}/x"][:, perm]
  got = module.apply({}, jnp.asarray(x)[None, :, None], coords)
  want = VALUES[f"{case['name']}/out"][:, perm]
  np.testing.assert_allclose(np.asarray(got)[0, :, 0], want, rtol=1e-5, atol=2e-5)
