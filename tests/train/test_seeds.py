"""`config.seeds`: S runs as one vmapped program equal S plain runs, seed by seed.

TinyModel has dropout and a constant collection, and each seed its own data order, so every
per-seed key (init, dropout, data) is checked by comparing against the plain runs.
"""

import functools
import json

import jax
import numpy as np
import pytest
from train_fixtures import Interrupted, make_array_loader, tiny_config

from lfpe.errors import ConfigError
from lfpe.train import trainer

SEEDS = (3, 4)


def _run(workdir, devices=None, stop_after=None, **overrides):
  config = tiny_config(**overrides)
  loader = functools.partial(make_array_loader, stop_after=stop_after)
  return trainer.train_and_evaluate(config, str(workdir), make_loader=loader, devices=devices)


def _lines(workdir, split):
  with open(workdir / "metrics.jsonl") as f:
    return {r["step"]: r for r in map(json.loads, f) if r["split"] == split}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
  """Each seed of SEEDS as a plain run on one device: {seed: (workdir, summary)}."""
  out = {}
  for seed in SEEDS:
    workdir = tmp_path_factory.mktemp(f"seed{seed}")
    out[seed] = workdir, _run(workdir, jax.devices()[:1], seed=seed, **{"mesh.data": 1})
  return out


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("seeded")
  summary = _run(workdir, jax.devices()[:1], seed=SEEDS[0], seeds=len(SEEDS), **{"mesh.data": 1})
  return workdir, summary


def test_each_seed_trains_as_its_plain_run(plain, seeded):
  workdir, summary = seeded
  train = _lines(workdir, "train")
  assert sorted(train) == list(range(1, 21))
  for i, seed in enumerate(SEEDS):
    reference = _lines(plain[seed][0], "train")
    for key in ("loss", "grad_norm", "param_norm"):
      got = [train[s]["seeds"][key][i] for s in sorted(train)]
      want = [reference[s][key] for s in sorted(reference)]
      np.testing.assert_allclose(got, want, rtol=2e-5, err_msg=f"{key} of seed {seed}")
    for step, record in _lines(plain[seed][0], "eval").items():
      assert _lines(workdir, "eval")[step]["seeds"]["accuracy"][i] == record["accuracy"]
    assert summary["eval"]["seeds"]["accuracy"][i] == plain[seed][1]["eval"]["accuracy"]
  # The scalars are the means over seeds; the seeds differ from each other.
  losses = train[20]["seeds"]["loss"]
  np.testing.assert_allclose(train[20]["loss"], np.mean(losses), rtol=1e-6)
  assert losses[0] != losses[1]
  with open(workdir / "summary.json") as f:
    assert json.load(f)["eval"]["seeds"]["accuracy"] == summary["eval"]["seeds"]["accuracy"]


def test_seeds_on_eight_devices_with_tensor_parallelism(tmp_path, seeded):
  _run(tmp_path, seed=SEEDS[0], seeds=len(SEEDS), **{"mesh.data": 4, "mesh.model": 2})
  got, want = _lines(tmp_path, "train"), _lines(seeded[0], "train")
  for step in want:
    np.testing.assert_allclose(got[step]["seeds"]["loss"], want[step]["seeds"]["loss"], rtol=1e-5)


def test_interrupted_seeded_run_resumes_every_seed_where_it_stopped(tmp_path, seeded):
  overrides = dict(seed=SEEDS[0], seeds=len(SEEDS), **{"mesh.data": 1})
  with pytest.raises(Interrupted):
    _run(tmp_path, jax.devices()[:1], stop_after=15, **overrides)
  _run(tmp_path, jax.devices()[:1], **overrides)  # resumes from step 10
  got, want = _lines(tmp_path, "train"), _lines(seeded[0], "train")
  assert sorted(got) == sorted(want)
  for step in want:
    np.testing.assert_allclose(got[step]["seeds"]["loss"], want[step]["seeds"]["loss"], rtol=1e-5)


def test_evaluate_all_gives_every_seed(seeded):
  workdir, summary = seeded
  config = tiny_config(seed=SEEDS[0], seeds=len(SEEDS), **{"mesh.data": 1})
  scores = trainer.evaluate_all(
    config, str(workdir), make_loader=make_array_loader, devices=jax.devices()[:1]
  )
  np.testing.assert_array_equal(scores["eval"]["accuracy"], summary["eval"]["seeds"]["accuracy"])


def test_a_changed_seed_count_cannot_resume(seeded):
  workdir, _ = seeded
  with pytest.raises(ConfigError, match=r"config.seeds: 2 -> 3"):
    _run(workdir, jax.devices()[:1], seed=SEEDS[0], seeds=3, **{"mesh.data": 1})


def test_a_negative_seed_count_is_refused(tmp_path):
  with pytest.raises(ConfigError, match=r"config.seeds"):
    _run(tmp_path, seeds=-1)


def test_a_named_evaluation_with_its_own_model_options_scores_every_seed(tmp_path):
  """An evaluation that changes a model option, not the parameters, under `seeds` (its check
  compared the seed-stacked state with one model's and fed it the stacked keys: it crashed
  before training)."""
  evals = {"no_dropout": {"model": {"dropout": 0.0}}}
  overrides = {"mesh.data": 1, "total_steps": 4, "model.dropout": 0.1, "evals": evals}
  summary = _run(tmp_path, jax.devices()[:1], seed=SEEDS[0], seeds=len(SEEDS), **overrides)
  assert len(summary["eval/no_dropout"]["seeds"]["accuracy"]) == len(SEEDS)
  np.testing.assert_array_equal(  # dropout is off in evaluation either way
    summary["eval/no_dropout"]["seeds"]["accuracy"], summary["eval"]["seeds"]["accuracy"]
  )
