"""Config arguments ("posemb=fourier,small=1") and the trainer's default fields."""

import pytest

from configs import vit_digits
from lfpe.train import config_lib, validate


def test_parse_arg_converts_to_the_defaults_types():
  arg = config_lib.parse_arg(
    "posemb=sine_nd, small=1,steps=30,lr=0.5", posemb="fourier", small=False, steps=10, lr=1.0
  )
  assert arg.to_dict() == {"posemb": "sine_nd", "small": True, "steps": 30, "lr": 0.5}
  assert config_lib.parse_arg(None, small=False).small is False
  assert config_lib.parse_arg("small", small=False).small is True  # bare key means 1
  assert config_lib.parse_arg("small=no", small=True).small is False


def test_a_whole_spec_is_one_config_argument():
  """Commas inside brackets or quotes belong to the value (they split it: 'unknown config
  argument hidden_dim'), and a config takes a whole spec, its own options over its defaults."""
  arg = config_lib.parse_arg(
    "posemb=fourier(gamma=0.5,hidden_dim=32),small,tag='a,b'", posemb="x", small=False, tag=""
  )
  assert arg.to_dict() == {"posemb": "fourier(gamma=0.5,hidden_dim=32)", "small": True,
                           "tag": "'a,b'"}  # fmt: skip
  config = vit_digits.get_config("posemb=fourier(gamma=0.5,hidden_dim=32),small=1")
  assert config.model.posemb == "fourier(gamma=0.5, hidden_dim=32)"
  assert vit_digits.get_config("posemb=embed_1d").model.posemb == "embed_1d"  # no γ: dropped


@pytest.mark.parametrize("arg", ["posemb=x),small=1", "posemb=it's,small=1", "posemb=f(a=1"])
def test_an_unbalanced_bracket_or_quote_is_refused(arg):
  """(it swallowed the arguments after it: small stayed False)"""
  with pytest.raises(ValueError, match="unbalanced bracket or quote"):
    config_lib.parse_arg(arg, posemb="x", small=False)


@pytest.mark.parametrize(
  "arg, message",
  [
    ("size=3", "unknown config argument 'size'"),
    ("small=maybe", "small='maybe' must be a boolean"),
    ("steps=ten", "steps='ten' must be of type int"),
  ],
)
def test_parse_arg_rejects(arg, message):
  with pytest.raises(ValueError, match=message):
    config_lib.parse_arg(arg, small=False, steps=1)


def test_base_config_has_every_trainer_field():
  config = config_lib.base_config()
  for path in validate.REQUIRED:
    if not path.startswith(("data", "model")):
      node = config
      for key in path.split("."):
        node = node[key]
