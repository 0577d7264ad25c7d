"""The trainer end to end on TinyModel and in-memory blobs (see train_fixtures.py).

Sharding (1 device vs 8), determinism, resume onto another mesh, NaN stop, metric files.
"""

import functools
import json
import math
import os
import shutil
import signal
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from train_fixtures import Interrupted, digits_small, make_array_loader, tiny_config

from lfpe.train import checkpoint, optim, program, sharding, stopping, trainer

KEYS = ("loss", "accuracy", "lr", "grad_norm", "param_norm")


def _run(workdir, devices=None, stop_after=None, **overrides):
  config = tiny_config(**overrides)
  loader = functools.partial(make_array_loader, stop_after=stop_after)
  return trainer.train_and_evaluate(config, str(workdir), make_loader=loader, devices=devices)


def _records(workdir, split="train"):
  with open(workdir / "metrics.jsonl") as f:
    lines = [json.loads(line) for line in f]
  return {x["step"]: x for x in lines if x["split"] == split}


def _losses(workdir):
  return np.array([r["loss"] for _, r in sorted(_records(workdir).items())])


def _checkpoint_params(workdir, step):
  path = (workdir / "checkpoints" / str(step) / "state").absolute()
  return ocp.StandardCheckpointer().restore(path)["params"]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
  """20 steps on one device: the reference run."""
  workdir = tmp_path_factory.mktemp("single")
  return workdir, _run(workdir, devices=jax.devices()[:1], **{"mesh.data": 1})


@pytest.mark.parametrize("fsdp", [False, True])
def test_eight_devices_match_one(tmp_path, single, fsdp):
  _run(tmp_path, **{"mesh.data": 4, "mesh.model": 2, "mesh.fsdp": fsdp})
  reference = _losses(single[0])
  assert len(reference) == 20 and reference[-1] < 0.5 * reference[0]  # it learns
  np.testing.assert_allclose(_losses(tmp_path), reference, rtol=1e-5)
  assert _records(tmp_path, "eval")[20]["accuracy"] == single[1]["eval"]["accuracy"]


def test_same_seed_same_metrics_other_seed_differs(tmp_path, single):
  _run(tmp_path / "again", devices=jax.devices()[:1], **{"mesh.data": 1})
  first, again = _records(single[0]), _records(tmp_path / "again")
  assert [[r[k] for k in KEYS] for r in first.values()] == [
    [r[k] for k in KEYS] for r in again.values()
  ]
  _run(tmp_path / "seed1", devices=jax.devices()[:1], **{"mesh.data": 1, "seed": 1})
  assert not np.allclose(_losses(tmp_path / "seed1"), _losses(single[0]))


def test_interrupted_run_resumes_on_another_mesh(tmp_path, single):
  with pytest.raises(Interrupted):
    _run(tmp_path, stop_after=15, **{"mesh.data": 4, "mesh.model": 2})
  assert max(_records(tmp_path)) == 15
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["10"]
  summary = _run(tmp_path, devices=jax.devices()[:1], **{"mesh.data": 1})
  assert sorted(_records(tmp_path)) == list(range(1, 21))  # lines 11..15 replaced
  np.testing.assert_allclose(_losses(tmp_path), _losses(single[0]), rtol=1e-5)
  assert summary["eval"]["accuracy"] == single[1]["eval"]["accuracy"]


def test_nan_loss_stops_and_keeps_the_last_finite_checkpoint(tmp_path):
  overrides = {"data.nan_after": 12, "checkpoint_every": 5, "log_every": 4}
  # A lower rate is a changed config, which this workdir refuses: the advice is a new one.
  advice = rf"in a new --workdir .*--config.init_from={tmp_path} to start from it"
  with pytest.raises(
    trainer.NonFiniteLossError,
    match=rf"loss is nan at step 15.*last good checkpoint is step 10.*{advice}",
  ):
    _run(tmp_path, **overrides)
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["10", "5"]
  params = _checkpoint_params(tmp_path, 10)
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))
  assert not (tmp_path / "summary.json").exists()


def test_a_nan_update_under_a_finite_loss_stops_before_its_checkpoint(tmp_path):
  """Batch 9's gradient is NaN, its loss finite: step 10's parameters are NaN and would have
  been saved (and step 5, the only finite one kept, deleted)."""
  overrides = {"task.name": "tiny_nan_grad", "data.zero_at": 9, "checkpoint_every": 5}
  with pytest.raises(
    trainer.NonFiniteLossError,
    match=r"parameters' norm is nan after a finite loss.* step 10.*last good checkpoint is step 5",
  ):
    _run(tmp_path, **overrides, keep_checkpoints=1, log_every=5)
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["5"]
  params = _checkpoint_params(tmp_path, 5)
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))


def test_metric_files(single):
  workdir, summary = single
  train, evals = _records(workdir), _records(workdir, "eval")
  assert sorted(train) == list(range(1, 21)) and sorted(evals) == [10, 20]
  assert set(KEYS) | {"steps_per_s"} <= set(train[20])
  assert train[1]["lr"] == 0.0 and train[5]["lr"] == pytest.approx(1e-2)  # warmup 4 steps
  assert evals[20]["count"] == 40 and evals[20]["accuracy"] >= 0.8
  on_disk = json.loads((workdir / "summary.json").read_text())
  strip = lambda record: {k: v for k, v in record.items() if k not in ("step", "split")}
  assert on_disk["step"] == 20 and on_disk["eval"] == summary["eval"] == strip(evals[20])
  assert on_disk["train"] == strip(train[20])
  assert any(p.name.startswith("events.out.tfevents") for p in (workdir / "tb").iterdir())
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["10", "20"]


def test_bfloat16_compute_keeps_float32_parameters(tmp_path, single):
  _run(tmp_path, devices=jax.devices()[:1], **{"mesh.data": 1, "compute_dtype": "bfloat16"})
  losses, reference = _losses(tmp_path), _losses(single[0])
  assert all(math.isfinite(x) for x in losses) and losses[-1] < 0.5 * losses[0]
  assert not np.array_equal(losses, reference)  # it did compute in bf16 ...
  np.testing.assert_allclose(losses[0], reference[0], rtol=0.05)  # ... close to float32
  dtypes = {x.dtype for x in jax.tree.leaves(_checkpoint_params(tmp_path, 20))}
  assert dtypes == {np.dtype("float32")}


def test_indivisible_sharding_fails_before_compiling(tmp_path):
  with pytest.raises(ValueError, match=r"mlp_in.*config.mesh.model"):
    _run(tmp_path, **{"mesh.data": 1, "mesh.model": 8, "model.width": 6})  # mlp 12 over 8
  assert not (tmp_path / "checkpoints").exists()


def test_vit_on_digits_eight_devices_match_one(tmp_path):
  """The real ViT and grain pipeline: heads and MLP split over 'model', batch over 'data'."""
  losses = {}
  for name, mesh, devices in [("one", (1, 1), jax.devices()[:1]), ("eight", (4, 2), None)]:
    config = digits_small()
    config.update(total_steps=20, log_every=1, eval_every=20, checkpoint_every=20, progress=False)
    config.data.data_dir = str(tmp_path / "data")
    config.mesh.update(data=mesh[0], model=mesh[1])
    trainer.train_and_evaluate(config, str(tmp_path / name), devices=devices)
    losses[name] = _losses(tmp_path / name)
  assert len(losses["one"]) == 20 and losses["one"][-1] < losses["one"][0]
  np.testing.assert_allclose(losses["eight"], losses["one"], rtol=1e-5)


def test_evaluate_all_scores_every_named_evaluation_with_one_restore(single):
  """`evaluate_all` re-scores the checkpoint on the config's own eval data (reproducing the
  run's final eval) and on each `config.evals` entry's data, as `evaluate` does on a config
  whose data is that entry's."""
  workdir, summary = single
  config, fewer = tiny_config(**{"mesh.data": 1}), tiny_config(**{"mesh.data": 1})
  with config.unlocked():
    config.evals = {"fewer": {"data": {"num_test": 24}}}
  with fewer.unlocked():
    fewer.data.num_test = 24
  kwargs = dict(make_loader=make_array_loader, devices=jax.devices()[:1])
  scores = trainer.evaluate_all(config, str(workdir), **kwargs)
  assert sorted(scores) == ["eval", "eval/fewer"]
  assert scores["eval"]["accuracy"] == summary["eval"]["accuracy"]
  assert scores["eval"] == trainer.evaluate(config, str(workdir), **kwargs)
  assert scores["eval/fewer"] == trainer.evaluate(fewer, str(workdir), **kwargs)
  assert scores["eval"]["count"] == 40 and scores["eval/fewer"]["count"] == 24
  named = trainer.evaluate_all(config, str(workdir), main=False, **kwargs)
  assert named == {"eval/fewer": scores["eval/fewer"]}  # the run's summary holds `eval`


def test_evaluate_writes_nothing(tmp_path, single, caplog):
  """A run may be training in the workdir, its next save in flight as a tmp folder, which
  the evaluation's checkpoint manager deleted; a mistyped workdir was created."""
  workdir = tmp_path / "copy"
  shutil.copytree(single[0], workdir)
  in_flight = workdir / "checkpoints" / "30.orbax-checkpoint-tmp"
  in_flight.mkdir()
  config = tiny_config(**{"mesh.data": 1})
  kwargs = dict(make_loader=make_array_loader, devices=jax.devices()[:1])
  assert (
    trainer.evaluate(config, str(workdir), **kwargs)["accuracy"] == single[1]["eval"]["accuracy"]
  )
  assert in_flight.is_dir()
  assert "read only" not in caplog.text  # orbax's note on the mode asked for: not shown
  with pytest.raises(trainer.WorkdirError, match="holds no checkpoint to evaluate"):
    trainer.evaluate(config, str(tmp_path / "typo"), **kwargs)
  assert not (tmp_path / "typo").exists()


def test_evaluations_of_the_same_data_share_one_loader_and_one_pass(single):
  """Evaluations whose data is equal (here the config's own and `same`; a resampling policy
  at one test size in the resolution benchmark) read one loader once and score each batch
  with each model: the scores are those of separate passes."""
  workdir, summary = single
  config = tiny_config(**{"mesh.data": 1})
  with config.unlocked():
    config.evals = {"same": {}, "fewer": {"data": {"num_test": 24}}}
  passes = []

  class Counted:
    def __init__(self, loader):
      self.loader = loader

    def __iter__(self):
      passes.append(self)
      return iter(self.loader)

  loader = lambda *a, **k: Counted(make_array_loader(*a, **k))
  scores = trainer.evaluate_all(config, str(workdir), make_loader=loader, devices=jax.devices()[:1])
  assert len(passes) == len(set(map(id, passes))) == 2  # {eval, same} once, fewer once
  assert (
    scores["eval/same"] == scores["eval"]
    and scores["eval"]["accuracy"] == summary["eval"]["accuracy"]
  )
  assert scores["eval/fewer"]["count"] == 24


def test_named_evaluations_run_while_training_at_their_own_period(tmp_path):
  """Each `config.evals` entry is its own metrics split, `eval/NAME`, at its `every` (0: the
  config's eval_every) and at the last step; the summary holds each."""
  config = tiny_config(**{"mesh.data": 1})
  with config.unlocked():
    config.evals = {"fewer": {"data": {"num_test": 24}, "every": 4}, "same": {}}
  summary = trainer.train_and_evaluate(
    config, str(tmp_path), make_loader=make_array_loader, devices=jax.devices()[:1]
  )
  records = [json.loads(r) for r in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  steps = lambda split: [r["step"] for r in records if r["split"] == split]
  assert steps("eval") == steps("eval/same") == [10, 20]
  assert steps("eval/fewer") == [4, 8, 12, 16, 20]
  assert summary["eval/fewer"]["count"] == 24 and summary["eval/same"] == summary["eval"]


@pytest.mark.parametrize(
  "evals, message",
  [
    ({"x": {"dat": {}}}, r"config.evals.x has no field 'dat' \(did you mean 'data'\?\)"),
    ({"x": {"data": {"num_tst": 3}}}, r"config.evals.x.data.num_tst: config.data has no field"),
    ({"x": {"every": -1}}, r"config.evals.x.every must be an integer >= 0"),
    ({"x": {"model": {"width": 6}}}, r"config.evals.x.model changes the model's parameters"),
  ],
)
def test_a_bad_named_evaluation_is_refused_naming_it(tmp_path, evals, message):
  config = tiny_config(**{"mesh.data": 1})
  with config.unlocked():
    config.evals = evals
  with pytest.raises(trainer.ConfigError, match=message):
    trainer.train_and_evaluate(
      config, str(tmp_path), make_loader=make_array_loader, devices=jax.devices()[:1]
    )
  assert not (tmp_path / "config.json").exists()  # refused before the run's record


def test_frozen_parameters_keep_their_initial_values(tmp_path):
  """`optim.trainable` through the whole trainer (boxed parameters, sharded state): only the
  head moves; a seeded run freezes every seed alike."""
  overrides = {"mesh.data": 1, "optim.trainable": ("^params/head/",), "seeds": 2}
  _run(tmp_path, devices=jax.devices()[:1], **overrides)
  config = tiny_config(**overrides)
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  initial = program.build(config, mesh).init_state().params
  final = _checkpoint_params(tmp_path, 20)
  for name in ("embed", "mlp_in", "mlp_out"):
    np.testing.assert_array_equal(final[name]["kernel"], initial[name]["kernel"])
  assert (np.abs(final["head"]["kernel"] - initial["head"]["kernel"]).max(axis=(1, 2)) > 0).all()


def test_mixup_reaches_the_train_step(tmp_path, single):
  """`config.task.cutmix_alpha` mixes every training batch inside the step: the first loss
  differs from the plain run's on the same batch and init; evaluation is untouched."""
  _run(tmp_path, devices=jax.devices()[:1], **{"mesh.data": 1, "task.cutmix_alpha": 1.0})
  mixed, plain = _records(tmp_path), _records(single[0])
  assert mixed[1]["loss"] != plain[1]["loss"] and all(
    math.isfinite(r["loss"]) for r in mixed.values()
  )


def test_ema_parameters_are_what_evaluations_score(tmp_path):
  """With `optim.ema_decay` the run's evaluations and `evaluate_all` score the moving average
  kept in the optimizer state, not the last parameters."""
  overrides = {"mesh.data": 1, "optim.ema_decay": 0.9}
  summary = _run(tmp_path, devices=jax.devices()[:1], **overrides)
  config = tiny_config(**overrides)
  prog, variables = trainer.restore(config, str(tmp_path), check_data=False)
  target = checkpoint.with_shardings(prog.abstract_state, prog.state_shardings)
  with checkpoint.make_manager(str(tmp_path), keep=3, async_save=False) as manager:
    _, state = checkpoint.restore_latest(manager, target, None)
  head = lambda params: np.asarray(params["head"]["kernel"])
  np.testing.assert_array_equal(head(variables["params"]), head(optim.ema_params(state.opt_state)))
  assert not np.allclose(head(variables["params"]), head(state.params))
  scores = trainer.evaluate_all(
    config, str(tmp_path), make_loader=make_array_loader, devices=jax.devices()[:1]
  )
  assert scores["eval"]["accuracy"] == summary["eval"]["accuracy"]


def test_the_training_loader_is_closed_however_the_run_ends(tmp_path):
  """Its data workers stop when the run finishes and when it fails (here on a NaN loss)."""
  closed = []

  def loader(data_config, **kwargs):
    batches = make_array_loader(data_config, **kwargs)
    if kwargs["train"]:
      batches.close = lambda: closed.append(kwargs["seed"])
    return batches

  run = functools.partial(trainer.train_and_evaluate, make_loader=loader, devices=jax.devices()[:1])
  run(tiny_config(total_steps=4, **{"mesh.data": 1}), str(tmp_path / "finished"))
  assert closed == [0]
  with pytest.raises(trainer.NonFiniteLossError):
    run(tiny_config(**{"mesh.data": 1, "data.nan_after": 2, "seed": 3}), str(tmp_path / "nan"))
  assert closed == [0, 3]


def test_a_further_ctrl_c_while_the_last_save_completes_is_ignored():
  """Ctrl-C once, then again while `stopping.interrupted` waits for a save in flight: the save still
  completes and the one line names it (the second Ctrl-C used to escape as an interrupt
  "before training started")."""

  class SavingManager:
    saved = None

    def wait_until_finished(self):
      os.kill(os.getpid(), signal.SIGINT)  # lands while the save is in flight
      time.sleep(0.05)  # a Python-level handler would run here
      self.saved = 10

    def latest_step(self):
      return self.saved

  # Python's own Ctrl-C handler, as in a terminal: a suite started in the background inherits
  # SIGINT ignored, and `stop_requests` then (rightly) installs nothing.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with stopping.stop_requests() as stop_requested:
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.05)
      assert stop_requested()
      message = str(stopping.interrupted(12, 100, SavingManager()))
  finally:
    signal.signal(signal.SIGINT, previous)
  assert message.endswith("resume from checkpoint step 10."), message
