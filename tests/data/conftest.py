"""Shared fixtures: one digits and one widget_caption build per test session, a 4x2
('data', 'model') mesh."""

import os

import jax
import pytest
from widget_caption_download import write_manual

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


@pytest.fixture(scope="session")
def widget_caption_dir(tmp_path_factory) -> str:
  """A data_dir with the fake manual download and `widget_caption/full` built from it."""
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  write_manual(os.path.join(data_dir, "downloads", "manual", "widget_caption"))
  data_lib.prepare("widget_caption/full", data_dir)
  return data_dir
