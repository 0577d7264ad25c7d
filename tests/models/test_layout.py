"""The layout captioner: Table 3's encodings, the box path, causality, decoding, checks."""

import importlib.util
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lfpe import encodings, tasks
from lfpe.models import MODELS, layout, layout_decode
from lfpe.models.layout import BOS, EOS, PAD
from lfpe.train.optim import make_optimizer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SMALL = dict(width=16, num_heads=2, mlp_dim=32, encoder_depth=1, decoder_depth=1, caption_len=8)
B, N, V = 2, 5, 20
RNG = np.random.default_rng(0)
BATCH = {
  "boxes": jnp.asarray(RNG.integers(10, 50, (B, N, 4)), jnp.int32),
  "types": jnp.asarray(RNG.integers(1, 5, (B, N)), jnp.int32),
  "texts": jnp.asarray(RNG.integers(0, 10, (B, N, 3)), jnp.int32),
  "num_objects": jnp.asarray([5, 3], jnp.int32),
  "target": jnp.asarray([1, 2], jnp.int32),
}
CAPTIONS = jnp.asarray(RNG.integers(3, V, (B, 7)), jnp.int32)


def _model(posemb="embed_nd", **kwargs):
  fields = {"variant": "tiny", **SMALL, "dropout": 0.0, "attention_dropout": 0.0, **kwargs}
  return MODELS["layout"](caption_vocab=V, text_vocab=10, num_types=5, posemb=posemb, **fields)


def _args(batch=BATCH):
  return [batch[k] for k in layout.INPUTS]


def _init(model, captions=CAPTIONS):
  return model.init({"params": jax.random.key(0)}, *_args(), captions, train=False)


def _config(arg):
  path = os.path.join(ROOT, "configs", "layout_synthetic.py")
  spec = importlib.util.spec_from_file_location("layout_synthetic", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


@pytest.fixture(scope="module")
def embed():
  model = _model()
  return model, _init(model)


@pytest.mark.parametrize("row", list(layout.TABLE3))
def test_every_table3_row_builds_from_its_config_and_runs(row):
  name, options = encodings.parse(layout.TABLE3[row])
  config = _config(f"posemb={name},groups={options.get('groups', 1)},small=1")
  got_name, got = encodings.parse(config.model.posemb)
  assert got_name == name and got.get("groups", 1) == options.get("groups", 1)
  task = tasks.get(config.task)
  model = task.create_model(config)
  batch = {**BATCH, "captions": jnp.zeros((B, 3, 12), jnp.int32).at[:, :, 0].set(1)}
  variables = task.init_variables(model, jax.random.key(0), batch)
  logits = task.forward(model, variables, batch, train=False, rng=None)["logits"]
  assert logits.shape == (B, 3, 11, 139) and bool(jnp.isfinite(logits).all())


@pytest.mark.parametrize(
  ("posemb", "shape", "scale"),
  [
    ("embed_nd", (4,), 1.0),  # learned tables: the bin itself
    ("sine_nd", (4,), 1.0),
    ("fourier(groups=1)", (1, 4), 1 / 99),  # unit coordinates, one 4-D group
    ("fourier(groups=2)", (2, 2), 1 / 99),  # (top, left), (bottom, right)
    ("fixed_fourier_mlp(groups=4)", (4, 1), 1 / 99),
  ],
)
def test_box_coordinates_follow_the_encoding(posemb, shape, scale):
  model = _model(posemb)
  coords = model.apply(_init(model), BATCH["boxes"], method=lambda m, b: m.box_coords(b))
  assert coords.shape == (B, N, *shape)
  expected = np.asarray(BATCH["boxes"], np.float32).reshape(B, N, *shape) * scale
  np.testing.assert_allclose(coords, expected, rtol=1e-6)


def test_two_groups_encode_top_left_and_bottom_right_apart():
  model = _model("fourier(groups=2)")
  variables = _init(model)
  encode = lambda boxes: model.apply(
    variables, boxes, method=lambda m, b: m.box_encoding(m.box_coords(b))
  )
  boxes = jnp.asarray([[10, 20, 30, 40]])
  base, moved = encode(boxes), encode(boxes.at[:, 2:].set([55, 70]))  # bottom, right move
  half = SMALL["width"] // 2
  np.testing.assert_array_equal(base[:, :half], moved[:, :half])  # (top, left) block
  assert not np.allclose(base[:, half:], moved[:, half:])
  swapped = encode(jnp.asarray([[20, 10, 30, 40]]))  # (top, left) -> (left, top): a new pair
  assert not np.allclose(base[:, :half], swapped[:, :half])


def test_decoder_is_causal(embed):
  model, variables = embed
  t = 3
  changed = CAPTIONS.at[:, t + 1 :].set((CAPTIONS[:, t + 1 :] + 5) % V)
  before = model.apply(variables, *_args(), CAPTIONS, train=False)
  after = model.apply(variables, *_args(), changed, train=False)
  np.testing.assert_array_equal(before[:, : t + 1], after[:, : t + 1])
  assert not np.allclose(before[:, t + 1 :], after[:, t + 1 :])


def test_references_share_one_encoding(embed):
  model, variables = embed
  refs = jnp.stack([CAPTIONS, CAPTIONS[::-1]], axis=1)  # [B, R=2, T]
  logits = model.apply(variables, *_args(), refs, train=False)
  for r in range(2):
    one = model.apply(variables, *_args(), refs[:, r], train=False)
    np.testing.assert_allclose(logits[:, r], one, rtol=1e-5, atol=1e-5)


def test_padding_objects_do_not_matter_and_the_target_does(embed):
  model, variables = embed
  moved = {
    **BATCH,
    "boxes": BATCH["boxes"].at[1, 3:].set(99),
    "types": BATCH["types"].at[1, 3:].set(4),
  }
  a = model.apply(variables, *_args(), CAPTIONS, train=False)
  b = model.apply(variables, *_args(moved), CAPTIONS, train=False)
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # example 1 has 3 objects
  other = {**BATCH, "target": BATCH["target"].at[1].set(0)}
  c = model.apply(variables, *_args(other), CAPTIONS, train=False)
  assert not np.allclose(a[1], c[1])  # the object to caption does


def test_no_position_control_ignores_the_boxes():
  model = _model("none")
  variables = _init(model)
  assert "box_encoding" not in variables["params"]
  a = model.apply(variables, *_args(), CAPTIONS, train=False)
  moved = {**BATCH, "boxes": BATCH["boxes"] + 40}
  np.testing.assert_array_equal(a, model.apply(variables, *_args(moved), CAPTIONS, train=False))
  other = {**BATCH, "target": BATCH["target"].at[1].set(0)}
  assert not np.allclose(a[1], model.apply(variables, *_args(other), CAPTIONS, train=False)[1])


def _with_head_bias(variables, token, value=1e4):
  params = nn.unbox(variables["params"])
  params["head"]["bias"] = params["head"]["bias"].at[token].set(value)
  return {**variables, "params": params}


@pytest.mark.parametrize("beam", [None, 3])
def test_decoding_stops_at_eos_and_respects_the_length_limit(embed, beam):
  model, variables = embed
  decode = lambda v, n: (
    layout_decode.greedy_decode(model, v, BATCH, n)
    if beam is None
    else layout_decode.beam_decode(model, v, BATCH, n, beam_size=beam)
  )
  np.testing.assert_array_equal(decode(_with_head_bias(variables, EOS), 7), [[EOS] + [PAD] * 6] * B)
  np.testing.assert_array_equal(decode(_with_head_bias(variables, 5), 4), np.full((B, 4), 5))
  with pytest.raises(ValueError, match="max_len"):
    decode(variables, 8)  # caption_len 8: at most 7 tokens
  # PAD and <bos> are never generated, however likely: the next most likely token is
  never = _with_head_bias(_with_head_bias(_with_head_bias(variables, PAD), BOS, 9e3), 5, 8e3)
  np.testing.assert_array_equal(decode(never, 4), np.full((B, 4), 5))


class Scripted(layout.LayoutCaptioner):
  """Logits that spell `SCRIPT` by position, whatever the inputs."""

  def decode(self, memory, padding, caption_inputs, *, train):
    script = jnp.asarray([5, 6, 7, EOS, 8, 9, 10])[: caption_inputs.shape[1]]
    logits = 10.0 * jax.nn.one_hot(script, V)
    return jnp.broadcast_to(logits, (*caption_inputs.shape, V))


@pytest.mark.parametrize("beam", [None, 1, 4])
def test_decoding_ends_at_the_first_eos(beam):
  model = Scripted(caption_vocab=V, text_vocab=10, num_types=5, **SMALL)
  variables = _init(model)
  run = jax.jit(
    lambda v, n=7: (
      layout_decode.greedy_decode(model, v, BATCH, n)
      if beam is None
      else layout_decode.beam_decode(model, v, BATCH, n, beam_size=beam)
    )
  )
  np.testing.assert_array_equal(run(variables), [[5, 6, 7, EOS, PAD, PAD, PAD]] * B)


def test_greedy_equals_beam_with_one_beam(embed):
  model, variables = embed
  params = nn.unbox(variables["params"])
  kernel = params["head"]["kernel"]
  params["head"]["kernel"] = 3.0 * jax.random.normal(jax.random.key(9), kernel.shape)
  variables = {**variables, "params": params}  # logits that vary with the inputs
  greedy = jax.jit(lambda v: layout_decode.greedy_decode(model, v, BATCH, 7))(variables)
  beam = layout_decode.beam_decode(model, variables, BATCH, 7, beam_size=1, length_penalty=0.0)
  np.testing.assert_array_equal(greedy, beam)
  assert len(np.unique(np.asarray(greedy))) > 2  # a real caption, not one repeated token


def test_embed_4d_rows_of_absent_bins_get_zero_gradient_and_keep_their_init():
  config = _config("posemb=embed_nd,small=1")
  task = tasks.get(config.task)
  model = task.create_model(config)
  batch = {**BATCH, "captions": jnp.ones((B, 2, 12), jnp.int32).at[:, :, 1:].set(7)}
  init = jax.jit(lambda rng: task.init_variables(model, rng, batch))
  variables = init(jax.random.key(0))
  params = nn.unbox(variables["params"])

  def loss(p):
    rng = jax.random.key(1)
    outputs = task.forward(model, {**variables, "params": p}, batch, train=True, rng=rng)
    return task.loss(outputs, batch)[0]

  full = jax.jit(jax.grad(loss))(params)
  grads = full["box_encoding"]
  present = np.zeros((100, 4), bool)  # [bin, side]
  boxes = np.asarray(BATCH["boxes"])
  for i, n in enumerate(np.asarray(BATCH["num_objects"])):
    present[boxes[i, :n], np.arange(4)] = True
  tx, _ = make_optimizer(config)  # Adam without weight decay

  @jax.jit
  def second_step(p, g):  # the first has learning rate 0 (warmup)
    _, state = tx.update(g, tx.init(p), p)
    return optax.apply_updates(p, tx.update(g, state, p)[0])

  new = second_step(params, full)["box_encoding"]
  for side in range(4):
    table, seen = f"table_{side}", present[:, side]
    g, old = np.asarray(grads[table]), np.asarray(params["box_encoding"][table])
    assert not g[~seen].any() and np.abs(g[seen]).sum(1).all()
    np.testing.assert_array_equal(new[table][~seen], old[~seen])
    assert (np.asarray(new[table][seen]) != old[seen]).any(1).all()


@pytest.mark.parametrize(
  ("kwargs", "field"),
  [
    (dict(width=0), "model.width"),
    (dict(num_heads=3), "model.num_heads"),
    (dict(dropout=1.5), "model.dropout"),
    (dict(caption_len=1), "model.caption_len"),
    (dict(dtype="float64"), "model.dtype"),
    (dict(posemb="rel_bias_2d"), "model.posemb"),
    (dict(posemb="embed_1d"), "model.posemb"),
    (dict(posemb="detr_sine"), "model.posemb"),
    (dict(posemb="fourier(groups=3)"), "model.posemb"),
    (dict(posemb="not_an_encoding"), "model.posemb"),
    (dict(colour=1), "model.colour"),
    (dict(variant="huge"), "model.variant"),
  ],
)
def test_bad_fields_fail_with_the_field_name(kwargs, field):
  with pytest.raises(ValueError, match=field):
    _model(**kwargs)


def test_long_caption_inputs_fail_naming_caption_len(embed):
  model, variables = embed
  with pytest.raises(ValueError, match="caption_len"):
    model.apply(variables, *_args(), jnp.zeros((B, 8), jnp.int32), train=False)
