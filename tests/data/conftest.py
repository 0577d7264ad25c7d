"""Shared fixtures: one digits build per test session, a 4x2 ('data', 'model') mesh."""

import jax
import pytest

from lfpe import data as data_lib


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory) -> str:
  """A data_dir holding the digits dataset, built once (about a second)."""
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data_lib.prepare("digits", data_dir)
  return data_dir


@pytest.fixture(scope="session")
def mesh() -> jax.sharding.Mesh:
  auto = jax.sharding.AxisType.Auto
  return jax.make_mesh((4, 2), ("data", "model"), axis_types=(auto, auto))


@pytest.fixture
def digits_config(digits_dir):
  config = data_lib.default_config("digits")
  config.data_dir = digits_dir
  return config
