"""Checkpoints: the sharded train state plus the data iterator's position (orbax).

Layout: WORKDIR/checkpoints/<step>/{state/, data/process_<i>-of-<n>.json}. Saves
are asynchronous (the state is copied to host before `save` returns, so the next
step may donate its buffers), the last `keep` are kept, and `restore` reads the
latest onto whatever shardings the caller gives: a checkpoint written on one
mesh restores onto another. Orbax writes each step into a temporary folder and
renames it when complete, so a run killed mid-save leaves the previous step intact
(the next run deletes the unfinished folder). A complete step that cannot be read
(damaged files: orbax's bare `Exception` around a tensorstore error included) is skipped
and the next newest is tried; once one is read, the unreadable ones move to
WORKDIR/unreadable_checkpoints/ (training writes those steps again), in one warning line.
When none can be read, `restore_latest` raises WorkdirError and moves nothing; a readable
checkpoint of another model (a config or code change) raises at once and moves nothing
either. `restore_on_one_device` reads one given step whole (`config.init_from`'s source):
damage there is a ConfigError naming the field and the other steps.
"""

from __future__ import annotations

import dataclasses
import json
import logging as pylogging
import re
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

from lfpe.errors import ConfigError, WorkdirError
from lfpe.train.workdir import absolute

# What reading a damaged checkpoint raises: truncated JSON and tensorstore errors
# (ValueError), missing items (KeyError), missing or unreadable files (OSError). Orbax
# wraps a failed array read in a bare `Exception` whose cause is one of these.
_UNREADABLE = (OSError, ValueError, KeyError)


def _damage(error: BaseException | None) -> BaseException | None:
  """The error in `error`'s chain (itself, its cause, ...) that damage raises, or None."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, _UNREADABLE):
      return error
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return None


def _state_path(directory: epath.Path) -> epath.Path:
  return directory / f"process_{jax.process_index()}-of-{jax.process_count()}.json"


class DataIteratorHandler(ocp.CheckpointHandler):
  """Saves an iterator's `get_state()` (bytes or JSON-able) as one JSON file per process."""

  def save(self, directory: epath.Path, args: DataIteratorSave) -> None:
    state = args.state
    payload = {"bytes": state.decode()} if isinstance(state, bytes) else {"json": state}
    _state_path(directory).write_text(json.dumps(payload))

  def restore(self, directory: epath.Path, args: DataIteratorRestore) -> Any:
    path = _state_path(directory)
    if not path.exists():
      raise ValueError(
        f"No data iterator state at {path}: was the checkpoint written with a "
        "different number of processes?"
      )
    payload = json.loads(path.read_text())
    state = payload["bytes"].encode() if "bytes" in payload else payload["json"]
    args.item.set_state(state)
    return args.item

  def metadata(self, directory: epath.Path) -> None:
    return None

  def finalize(self, directory: epath.Path) -> None:
    pass

  def close(self) -> None:
    pass


@ocp.args.register_with_handler(DataIteratorHandler, for_save=True)
@dataclasses.dataclass
class DataIteratorSave(ocp.args.CheckpointArgs):
  state: Any  # the iterator's get_state(), taken when the save starts


@ocp.args.register_with_handler(DataIteratorHandler, for_restore=True)
@dataclasses.dataclass
class DataIteratorRestore(ocp.args.CheckpointArgs):
  item: Any


def make_manager(
  workdir: str, *, keep: int, async_save: bool = True, read_only: bool = False
) -> ocp.CheckpointManager:
  """A CheckpointManager over WORKDIR/checkpoints keeping the last `keep` steps; `read_only`
  (an evaluation) creates, cleans and deletes nothing: a run may be training in that workdir,
  its next save in flight as a tmp folder."""
  options = ocp.CheckpointManagerOptions(
    max_to_keep=None if read_only else keep,
    save_interval_steps=0 if read_only else 1,
    create=not read_only,
    read_only=read_only,
    enable_async_checkpointing=async_save,
    cleanup_tmp_directories=not read_only,
  )
  # Orbax logs "Given directory is read only" for every read-only manager: the mode asked for.
  said_read_only = lambda record: "is read only" not in record.getMessage()  # noqa: E731
  absl_logger = pylogging.getLogger("absl")
  absl_logger.addFilter(said_read_only)
  try:
    manager = ocp.CheckpointManager(
      absolute(workdir) / "checkpoints",
      options=options,
      item_names=("state", "data"),
    )
  finally:
    absl_logger.removeFilter(said_read_only)
  # Orbax removes unfinished (tmp) checkpoints in a background thread, which only a save
  # waits for and `close` does not: a run that stops before saving (no readable
  # checkpoint, an evaluation) could exit under it and print its traceback.
  if not read_only:
    manager._maybe_await_cleanup_tmp_directory()
  return manager


def save(manager: ocp.CheckpointManager, step: int, state: Any, data_iter: Any) -> None:
  """Starts saving `state` and `data_iter`'s position as `step` (returns before the write)."""
  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave(state), data=DataIteratorSave(data_iter.get_state())
    ),
    force=True,
  )


def with_shardings(abstract: Any, shardings: Any) -> Any:
  """ShapeDtypeStructs of `abstract` carrying `shardings`: the restore target."""
  return jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
  )


def restore_latest(
  manager: ocp.CheckpointManager,
  target: Any,
  data_iter: Any,
  *,
  reset_data: bool = False,
  read_only: bool = False,
) -> tuple[int, Any] | None:
  """(step, state) from the newest readable checkpoint laid out as `target`; sets `data_iter`
  (None: evaluation, no data position is read).

  Unreadable steps are logged, tried from the newest down, and (once an older one is
  read) moved aside so that training can write those steps again (left in place when
  `read_only`: an evaluation). Returns None when
  there is no checkpoint (a fresh run); raises WorkdirError when none can be read. Each
  process saved its own data position: a checkpoint written by another number of processes
  cannot give this run one, which is refused unless `reset_data` (`config.reset_data_position`)
  starts the data stream afresh.
  """
  failed: dict[int, str] = {}  # step: why it cannot be read
  stop_silencing = _silence_abandoned_reads()  # before any read, the metadata's included
  try:
    return _restore_newest_readable(manager, target, data_iter, reset_data, failed, read_only)
  finally:
    if not failed:
      stop_silencing()


def _restore_newest_readable(
  manager: ocp.CheckpointManager,
  target: Any,
  data_iter: Any,
  reset_data: bool,
  failed: dict,
  read_only: bool,
) -> tuple[int, Any] | None:
  """`restore_latest`'s reads; records each unreadable step in `failed`."""
  steps = sorted(manager.all_steps(), reverse=True)
  other = steps and other_model(manager.directory / str(steps[0]) / "state", target)
  if other:  # not damage: nothing is set aside, nothing is restored (orbax would fail noisily)
    raise WorkdirError(
      f"Checkpoint step {steps[0]} in {manager.directory} holds another model than this "
      f"config's ({other}): it was trained with another config or lfpe version. The "
      "checkpoints are kept; run the config that wrote them (WORKDIR/config.json), or train "
      "this one in a new --workdir."
    )
  data_iter = _data_to_restore(manager, steps, data_iter, reset_data)
  for step in steps:
    items = {"state": ocp.args.StandardRestore(target)}
    if data_iter is not None:
      items["data"] = DataIteratorRestore(data_iter)
    try:
      restored = manager.restore(step, args=ocp.args.Composite(**items))
    except Exception as e:  # noqa: BLE001 (orbax's wrapper; anything else is re-raised)
      damage = _damage(e)
      if damage is None:
        raise
      failed[step] = textwrap.shorten(f"{type(damage).__name__}: {damage}", 300)
    if not _read_by_every_process(step not in failed):
      failed.setdefault(step, "another process could not read it")
      continue
    if failed:
      what, where = ("Evaluating", "are left in place") if read_only else ("Resuming from", "")
      if not read_only:
        where = f"were moved to {_set_aside(manager, list(failed))}"
      logging.warning(
        "%s checkpoint step %d, the newest readable one: step(s) %s in %s cannot be read "
        "(step %d: %s) and %s.",
        what,
        step,
        sorted(failed),
        manager.directory,
        max(failed),
        failed[max(failed)],
        where,
      )
    return step, restored["state"]
  if not failed:
    return None
  newest = max(failed)
  raise WorkdirError(
    f"No checkpoint in {manager.directory} can be read: all are damaged (steps "
    f"{sorted(failed)}; step {newest}: {failed[newest]}). They are left as they are; start "
    "a new --workdir."
  )


def restore_on_one_device(state_dir: str, *, field: str) -> dict[str, Any]:
  """The train state saved in `state_dir`, whole arrays on this process's first device,
  whatever mesh wrote it. A damaged step raises ConfigError naming `field` (the config field
  that chose it), why it cannot be read, and the steps beside it to choose instead."""
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  stop_silencing = _silence_abandoned_reads()
  try:
    saved = ocp.StandardCheckpointHandler().metadata(epath.Path(state_dir))
    target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), saved)
    state = ocp.StandardCheckpointer().restore(state_dir, target)
  except Exception as e:  # noqa: BLE001 (orbax's wrapper; anything else is re-raised)
    damage = _damage(e)
    if damage is None:
      raise
    step = epath.Path(state_dir).parent
    others = sorted(int(d.name) for d in step.parent.iterdir() if d.name.isdigit())
    others = [s for s in others if str(s) != step.name]
    instead = (
      f"point it at another step's state folder ({step.parent}/STEP/state, STEP in {others})"
      if others
      else "train the source again"
    )
    reason = textwrap.shorten(f"{type(damage).__name__}: {damage}", 300)
    raise ConfigError(f"{field}: {state_dir} cannot be read ({reason}); {instead}.") from None
  stop_silencing()
  return state


def _data_to_restore(manager, steps: list[int], data_iter: Any, reset_data: bool) -> Any:
  """`data_iter` if the newest checkpoint's data position is to be restored, else None: only
  a position written by another number of processes, with `reset_data`, is dropped (a command
  that keeps the flag resumes exactly after a later interruption: the flag does nothing
  once the checkpoints are this run's own)."""
  if data_iter is None or not steps:
    return data_iter
  written = {
    int(m.group(1))
    for p in (manager.directory / str(steps[0]) / "data").glob("process_*-of-*.json")
    if (m := re.search(r"-of-(\d+)\.json$", p.name))
  }
  moved = written and jax.process_count() not in written
  if reset_data and not moved:
    logging.info(
      "config.reset_data_position: checkpoint step %d was written by as many processes as "
      "this run has; its data position resumes.",
      steps[0],
    )
  if reset_data and moved:
    logging.warning(
      "config.reset_data_position: checkpoint step %d's model and optimizer resume; the data "
      "stream starts afresh from this run's seed (examples may repeat within the epoch).",
      steps[0],
    )
    return None
  if moved:
    raise WorkdirError(
      f"Checkpoint step {steps[0]} in {manager.directory} was written by {max(written)} "
      f"processes, this run has {jax.process_count()}: each process kept its own data "
      "position, which cannot be split anew. Run with that many processes, or add "
      "--config.reset_data_position=true to resume the model and optimizer with a fresh data "
      "stream."
    )
  return data_iter


def _silence_abandoned_reads() -> Callable[[], None]:
  """Keeps the echoes of a failed read off stderr; returns the function that stops it.

  When one array of a damaged step fails, orbax closes its event loop and abandons the
  step's other reads. They end on tensorstore's threads, some while the restore is still
  failing (tracebacks of "Event loop is closed", printed through `sys.excepthook`), others
  later, as "Exception ignored in <coroutine ...>" unraisable errors (60 lines each; asyncio
  may add "Task exception was never retrieved"). Only those errors are dropped, and
  `restore_latest` reports the failure once: it installs this before reading and removes it
  when every read succeeded; after a failure it stays for the rest of the process.
  """
  if getattr(sys.unraisablehook, "lfpe_drops_abandoned_reads", False):
    return lambda: None
  previous_unraisablehook, previous_excepthook = sys.unraisablehook, sys.excepthook

  def closed(error: BaseException | None) -> bool:
    return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"

  def echo(error: BaseException | None, source: Any = None) -> bool:
    code = getattr(source, "cr_code", None)  # an abandoned orbax read, closed when collected
    orbax = "orbax" in getattr(code, "co_filename", "")
    return closed(error) or _damage(error) is not None or orbax

  def unraisablehook(unraisable: Any) -> None:
    if not echo(unraisable.exc_value, unraisable.object):
      previous_unraisablehook(unraisable)

  def excepthook(kind: type, error: BaseException, trace: Any) -> None:
    if not closed(error):  # only that: the main thread's own errors come here too
      previous_excepthook(kind, error, trace)

  def asyncio_filter(record: pylogging.LogRecord) -> bool:
    return not echo(record.exc_info[1] if record.exc_info else None)

  def stop() -> None:
    sys.unraisablehook, sys.excepthook = previous_unraisablehook, previous_excepthook
    pylogging.getLogger("asyncio").removeFilter(asyncio_filter)

  unraisablehook.lfpe_drops_abandoned_reads = True
  sys.unraisablehook, sys.excepthook = unraisablehook, excepthook
  pylogging.getLogger("asyncio").addFilter(asyncio_filter)
  return stop


def _shapes(tree: Any) -> dict[str, tuple[int, ...]]:
  """{'opt_state.1.0.mu.Dense_0.kernel': shape} of a pytree's array leaves."""
  names = lambda path: ".".join(
    str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path
  )
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {names(path): tuple(leaf.shape) for path, leaf in leaves if hasattr(leaf, "shape")}


def other_model(state_dir: epath.Path, target: Any) -> str | None:
  """How the state saved in `state_dir` differs from `target` in arrays or shapes (None if it
  does not, or if its metadata cannot be read: damage is for the restore to find)."""
  try:
    saved = _shapes(ocp.StandardCheckpointHandler().metadata(state_dir))
  except _UNREADABLE:
    return None
  wanted = _shapes(target)
  where = lambda shape: "absent" if shape is None else f"shape {shape}"
  for name in sorted(set(saved) | set(wanted), key=lambda n: (not n.startswith("params"), n)):
    if saved.get(name) != wanted.get(name):
      return (
        f"{name}: {where(saved.get(name))} in the checkpoint, "
        f"{where(wanted.get(name))} in this config's model"
      )
  return None


def _read_by_every_process(ok: bool) -> bool:
  """Whether every process read a step: all resume from the same one, or none does."""
  if jax.process_count() == 1:
    return ok
  return bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))


def _set_aside(manager: ocp.CheckpointManager, steps: list[int]) -> epath.Path:
  """Moves the unreadable `steps` to WORKDIR/unreadable_checkpoints/STEP-TIME (kept to inspect);
  returns that folder."""
  aside = manager.directory.parent / "unreadable_checkpoints"
  if jax.process_index() == 0:
    aside.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for step in steps:
      (manager.directory / str(step)).rename(aside / f"{step}-{stamp}")
  multihost_utils.sync_global_devices("lfpe: unreadable checkpoints set aside")
  manager.reload()
  return aside
