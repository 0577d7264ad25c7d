"""The trainer: one story from config to trained, evaluated, checkpointed model.

1. Validate the config (before anything is built or compiled).
2. Mesh: ('data', 'model') devices; logical-axis rules (tensor parallel, FSDP).
3. Data: per-process loaders whose batches are global arrays sharded over 'data'.
4. Model and optimizer, from the task (lfpe/tasks) and config.optim/schedule.
5. Sharded state: `jax.eval_shape` of init gives shapes and logical axes, the
   rules turn them into NamedShardings, `jax.jit(init, out_shardings=...)` builds
   the state directly in place on the devices.
6. Restore the latest checkpoint (state and data position), possibly written
   on another mesh; otherwise start from the fresh state.
7. `jax.jit(train_step, donate_argnums=0)`; `jax.jit(eval_step)`.
8. Loop: step, log, evaluate, checkpoint; stop on a non-finite loss.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from lfpe import tasks
from lfpe.train import checkpoint, optim, sharding, steps, validate
from lfpe.train.metrics import MetricWriter

LoaderFn = Callable[..., Any]


class NonFiniteLossError(FloatingPointError):
  """The training loss became NaN or infinite; the run stopped."""


def default_loader(data_config: Any, **kwargs: Any) -> Any:
  """lfpe.data's loader (imported late: tests pass their own in-memory loaders)."""
  from lfpe.data import pipeline  # noqa: PLC0415

  return pipeline.make_loader(data_config, **kwargs)


def train_and_evaluate(
  config: Any, workdir: str, *, make_loader: LoaderFn | None = None, devices: list | None = None
) -> dict[str, Any]:
  """Trains `config`'s model in `workdir` (resuming if it holds checkpoints).

  `make_loader(data_config, *, global_batch_size, seed, train, mesh)` makes the
  global batches (default: lfpe.data.make_loader): for training an endless
  iterator with get_state/set_state, for eval an iterable of one pass with 'mask';
  `devices` restricts the mesh (default: all). Returns the final summary
  ({"step", "train": {...}, "eval": {...}}), also written to WORKDIR/summary.json.
  """
  # 1. Config.
  devices = list(jax.devices() if devices is None else devices)
  validate.validate_config(config, num_devices=len(devices), check_data=make_loader is None)
  task = tasks.get(config.task)
  make_loader = make_loader or default_loader

  # 2. Mesh and sharding rules.
  mesh = sharding.make_mesh(config.mesh, devices)
  rules = sharding.logical_rules(config.mesh.fsdp)
  data_sharding = sharding.batch_sharding(mesh)

  # 3. Data.
  train_iter = make_loader(
    config.data,
    global_batch_size=config.batch_size,
    seed=config.seed,
    train=True,
    mesh=data_sharding,
  )
  eval_data = make_loader(
    config.data,
    global_batch_size=config.get("eval_batch_size", config.batch_size),
    seed=config.seed,
    train=False,
    mesh=data_sharding,
  )

  # 4. Model and optimizer.
  model = task.create_model(config)
  tx, schedule = optim.make_optimizer(config)
  init_rng, dropout_rng = jax.random.split(jax.random.key(config.seed))
  init = functools.partial(
    steps.init_state, example=task.example_batch(config), task=task, model=model, tx=tx
  )

  # 5. Sharded state: shapes and logical axes first, then the state in place.
  boxed = jax.eval_shape(init, init_rng)
  state_shardings = sharding.tree_shardings(boxed, mesh, rules)
  abstract = sharding.unbox(boxed)
  sharding.check_divisible(abstract, state_shardings)

  # 6. Restore, or initialise.
  manager = checkpoint.make_manager(
    workdir, keep=config.keep_checkpoints, async_save=config.get("async_checkpoints", True)
  )
  target = checkpoint.with_shardings(abstract, state_shardings)
  restored = checkpoint.restore_latest(manager, target, train_iter)
  if restored is None:
    start_step = 0
    state = jax.jit(lambda rng: sharding.unbox(init(rng)), out_shardings=state_shardings)(init_rng)
  else:
    start_step, state = restored

  # 7. Compiled steps.
  train_step = jax.jit(
    functools.partial(
      steps.train_step, task=task, model=model, tx=tx, schedule=schedule, dropout_rng=dropout_rng
    ),
    in_shardings=(state_shardings, data_sharding),
    out_shardings=(state_shardings, sharding.replicated(mesh)),
    donate_argnums=0,
  )
  eval_step = jax.jit(
    functools.partial(steps.eval_step, task=task, model=model),
    in_shardings=(state_shardings.variables(), data_sharding),
    out_shardings=sharding.replicated(mesh),
  )

  # 8. The loop: step, log (stop on NaN), evaluate, checkpoint.
  evaluate = functools.partial(_evaluate, task, eval_step, eval_data)
  writer = MetricWriter(
    workdir,
    total_steps=config.total_steps,
    start_step=start_step,
    progress=config.get("progress", True),
    is_main=jax.process_index() == 0,
  )
  start_time = time.perf_counter()
  with manager, writer:
    for step in range(start_step + 1, config.total_steps + 1):
      state, metrics = train_step(state, next(train_iter))
      last = step == config.total_steps
      saving = step % config.checkpoint_every == 0 or last
      if step % config.log_every == 0 or saving:  # Never save a state not known to be finite.
        metrics = {**jax.device_get(metrics), "steps_per_s": writer.rate(step)}
        values = writer.write(step, "train", metrics)
        _check_finite(values, step, manager)
        writer.advance(step, loss=values["loss"])
      if step % config.eval_every == 0 or last:
        values = writer.write(step, "eval", evaluate(state.variables()))
        writer.advance(step, eval_accuracy=values.get("accuracy", math.nan))
      if saving:
        checkpoint.save(manager, step, state, train_iter)
      writer.advance(step)
    manager.wait_until_finished()
    wall_s = time.perf_counter() - start_time
    writer.summary(config.total_steps, wall_s=wall_s, start_step=start_step)
  return {"step": config.total_steps, **writer.latest}


def _check_finite(values: dict[str, float], step: int, manager: Any) -> None:
  """Stops the run on a NaN/inf loss; the checkpoints written so far stay (all finite)."""
  if math.isfinite(values["loss"]):
    return
  manager.wait_until_finished()
  raise NonFiniteLossError(
    f"Training loss is {values['loss']} at step {step}: stopping. The last good checkpoint "
    f"is step {manager.latest_step()} in {manager.directory}; lower config.optim.lr, set "
    "config.optim.grad_clip_norm, or lengthen config.schedule.warmup_steps, then resume."
  )


def _evaluate(
  task: Any, eval_step: Callable, eval_data: Iterable, variables: dict[str, Any]
) -> dict[str, float]:
  """The task's metrics over the whole eval split (sums added up on the host)."""
  totals: dict[str, float] = {}
  for batch in eval_data:
    for k, v in jax.device_get(eval_step(variables, batch)).items():
      totals[k] = totals.get(k, 0.0) + float(np.asarray(v))
  return task.finalize(totals)
