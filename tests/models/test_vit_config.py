"""A config becomes a model in one call, checked once; every encoding through the CLI path."""

import functools
import glob
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import encodings, tasks
from lfpe.main import split_overrides
from lfpe.models import vit
from lfpe.nn.positions import PositionSource
from lfpe.nn.transformer import Encoder
from lfpe.train import config_cli

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CONFIGS = sorted(
  os.path.basename(f)[:-3] for f in glob.glob(os.path.join(ROOT, "configs", "[!_]*.py"))
)


def _cli_config(name: str, *overrides: str):
  """The config that `python -m lfpe.main --config=configs/NAME.py:small=1 OVERRIDES` reads."""
  _, pairs = split_overrides(list(overrides))
  return config_cli.load(f"{os.path.join(ROOT, 'configs', name)}.py:small=1", pairs)


def _rejects(family: str, posemb: str) -> bool:
  """Whether model family `family` refuses encoding `posemb` (ViT takes every encoding;
  DETR, the Reformer and the layout captioner add positions to tokens: absolute only, or
  `none`, the no-position control every family offers)."""
  if family == "vit" or posemb == "none":
    return False
  reads_boxes = encodings.info(posemb).reads_boxes  # declared with the encoding
  return encodings.kind(posemb) != "absolute" or (family == "layout" and not reads_boxes)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("posemb", encodings.NAMES)
def test_every_encoding_through_the_command_line(name, posemb):
  """`--config.model.posemb=NAME` on every shipped config gives a model that traces, or a
  ValueError naming `model.posemb` where the family cannot use that encoding."""
  config = _cli_config(name, f"--config.model.posemb={posemb}")
  assert config.model.posemb == posemb
  task = tasks.get(config.task)
  if _rejects(config.model_name, posemb):
    with pytest.raises(ValueError, match="model.posemb"):
      task.create_model(config)
    return
  model = task.create_model(config)
  batch = task.example_batch(config)
  init = functools.partial(task.init_variables, model)
  variables = jax.eval_shape(init, jax.random.key(0), batch)
  outputs = jax.eval_shape(
    lambda v, b: task.forward(model, v, b, train=True, rng=jax.random.key(1)), variables, batch
  )
  assert jax.eval_shape(task.loss, outputs, batch)[0].shape == ()


def test_encoding_options_override_from_the_command_line():
  config = _cli_config("vit_digits", "--config.model.posemb=fourier(gamma=0.5, hidden_dim=8)")
  model = tasks.get(config.task).create_model(config)
  assert encodings.parse(model.posemb) == ("fourier", {"gamma": 0.5, "hidden_dim": 8})


def test_a_config_is_checked_once(monkeypatch):
  """Building a ViT from a config, initialising and applying it runs each check once."""
  calls = {}

  def counting(cls):
    original = cls.check

    def check(self):
      calls[cls.__name__] = calls.get(cls.__name__, 0) + 1
      original(self)

    monkeypatch.setattr(cls, "check", check)

  for cls in (vit.ViT, encodings.LearnableFourierMLP, Encoder, PositionSource):
    counting(cls)
  config = _cli_config("vit_digits")
  model = tasks.get(config.task).create_model(config)
  images = jnp.zeros((2, 16, 16, 3))
  variables = model.init(jax.random.key(0), images, train=False)
  jax.jit(functools.partial(model.apply, train=False))(variables, images)
  model.apply(variables, images, train=True, rngs={"dropout": jax.random.key(1)})
  assert calls == {"ViT": 1, "LearnableFourierMLP": 1, "Encoder": 1, "PositionSource": 1}


def test_children_of_user_modules_are_checked():
  """A `Checked` module inside a user's own module still checks its fields."""

  class UserModel(nn.Module):
    @nn.compact
    def __call__(self, x):
      return encodings.create("fourier", dim=6, groups=4)(x)

  with pytest.raises(ValueError, match="dim"):
    UserModel().init(jax.random.key(0), jnp.zeros((3, 4, 1)))


def test_dropout_rates_reach_their_layers():
  """`dropout` feeds the residual, MLP and embedding dropouts; `attention_dropout` the
  attention weights (a swap of the two would fail here)."""
  model = vit.Model(3, image_size=8, variant="mu/4", depth=2, dropout=0.1, attention_dropout=0.3)
  images = jnp.asarray(np.random.default_rng(0).normal(size=(2, 8, 8, 3)), jnp.float32)
  variables = model.init(jax.random.key(0), images, train=False)
  rates = {}

  def record(next_fun, args, kwargs, context):
    if isinstance(context.module, nn.Dropout):
      rates["/".join(context.module.scope.path)] = context.module.rate
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(record):
    model.apply(variables, images, train=True, rngs={"dropout": jax.random.key(1)})
  attention = {p: r for p, r in rates.items() if "/attention/" in p}
  others = {p: r for p, r in rates.items() if "/attention/" not in p}
  assert len(attention) == 2 and set(attention.values()) == {0.3}  # one per block
  assert len(others) >= 7 and set(others.values()) == {0.1}
