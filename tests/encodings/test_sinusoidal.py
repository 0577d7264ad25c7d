"""Sinusoidal encodings against Eq. 1 by hand and in numpy, DETR's sine, learnable sine."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings
from lfpe.encodings import coords
from lfpe.encodings.sinusoidal import (
  DetrSine,
  LearnableSinusoidal,
  Sine1D,
  SineND,
  sincos_1d,
  sincos_nd,
)

RNG = np.random.default_rng(0)


def np_vaswani(pos, dim, temperature=10000.0):
  """002 Eq. 1 entry by entry: PE(p, 2i) = sin(p / T^(2i/D)), PE(p, 2i+1) = cos(...)."""
  out = np.zeros((len(pos), dim))
  for n, p in enumerate(pos):
    for i in range(dim // 2):
      out[n, 2 * i] = math.sin(p / temperature ** (2 * i / dim))
      out[n, 2 * i + 1] = math.cos(p / temperature ** (2 * i / dim))
  return out


def test_sine_1d_by_hand():
  pe = np.asarray(sincos_1d(jnp.float32([0.0, 1.0]), 4))
  np.testing.assert_allclose(pe[0], [0, 1, 0, 1], atol=1e-7)
  # p = 1: i = 0 -> sin(1), cos(1); i = 1 -> 1 / 10000^(2/4) = 1/100
  np.testing.assert_allclose(
    pe[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], rtol=1e-6
  )


def test_sine_1d_matches_eq1_in_numpy():
  pos = RNG.uniform(0, 50, size=9)
  np.testing.assert_allclose(
    sincos_1d(jnp.float32(pos), 12), np_vaswani(np.float32(pos), 12), atol=2e-5
  )
  np.testing.assert_allclose(
    sincos_1d(jnp.float32(pos), 12, temperature=100.0),
    np_vaswani(np.float32(pos), 12, 100.0),
    atol=2e-5,
  )


def test_sine_1d_shift_is_a_rotation_per_frequency_pair():
  dim, k = 16, 3.0
  pos = np.float32([0.0, 2.0, 5.0, 11.0])
  w = 10000.0 ** (-2 * np.arange(dim // 2) / dim)
  c, s = np.cos(w * k), np.sin(w * k)
  rot = np.zeros((dim, dim))  # 001 Sec. 2.2: T_k acting on (sin, cos) pairs
  for i in range(dim // 2):
    rot[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c[i], s[i]], [-s[i], c[i]]]
  pe = np.asarray(sincos_1d(jnp.asarray(pos), dim), np.float64)
  np.testing.assert_allclose(sincos_1d(jnp.asarray(pos + k), dim), pe @ rot.T, atol=2e-6)


def test_layouts_interleave_and_concat():
  pos = jnp.float32([0.5, 3.0])
  inter, concat = np.asarray(sincos_1d(pos, 8)), np.asarray(sincos_1d(pos, 8, layout="concat"))
  np.testing.assert_array_equal(concat, np.concatenate([inter[:, 0::2], inter[:, 1::2]], -1))
  # MAE's get_1d_sincos_pos_embed: omega = 1 / T^(i / (D/2)), [sin(p ω) ‖ cos(p ω)]
  omega = 1.0 / 10000 ** (np.arange(4) / 4.0)
  mae = np.concatenate([np.sin(np.outer(pos, omega)), np.cos(np.outer(pos, omega))], -1)
  np.testing.assert_allclose(concat, mae, atol=1e-6)


def test_sine_nd_blocks_in_coordinate_order_and_003_eq1():
  grid = coords.grid((3, 4))  # (row, col)
  pe = np.asarray(sincos_nd(grid, 8))
  np.testing.assert_array_equal(pe[:, :4], sincos_1d(grid[:, 0], 4))
  np.testing.assert_array_equal(pe[:, 4:], sincos_1d(grid[:, 1], 4))
  # 003 Eq. 1 writes the horizontal x block first: PE(x, y, 2i) = sin(x / T^(4i/D)), ...
  d, eq1 = 8, np.zeros((12, 8))
  for n, (y, x) in enumerate(np.asarray(grid)):
    for i in range(d // 4):
      f = 10000 ** (4 * i / d)
      eq1[n, [2 * i, 2 * i + 1, 2 * i + d // 2, 2 * i + 1 + d // 2]] = [
        math.sin(x / f),
        math.cos(x / f),
        math.sin(y / f),
        math.cos(y / f),
      ]
  np.testing.assert_allclose(sincos_nd(grid[:, ::-1], d), eq1, atol=1e-6)
  concat = np.asarray(sincos_nd(grid, 8, layout="concat"))
  np.testing.assert_array_equal(concat[:, 4:], sincos_1d(grid[:, 1], 4, layout="concat"))


def test_sine_4d_on_boxes_and_modules():
  box = jnp.float32(RNG.uniform(0, 100, size=(5, 4)))
  sine_4d = encodings.create("sine_4d", dim=16, ndim=4)
  out = np.asarray(sine_4d.apply({}, box))
  for k in range(4):
    np.testing.assert_array_equal(out[:, 4 * k : 4 * k + 4], sincos_1d(box[:, k], 4))
  sine_1d = encodings.create("sine_1d", dim=6)
  assert sine_1d.flatten and sine_1d.coords_mode == "index"
  np.testing.assert_array_equal(
    sine_1d.apply({}, (2, 3), method="grid"), sincos_1d(jnp.arange(6.0), 6)
  )
  sine_2d = encodings.build("sine_2d", dim=8, grid_shape=(2, 3), ndim=2)
  np.testing.assert_array_equal(
    sine_2d.apply({}, (2, 3), method="grid"), sincos_nd(coords.grid((2, 3)), 8)
  )


def np_detr_sine(mask, dim, temperature=10000.0, scale=2 * math.pi, eps=1e-6):
  """DETR's PositionEmbeddingSine(normalize=True) in numpy, channels last: [B, H, W, D]."""
  npf = dim // 2
  valid = ~mask
  y = np.cumsum(valid, 1, dtype=np.float64)
  x = np.cumsum(valid, 2, dtype=np.float64)
  y = y / (y[:, -1:, :] + eps) * scale
  x = x / (x[:, :, -1:] + eps) * scale
  dim_t = temperature ** (2 * (np.arange(npf) // 2) / npf)

  def embed(p):
    p = p[..., None] / dim_t
    return np.stack([np.sin(p[..., 0::2]), np.cos(p[..., 1::2])], 4).reshape(*p.shape[:3], -1)

  return np.concatenate([embed(y), embed(x)], -1)


def test_detr_sine_matches_detr_and_ignores_padding():
  mask = np.zeros((2, 5, 6), bool)
  mask[0, 3:, :] = True  # example 0: 3 x 6 valid
  mask[1, :, 4:] = True  # example 1: 5 x 4 valid
  detr = encodings.create("detr_sine", dim=16)
  out = np.asarray(detr.apply({}, jnp.asarray(mask), method="from_mask"))
  assert out.shape == (2, 5, 6, 16)
  np.testing.assert_allclose(out, np_detr_sine(mask, 16), atol=2e-5)
  pos = np.asarray(coords.detr(jnp.asarray(mask)))
  assert pos[0, :3].min() > 0 and pos[0, :3].max() <= 2 * math.pi + 1e-5  # (0, 2π] when valid
  for b, (h, w) in enumerate([(3, 6), (5, 4)]):  # each example as if it were unpadded
    alone = detr.apply({}, (h, w), method="grid").reshape(h, w, 16)
    np.testing.assert_allclose(out[b, :h, :w], alone, atol=1e-6)


def test_detr_sine_call_and_unnormalised_positions():
  detr = DetrSine(dim=8, normalize=False)
  mask = jnp.zeros((1, 2, 3), bool)
  out = detr.apply({}, mask, method="from_mask")  # 1-based counts, no normalisation
  np.testing.assert_allclose(
    out[0, 1, 2], np.concatenate([sincos_1d(2.0, 4), sincos_1d(3.0, 4)]), atol=1e-6
  )
  np.testing.assert_array_equal(detr.apply({}, coords.detr(mask, normalize=False)), out)


@pytest.mark.parametrize("normalize", [True, False])
def test_detr_sine_frequency_scale_multiplies_every_frequency(normalize):
  """`frequency_scale` s (the sweep knob): every frequency times s, in both modes, so it
  equals DETR's reference on positions times s (normalised: DETR's `scale` 2π·s); 1 is DETR
  (test_detr_sine_matches_detr_and_ignores_padding)."""
  mask = np.zeros((1, 3, 4), bool)
  mask[0, 2:, :] = True
  scaled = encodings.create("detr_sine", dim=16, normalize=normalize, frequency_scale=4.0)
  out = np.asarray(scaled.apply({}, jnp.asarray(mask), method="from_mask"))
  if normalize:
    np.testing.assert_allclose(out, np_detr_sine(mask, 16, scale=8 * math.pi), atol=2e-5)
  y, x = np.asarray(coords.detr(jnp.asarray(mask), normalize=normalize))[0, 1, 2]
  first = [np.sin(4 * y), np.cos(4 * y)]  # frequency 1 (i = 0) of the y block, times 4
  np.testing.assert_allclose(out[0, 1, 2, :2], first, atol=1e-5)
  assert encodings.knob("detr_sine") == ("frequency_scale", 1.0)
  with pytest.raises(ValueError, match="frequency_scale"):
    encodings.create("detr_sine", dim=16, frequency_scale=0.0).apply({}, (2, 2), method="grid")


@pytest.mark.parametrize("layout", ["interleave", "concat"])
@pytest.mark.parametrize("ndim", [2, 4])
def test_learnable_sine_equals_sine_nd_at_init(layout, ndim):
  x = jnp.float32(RNG.uniform(0, 30, size=(7, ndim)))
  module = LearnableSinusoidal(dim=8 * ndim, ndim=ndim, layout=layout)
  variables = jax.jit(module.init)(jax.random.key(0), x)
  expected = SineND(dim=8 * ndim, ndim=ndim, layout=layout).apply({}, x)
  np.testing.assert_allclose(jax.jit(module.apply)(variables, x), expected, atol=1e-6)


def test_learnable_sine_grid_is_003_eq1_with_its_halves_swapped():
  """003 Eq. 1 / Eq. 6 put the horizontal x first; lfpe's grid reads (row, col): the row
  block first (the docstring), and reversed coordinates give the paper's channel order."""
  d, (h, w) = 8, (3, 4)
  module = encodings.create("learnable_sine", dim=d)
  variables = module.init(jax.random.key(0), jnp.zeros((1, 2)))
  rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
  x, y = cols.reshape(-1), rows.reshape(-1)
  eq1 = np.zeros((h * w, d))  # PE(2i) = sin(x / T^(4i/D)), PE(2j + D/2) = sin(y / T^(4j/D))
  for i in range(d // 4):
    for half, p in ((0, x), (d // 2, y)):
      eq1[:, half + 2 * i] = np.sin(p / 10000.0 ** (4 * i / d))
      eq1[:, half + 2 * i + 1] = np.cos(p / 10000.0 ** (4 * i / d))
  grid = module.apply(variables, (h, w), method="grid")
  swapped = np.concatenate([eq1[:, d // 2 :], eq1[:, : d // 2]], axis=-1)
  np.testing.assert_allclose(grid, swapped, atol=1e-6)
  xy = coords.grid((h, w))[:, ::-1]
  np.testing.assert_allclose(module.apply(variables, xy), eq1, atol=1e-6)


def test_sine_1d_temperature_100_is_001_section_2_2_as_written():
  """001 Sec. 2.2 writes w_i = 1/10000^(i/D) (its code: 2i/D, lfpe's default)."""
  d, pos = 8, np.arange(5.0)
  written = np.zeros((5, d))
  for i in range(d // 2):
    written[:, 2 * i] = np.sin(pos / 10000.0 ** (i / d))
    written[:, 2 * i + 1] = np.cos(pos / 10000.0 ** (i / d))
  np.testing.assert_allclose(sincos_1d(jnp.float32(pos), d, temperature=100.0), written, atol=1e-6)


def test_learnable_sine_init_is_003_eq6_and_trains():
  d = 8
  module = encodings.create("learnable_sine", dim=d)
  x = jnp.float32(RNG.uniform(0, 5, size=(6, 2)))
  w = np.asarray(jax.jit(module.init)(jax.random.key(0), x)["params"]["w"])
  eq6 = np.zeros((d // 2, 2))  # y_i = x / T^(4i/D) if i < D/4 else y / T^(4(i - D/4)/D)
  for i in range(d // 2):
    eq6[i, 0 if i < d // 4 else 1] = 10000.0 ** (-4 * (i % (d // 4)) / d)
  np.testing.assert_allclose(w, eq6, rtol=1e-6)
  target = jnp.float32(RNG.normal(size=(6, d)))
  loss = lambda p: jnp.sum(module.apply({"params": p}, x) * target)
  grad = np.asarray(jax.jit(jax.grad(loss))({"w": jnp.asarray(w)})["w"])
  assert grad.shape == (d // 2, 2) and np.all(grad != 0)  # every entry, off-diagonal too


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: sincos_1d(jnp.zeros(3), 5), "dim"),
    (lambda: sincos_nd(jnp.zeros((3, 2)), 6), "dim"),
    (lambda: sincos_nd(jnp.zeros((3, 4)), 12), "dim"),
    (lambda: sincos_1d(jnp.zeros(3), 4, layout="blocks"), "layout"),
    (lambda: sincos_1d(jnp.zeros(3), 4, temperature=0.0), "temperature"),
    (lambda: Sine1D(dim=5), "dim"),
    (lambda: SineND(dim=12, ndim=4), "dim"),
    (lambda: SineND(dim=8, coords_mode="pixels"), "coords_mode"),
    (lambda: SineND(dim=8, layout="mae"), "layout"),
    (lambda: SineND(dim=8, temperature=-1.0), "temperature"),
    (lambda: SineND(dim=8).apply({}, jnp.zeros((3, 3))), "`coords`"),
    (lambda: Sine1D(dim=8).apply({}, jnp.zeros((3, 2))), "`coords`"),
    (lambda: DetrSine(dim=6), "dim"),
    (lambda: DetrSine(dim=8).apply({}, jnp.zeros((4, 5), bool), method="from_mask"), "mask"),
    (lambda: DetrSine(dim=8).apply({}, jnp.zeros((1, 4, 5)), method="from_mask"), "mask"),
    (lambda: LearnableSinusoidal(dim=10), "dim"),
    (lambda: LearnableSinusoidal(dim=8, ndim=0), "ndim"),
  ],
)
def test_bad_inputs_name_the_argument(call, match):
  with pytest.raises(ValueError, match=match):
    call()
