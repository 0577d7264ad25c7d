"""The layout captioner's task on widget_caption: config, vocabulary, a step and its scores."""

import dataclasses
import importlib.util
import os

import jax
import numpy as np
import pytest

from lfpe import data as data_lib
from lfpe import tasks
from lfpe.data import screens as sc
from lfpe.data import widget_caption as wc

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.fixture
def data_dir(widget_caption_dir):
  """`widget_caption/full` built from the fake download, once a session (conftest.py)."""
  return widget_caption_dir


def _config_module():
  path = os.path.join(ROOT, "configs", "widget_caption.py")
  spec = importlib.util.spec_from_file_location("widget_caption_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _config_small():
  return _config_module().get_config("small=1")  # CI: the synthetic screens


def _widget_config(data_dir):
  config = _config_module().get_config("posemb=fourier")
  config.unlock()
  config.data.data_dir = data_dir  # the task's data_dir follows (a reference)
  config.model.update(width=32, num_heads=2, mlp_dim=64, encoder_depth=1, decoder_depth=1)
  config.task.update(beam_size=2, meteor=False)
  return config


def test_the_layout_captioner_trains_and_evaluates_on_it(data_dir, monkeypatch):
  """...and its captions are scored against the references as written ("add new item",
  where the training captions keep "new", the one training word)."""
  from lfpe.tasks import caption_metrics  # noqa: PLC0415 (pycocoevalcap: the test extra)

  scored = []
  score = caption_metrics.caption_scores
  monkeypatch.setattr(
    caption_metrics,
    "caption_scores",
    lambda references, *args, **kwargs: (
      scored.append(references) or score(references, *args, **kwargs)
    ),
  )
  config = _widget_config(data_dir)
  assert (config.data.name, config.task.data_dir) == ("widget_caption/full", data_dir)
  task = tasks.get(config.task)
  task.validate(config)
  model = task.create_model(config)
  assert (model.caption_vocab, model.text_vocab, model.num_types, model.bins) == (
    10_000,
    10_000,
    12,
    100,
  )
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
  loader = data_lib.make_loader(config.data, global_batch_size=2, seed=0, train=False, mesh=mesh)
  batch = next(iter(loader))  # the test split: two examples
  variables = task.init_variables(model, jax.random.key(0), batch)
  outputs = task.forward(model, variables, batch, train=True, rng=jax.random.key(1))
  loss, _ = task.loss(outputs, batch)
  assert np.isfinite(float(loss)) and float(loss) > 0
  sums = jax.device_get(
    task.eval_sums(task.forward(model, variables, batch, train=False, rng=None), batch)
  )
  for k in ("nll", "hits", "tokens", "count"):
    sums[k] = float(sums[k])
  metrics = task.finalize(sums)
  assert (metrics["count"], metrics["count_unseen"]) == (2, 1)
  assert np.isfinite(metrics["CIDEr"]) and np.isfinite(metrics["CIDEr_unseen"])
  expected = [["add new item", "add item"], ["go back", "previous"]]
  assert sorted(scored[0].values()) == expected  # the whole split, then seen and unseen


def test_task_needs_the_datas_vocabulary(data_dir):
  config = _widget_config(data_dir)
  task = tasks.get(config.task)
  assert task.vocabulary() == wc.vocabulary("widget_caption/full", data_dir)
  with pytest.raises(ValueError, match="config.task.data_name"):
    dataclasses.replace(task, data_dir="/elsewhere").validate(config)
  assert tasks.get(_config_small().task).vocabulary() == sc.CAPTION_VOCAB
