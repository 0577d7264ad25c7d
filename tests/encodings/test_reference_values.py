"""lfpe against numbers the reference code itself computed (tests/encodings/reference_values.npz,
written by scripts/reference_values.py with PyTorch and rotary-embedding-torch from checkouts
of rope-vit, DINOv3, Swin, DETR, MAE and big_vision; the versions and commits are in the
file): PyTorch's `F.interpolate` kernels as Swin, MAE, DeiT/RoPE-ViT and timm resize tables;
rope-vit's RoPE-Axial and RoPE-Mixed, also past the training grid; rotary-embedding-torch's
`interpolate_factor` (PI) and `theta_rescale_factor` (NTK) per axis; DINOv3's RoPE with and
without its coordinate augmentation, on the draws it made; Swin's relative position bias,
also at a window fine-tuned from a smaller one; DETR's sine on padding masks; MAE's and
big_vision's 2-D sin-cos tables. The other tests check the same against transcriptions of
the formulas; these pin the references' own output.
"""

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import coords as coords_lib
from lfpe.encodings.relative import RelativeBias2D
from lfpe.encodings.resample import resample
from lfpe.encodings.rotary import Rotary2D
from lfpe.encodings.sinusoidal import DetrSine

FILE = pathlib.Path(__file__).with_name("reference_values.npz")
VALUES = np.load(FILE)
INDEX = json.loads(str(VALUES["cases"]))
CASES = INDEX["cases"]
KINDS = ("resize", "rope_vit", "rotary_embedding_torch", "dinov3", "swin", "detr", "mae")
KINDS += ("big_vision",)


def _cases(kind):
  chosen = [c for c in CASES if c["kind"] == kind]
  return pytest.mark.parametrize("case", chosen, ids=[c["name"] for c in chosen])


def test_the_file_holds_every_reference():
  kinds = {c["kind"] for c in CASES}
  assert kinds == set(KINDS), kinds
  assert len(CASES) == 34 and {"torch", "naver-ai/rope-vit"} <= set(INDEX["versions"])


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
    bounds = [tuple(b) for b in VALUES[f"{case['name']}/bounds"]]  # (low, high, size) a draw

    def drawn(key, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0):
      if maxval == 0:  # an augmentation that is off: lfpe draws it at width 0, DINOv3 not
        return jnp.zeros(shape, dtype)
      low, high, size = bounds.pop(0)  # DINOv3 drew the same quantity, in the same range
      assert (minval, maxval, math.prod(shape)) == pytest.approx((low, high, size)), case
      values, draws[: int(size)] = draws[: int(size)], []
      return jnp.asarray(values, dtype).reshape(shape)

    monkeypatch.setattr(jax.random, "uniform", drawn)
    coords = coords_lib.augment(
      coords, jax.random.key(0), **options, convention="dinov3", num_positions=(h, w)
    )
    assert not draws and not bounds  # each of DINOv3's draws was used, in its order
  x = VALUES[f"{case['name']}/x"][:, perm]
  got = module.apply({}, jnp.asarray(x)[None, :, None], coords)
  want = VALUES[f"{case['name']}/out"][:, perm]
  np.testing.assert_allclose(np.asarray(got)[0, :, 0], want, rtol=1e-5, atol=2e-5)


@_cases("swin")
def test_relative_bias_equals_swin_and_its_fine_tuning_resize(case):
  """Swin's table (2·4 − 1)² x heads for a 4x4 window; at 6x6 Swin resizes it for the new
  window with `F.interpolate(mode='bicubic')` (`load_pretrained`), lfpe's default kernel."""
  module = RelativeBias2D(grid_shape=tuple(case["trained"]), num_heads=2)
  table = jnp.asarray(VALUES["swin/table"])
  got = module.apply({"params": {"table": table}}, tuple(case["window"]))
  np.testing.assert_allclose(np.asarray(got), VALUES[f"{case['name']}/out"], rtol=1e-5, atol=1e-6)


@_cases("detr")
def test_detr_sine_equals_detr_on_padding_masks(case):
  module = DetrSine(dim=case["dim"], temperature=case["temperature"], normalize=case["normalize"])
  got = module.apply({}, jnp.asarray(VALUES["detr/mask"]), method="from_mask")
  np.testing.assert_allclose(np.asarray(got), VALUES[f"{case['name']}/out"], atol=1e-5)


@_cases("mae")
def test_sine_2d_concat_equals_mae_with_its_halves_swapped_on_the_grid(case):
  """MAE's table (a zero class-token row, then x's half first) is `sine_2d(layout='concat')`
  at (x, y) coordinates; the y-first grid a model gets is it with its two halves swapped."""
  want, dim, grid = VALUES[f"{case['name']}/out"], case["dim"], tuple(case["grid"])
  sine = encodings.create("sine_2d", dim=dim, layout="concat")
  xy = coords_lib.grid(grid)[:, ::-1]
  np.testing.assert_array_equal(want[0], 0.0)
  np.testing.assert_allclose(np.asarray(sine.apply({}, xy)), want[1:], atol=1e-5)
  y_first = np.asarray(sine.apply({}, grid, method="grid"))
  np.testing.assert_allclose(np.roll(y_first, dim // 2, axis=-1), want[1:], atol=1e-5)


@_cases("big_vision")
def test_sine_2d_concat_equals_big_vision_posemb_sincos_2d(case):
  """big_vision's ω_k = T^(−k/(K−1)) over K = width/4 frequencies is lfpe's T^(−k/K) at
  temperature T^(K/(K−1)) (the sinusoidal module's docstring)."""
  dim, k = case["dim"], case["dim"] // 4
  sine = encodings.create(
    "sine_2d", dim=dim, temperature=case["temperature"] ** (k / (k - 1)), layout="concat"
  )
  got = sine.apply({}, coords_lib.grid(tuple(case["grid"]))[:, ::-1])
  np.testing.assert_allclose(np.asarray(got), VALUES[f"{case['name']}/out"], atol=1e-5)
