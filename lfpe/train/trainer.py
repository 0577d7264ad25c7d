"""The trainer: one story from config to trained, evaluated, checkpointed model.

1. Validate the config (before anything is built or compiled).
2. Mesh: ('data', 'model') devices; logical-axis rules (tensor parallel, FSDP).
3. Data: per-process loaders whose batches are global arrays sharded over 'data' (with
   `config.seeds`, one loader per seed and a seed axis on state and batch: lfpe.train.seeds).
4. Model and optimizer, from the task (lfpe/tasks) and config.optim/schedule.
5. Sharded state layout: `jax.eval_shape` of init gives shapes and logical axes,
   the rules turn them into NamedShardings; `jax.jit(train_step,
   donate_argnums=0)` and `jax.jit(eval_step)` with those shardings. Steps 4-5
   are `program.build` (shared with the benchmarks, which compile without data); the
   evaluations (the config's own and `config.evals`) are `evaluation.build`.
6. Restore the newest readable checkpoint (state and data position), possibly
   written on another mesh; otherwise `jax.jit(init, out_shardings=...)` builds the
   state directly in place on the devices (its parameters from `config.init_from` if
   set). A workdir already trained to `total_steps` is complete: its results are
   returned and left as they are.
7. Loop: step, log, evaluate (each evaluation at its period), checkpoint; stop on a
   non-finite loss; Ctrl-C stops at a step boundary, SIGTERM (a preemption notice) saves a
   checkpoint there first (lfpe.train.stopping).

Config problems raise lfpe.errors.ConfigError (a ValueError), unreadable checkpoints
WorkdirError, a missing dataset DatasetMissingError: `python -m lfpe.main` prints these
without a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

from lfpe.errors import ConfigError, UserError, WorkdirError
from lfpe.train import (
  checkpoint,
  evaluation,
  init_from,
  optim,
  program,
  seeds,
  sharding,
  stopping,
  validate,
)
from lfpe.train import workdir as workdir_lib
from lfpe.train.metrics import MetricWriter, final_line, read_row, report_interval

LoaderFn = Callable[..., Any]


class NonFiniteLossError(UserError, FloatingPointError):
  """The training loss became NaN or infinite; the run stopped (the message says what to try)."""


def default_loader(data_config: Any, **kwargs: Any) -> Any:
  """lfpe.data's loader (imported late: tests pass their own in-memory loaders)."""
  from lfpe.data import pipeline  # noqa: PLC0415

  return pipeline.make_loader(data_config, **kwargs)


def train_and_evaluate(
  config: Any, workdir: str, *, make_loader: LoaderFn | None = None, devices: list | None = None
) -> dict[str, Any]:
  """Trains `config`'s model in `workdir` (resuming if it holds checkpoints).

  `make_loader(data_config, *, global_batch_size, seed, train, mesh)` makes the global
  batches (default: lfpe.data.make_loader; with `config.seeds` and `data.train_sizes`, a
  loader that takes `size_seed` gets it: the seed of every seed's batch sizes): for training
  an endless iterator with get_state/set_state, for eval an iterable of one pass with 'mask';
  `devices` restricts the mesh (default: all). Returns the final summary
  ({"step", "train": {...}, "eval": {...}}), also written to WORKDIR/summary.json.
  On a workdir already trained to `config.total_steps` it trains nothing and returns that
  summary unchanged; with a larger `config.total_steps` it trains on from the last checkpoint.
  """
  # 1. Config, and the model it describes (`config.model` is checked once, as it is built);
  # the workdir must be writable and, if it holds checkpoints, trained with a compatible config.
  devices = list(jax.devices() if devices is None else devices)
  task, model = checked_task_and_model(config, len(devices), check_data=make_loader is None)
  make_loader = make_loader or default_loader
  workdir_lib.prepare(workdir)
  workdir_lib.check_compatible(config, workdir)
  if not workdir_lib.has_checkpoints(workdir):  # a resumed run never reads its source again
    init_from.check_source(config)
  warmup = optim.clipped_warmup(config.schedule, config.total_steps)
  if warmup != config.schedule.warmup_steps:
    logging.warning(
      "config.schedule.warmup_steps=%d does not fit config.total_steps=%d: warmup is clipped "
      "to %d steps.",
      config.schedule.warmup_steps,
      config.total_steps,
      warmup,
    )

  # 2. Mesh; batches split over its 'data' axis.
  mesh = sharding.make_mesh(config.mesh, devices)
  data_sharding = sharding.batch_sharding(mesh)

  # 3. Data.
  train_iter = seeds.train_loader(make_loader, config, data_sharding)  # one per seed (S > 0)

  # 4-5. Model, optimizer, sharded state layout (`jax.eval_shape` of init, logical axes ->
  # NamedShardings) and the jitted steps (train_step donates the state): see program.py.
  prog = program.build(config, mesh, task=task, model=model)
  evaluations = evaluation.build(prog, config, make_loader, data_sharding)  # `eval`, `evals`

  # 6. Restore the newest readable checkpoint onto this mesh, or initialise in place.
  target = checkpoint.with_shardings(prog.abstract_state, prog.state_shardings)
  keep, async_save = config.keep_checkpoints, config.get("async_checkpoints", True)
  with (
    checkpoint.make_manager(workdir, keep=keep, async_save=async_save) as manager,
    _closed_at_exit(train_iter),  # its workers (`data.worker_count` > 0) start in this block
  ):
    reset_data = config.get("reset_data_position", False)
    restored = checkpoint.restore_latest(manager, target, train_iter, reset_data=reset_data)
    start_step, state = restored if restored else (0, prog.init_state())
    headline = getattr(prog.task, "HEADLINE", None)
    if start_step >= config.total_steps:  # Complete: its metrics and summary stay as they are.
      summary = _finished_summary(workdir, start_step, config.total_steps)
      _print_final_line(summary, headline, workdir)
      return summary
    if jax.process_index() == 0:  # the record of what trains these checkpoints
      workdir_lib.write_record(config, workdir)

    # 7. The loop: step, log (stop on NaN), evaluate, checkpoint.
    writer = MetricWriter(
      workdir,
      total_steps=config.total_steps,
      start_step=start_step,
      progress=config.get("progress", True),
      report_every=report_interval(
        config.get("report_every", 0), config.total_steps, config.log_every
      ),
      is_main=jax.process_index() == 0,
    )
    start_time = time.perf_counter()
    with (
      writer,
      stopping.stop_requests() as stop_requested,
      stopping.preemption_notices() as preemption_reached,
    ):
      step = start_step + 1
      missed = _missed_at_start(evaluations, start_step, writer)
      for split, scores in evaluation.run_all(prog.task, missed, state.eval_variables()).items():
        writer.write(start_step, split, scores)
      try:
        for step in range(start_step + 1, config.total_steps + 1):
          state, metrics = prog.step_at(step)(state, next(train_iter), prog.dropout_rng)
          last = step == config.total_steps
          preempted = preemption_reached(step)  # every step, on every process
          saving = step % config.checkpoint_every == 0 or last or preempted
          if step % config.log_every == 0 or saving:  # Never save a state not known finite.
            metrics = {**jax.device_get(metrics), "steps_per_s": writer.rate(step)}
            values = writer.write(step, "train", metrics)
            _check_finite(values, step, manager)
            writer.advance(step, loss=values["loss"])
          stopping_now = preempted and not last  # the grace period goes to the save alone
          due = [ev for ev in evaluations if (step % ev.every == 0 and not stopping_now) or last]
          for split, scores in evaluation.run_all(prog.task, due, state.eval_variables()).items():
            values = writer.write(step, split, scores)
            if split == "eval":
              writer.advance(step, eval_accuracy=values.get("accuracy", math.nan))
          if saving:
            writer.sync()  # a remote workdir's metrics up to `step` are uploaded first
            checkpoint.save(manager, step, state, train_iter)
          writer.advance(step)
          if stopping_now:
            raise stopping.preempted(step, config.total_steps, manager)
          if stop_requested():
            raise KeyboardInterrupt
      except KeyboardInterrupt:
        raise stopping.interrupted(step, config.total_steps, manager) from None
      manager.wait_until_finished()
      wall_s = time.perf_counter() - start_time
      summary = writer.summary(config.total_steps, wall_s=wall_s, start_step=start_step)
  _print_final_line(summary, headline, workdir)
  return summary


@contextlib.contextmanager
def _closed_at_exit(loader: Any) -> Iterator[None]:
  """`loader`'s data workers stopped however the block ends, Ctrl-C and SIGTERM ignored
  meanwhile (cut short, the close would leave them running without a parent)."""
  try:
    yield
  finally:
    with stopping.shielded():
      seeds.close(loader)


def _print_final_line(summary: dict[str, Any], headline: str | None, workdir: str) -> None:
  """The run's last line (process 0): its step, headline eval metric and summary path."""
  if jax.process_index() == 0:
    print(final_line(summary, headline, workdir), file=sys.stderr, flush=True)


def checked_task_and_model(
  config: Any, num_devices: int, *, check_data: bool = True
) -> tuple[Any, Any]:
  """(task, model) of a checked `config`: its fields, then `config.model` as the model is
  built. The task is built once, here, and handed on (to `program.build`).

  Any of their ValueErrors becomes a ConfigError (a user error: `lfpe.main` exits 2).
  """
  try:
    task = validate.validate_config(config, num_devices=num_devices, check_data=check_data)
    return task, task.create_model(config)
  except ValueError as e:
    raise ConfigError(str(e)) from e


def evaluate(
  config: Any,
  workdir: str,
  *,
  make_loader: LoaderFn | None = None,
  devices: list | None = None,
  edit: Callable[[Any], Any] | None = None,
) -> dict[str, float]:
  """The task's metrics of the newest readable checkpoint in `workdir` on `config.data`'s
  eval data as it is now (e.g. another test split), with its variables passed through `edit`
  if given (e.g. an ablation); nothing is written."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.evals = {}
  return evaluate_all(config, workdir, make_loader=make_loader, devices=devices, edit=edit)["eval"]


def evaluate_all(
  config: Any,
  workdir: str,
  *,
  make_loader: LoaderFn | None = None,
  devices: list | None = None,
  edit: Callable[[Any], Any] | None = None,
  main: bool = True,
) -> dict[str, dict[str, float]]:
  """`{split: metrics}` of every evaluation of `config` (its own, `eval`, unless `main` is
  False: a finished run's summary holds it; and each of `config.evals`, `eval/NAME`:
  lfpe.train.evaluation) on the newest readable checkpoint in `workdir`, restored and placed
  once; nothing is written."""
  devices = list(jax.devices() if devices is None else devices)
  prog, variables = restore(config, workdir, devices=devices, check_data=make_loader is None)
  variables = (edit or (lambda v: v))(variables)
  evaluations = evaluation.build(
    prog, config, make_loader or default_loader, prog.data_sharding, main=main
  )
  return evaluation.run_all(prog.task, evaluations, variables)


def restore(
  config: Any, workdir: str, *, devices: list | None = None, check_data: bool = True
) -> tuple[program.Program, Any]:
  """The program of `config` and the model variables of the newest readable checkpoint."""
  devices = list(jax.devices() if devices is None else devices)
  task, model = checked_task_and_model(config, len(devices), check_data=check_data)
  mesh = sharding.make_mesh(config.mesh, devices)
  prog = program.build(config, mesh, task=task, model=model)
  target = checkpoint.with_shardings(prog.abstract_state, prog.state_shardings)
  keep = config.keep_checkpoints
  with checkpoint.make_manager(workdir, keep=keep, async_save=False, read_only=True) as manager:
    restored = checkpoint.restore_latest(manager, target, None, read_only=True)  # no data
  if restored is None:
    raise WorkdirError(f"{workdir} holds no checkpoint to evaluate; train it first.")
  return prog, restored[1].eval_variables()


def _finished_summary(workdir: str, step: int, total_steps: int) -> dict[str, Any]:
  """The summary of a workdir already trained to `step` >= `total_steps`; nothing is retrained.

  summary.json is returned as it is; if it is missing or older than `step` (the run
  stopped between its last checkpoint and the summary), it is rebuilt from metrics.jsonl.
  """
  logging.warning(
    "%s is already trained to step %d (config.total_steps=%d): the run is complete, its "
    "results are left as they are. Raise config.total_steps to train further.",
    workdir,
    step,
    total_steps,
  )
  path = epath.Path(workdir) / "summary.json"
  try:
    summary = json.loads(path.read_text()) if path.exists() else {}
  except ValueError:  # cut short by a kill (runs before summaries were written atomically)
    summary = {}
  if summary.get("step") == step:
    return summary
  summary = {"step": step}
  metrics = epath.Path(workdir) / "metrics.jsonl"
  if not metrics.exists():  # e.g. the checkpoints copied without the run's other files
    raise WorkdirError(
      f"{workdir} is trained to step {step} but holds neither summary.json nor metrics.jsonl "
      "to report it; score its checkpoint with `lfpe.train.trainer.evaluate`, or raise "
      "config.total_steps to train on."
    )
  for line in metrics.read_text().splitlines():
    record = read_row(line)
    if record is None:
      continue  # a line a kill cut short
    if record.pop("step") <= step:
      summary[record.pop("split")] = record  # the last record of each split
  if jax.process_index() == 0:
    workdir_lib.write_atomically(path, json.dumps(summary, indent=2))
  return summary


def _missed_at_start(evaluations: list, start_step: int, writer: MetricWriter) -> list:
  """The evaluations due at `start_step` that its metrics lack: a preempted run gives its
  grace period to the save and evaluates nothing at that step, so its resumed run evaluates
  first (process 0 reads metrics.jsonl, `MetricWriter.splits_at_start`; every process runs
  what it found)."""
  due = [ev for ev in evaluations if start_step and start_step % ev.every == 0]
  if not due:
    return []
  missing = np.array([ev.split not in writer.splits_at_start for ev in due])
  if jax.process_count() > 1:
    missing = multihost_utils.broadcast_one_to_all(missing)
  return [ev for ev, miss in zip(due, missing, strict=True) if miss]


def _check_finite(values: dict[str, float], step: int, manager: Any) -> None:
  """Stops the run on a NaN/inf loss or parameters (a finite loss can still take a NaN
  update, from a NaN gradient), before the step is saved: the checkpoints stay all finite."""
  if math.isfinite(values["loss"]) and math.isfinite(values.get("param_norm", 0.0)):
    return
  manager.wait_until_finished()
  last = manager.latest_step()
  kept = "no checkpoint was written yet"
  if last is not None:
    kept = f"the last good checkpoint is step {last} in {manager.directory}"
  start = f" (--config.init_from={manager.directory.parent} to start from it)" * (last is not None)
  what = f"Training loss is {values['loss']}"
  if math.isfinite(values["loss"]):
    what = (
      f"The parameters' norm is {values['param_norm']} after a finite loss: a non-finite "
      "update (e.g. a NaN gradient)"
    )
  raise NonFiniteLossError(
    f"{what} at step {step}: stopping; {kept}. Lower "
    "config.optim.lr, set config.optim.grad_clip_norm, or lengthen "
    "config.schedule.warmup_steps, in a new --workdir (this one keeps its config)" + start + "."
  )
