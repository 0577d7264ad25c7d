"""Reading, counting and moving the position parameters of a ViT."""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import tasks
from lfpe.models import vit
from lfpe.studies import positions, sweep
from lfpe.train.optim import param_name


def _study_model(config):
  """The ViT the study trains for `config`: built from `sweep.trainer_config` by the task, as
  the trainer builds it (`direction` reads no data to configure)."""
  settings = sweep.trainer_config(config, sweep.TrainSpec(), [0], "/unused")
  return tasks.get(settings.task).create_model(settings)


def _init(model, seeds, image_shape):
  """Parameters of `model` for every seed, `[S, ...]` leaves."""
  example = jnp.zeros((1, *image_shape), jnp.float32)
  init = lambda key: nn.meta.unbox(model.init(key, example, train=False)["params"])
  return jax.vmap(init)(jnp.stack([jax.random.key(s) for s in seeds]))


def _model(posemb, **kw):
  cfg = dict(variant="mu/4", width=16, num_heads=2, mlp_dim=32, posemb=posemb, **kw)
  return vit.Model(2, image_size=12, **cfg)  # a 3x3 grid


def test_learned_table_is_the_parameter():
  model = _model("embed_1d")
  params = _init(model, [0, 1], (12, 12, 3))
  tables = positions.tables(model, params)
  assert tables.shape == (2, 9, 16)
  np.testing.assert_array_equal(tables, params["Transformer"]["pos"]["encoding"]["table"])


def test_sine_table_follows_eq1():
  model = _model("sine_2d")
  params = _init(model, [0], (12, 12, 3))
  table = positions.tables(model, params)[0]  # [9, 16]
  # Every (sin, cos) pair of one frequency has unit norm: D / 2 pairs in a row.
  np.testing.assert_allclose(np.sum(table**2, -1), 8.0, rtol=1e-5)
  np.testing.assert_allclose(np.sort(table[0]), [0.0] * 8 + [1.0] * 8, atol=1e-6)  # (0, 0)
  assert not np.allclose(table[1], table[3])  # (0, 1) and (1, 0) differ
  assert positions.count(params) == 16  # only the class-token row is a parameter


def test_counts_by_hand():
  params = _init(_model("embed_1d"), [0], (12, 12, 3))
  assert positions.count(params) == 9 * 16 + 16  # table + class-token row
  params = _init(_model("embed_1d", pos_injection="every_layer", depth=2), [0], (12, 12, 3))
  assert positions.count(params) == 2 * (9 * 16 + 16)
  fourier = _model("fourier(fourier_dim=8, hidden_dim=4)")
  params = _init(fourier, [0], (12, 12, 3))
  assert positions.count(params) == (4 * 2) + (8 * 4 + 4) + (4 * 16 + 16) + 16


def test_relative_encodings_have_no_table():
  model = _model("rel_attn_2d")
  params = _init(model, [0], (12, 12, 3))
  with pytest.raises(ValueError, match="absolute"):
    positions.tables(model, params)


@pytest.mark.parametrize("injection", ["stem", "every_layer"])
def test_the_position_patterns_split_the_parameters(injection):
  """`sweep.POSITIONS` (init_skip / optim.trainable of the refit and the pretrained rows)
  names exactly the position parameters, `sweep.NOT_POSITIONS` exactly the others."""
  params = _init(_model("fourier", pos_injection=injection, depth=2), [0], (12, 12, 3))
  names = [param_name(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  own = [n for n in names if n.startswith("params/Transformer/pos")]
  assert own and len(own) < len(names)
  assert [n for n in names if re.search(sweep.POSITIONS, n)] == own
  assert [n for n in names if re.search(sweep.NOT_POSITIONS, n)] == [
    n for n in names if n not in own
  ]


@pytest.mark.parametrize("posemb", ["embed_1d", "embed_2d", "fourier", "gabor_edge"])
def test_study_initialisation_makes_the_position_signal_visible(posemb):
  """The study's `POSITION_INIT` makes position tables vary 5-10x more across positions."""

  def spread(config):
    model = _study_model(config)
    table = positions.tables(model, _init(model, [0, 1], (32, 32, 3)))
    return np.linalg.norm(table - table.mean(1, keepdims=True), axis=-1).mean()

  before = spread(sweep.Config("direction", posemb, position_init={}))
  after = spread(sweep.Config("direction", posemb))
  assert before < 0.2  # lfpe's defaults: lost next to a square's patch (norm ~3)
  assert 5 * before < after < 2.0  # fourier 0.04 -> 0.22, tables and gabor_edge 0.11 -> 1.1


def test_study_models_use_the_study_initialisation():
  """Which option reaches which encoding, and the non-zero classifier (fails if dropped)."""
  expected = {
    "embed_1d": "embed_1d(init_std=0.2)",
    "rel_bias_2d": "rel_bias_2d(init_std=0.2)",
    "fourier": "fourier(out_init_std=1.0)",
    "fixed_fourier_mlp": "fixed_fourier_mlp(out_init_std=1.0)",
    "gabor_edge": "gabor_edge(w_std=0.2)",
    "sine_2d": "sine_2d",
    "rel_attn_2d": "rel_attn_2d",
  }
  for posemb, spec in expected.items():
    model = _study_model(sweep.Config("direction", posemb))
    assert model.posemb == spec and model.head_init_std == 0.2
  params = _init(_study_model(sweep.Config("direction", "none")), [0], (32, 32, 3))
  assert 0.1 < np.asarray(params["head"]["kernel"]).std() < 0.3
  options = sweep.Config("direction", "fourier(gamma=0.5)").model_config()["posemb"]
  assert options == "fourier(gamma=0.5, out_init_std=1.0)"
