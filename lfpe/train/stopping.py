"""How a training run stops early without losing anything: Ctrl-C, and a preemption notice.

* Ctrl-C (SIGINT, `stop_requests`): the loop stops after the current step, so that no
  checkpoint save or metric write is cut in half; a second Ctrl-C interrupts at once. A
  re-run resumes from the newest checkpoint (`interrupted` names it).
* SIGTERM (`preemption_notices`), what cluster schedulers, Kubernetes and preemptible VMs
  send some seconds before they evict a job: the loop saves a checkpoint at the step it
  reached and stops (`Preempted`, exit 143), instead of dying with every step since the last
  periodic checkpoint lost. With several processes (`jax.distributed`) JAX's preemption
  service takes the signal on any of them and picks one step at which every process saves
  (`multihost_utils.reached_preemption_sync_point`), so that the collective save cannot
  deadlock; lfpe installs no handler of its own there.

Off the main thread, or where a signal is ignored (a record's job processes ignore SIGINT),
nothing is installed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax.experimental import multihost_utils

from lfpe.errors import Interrupted


class Preempted(Interrupted):
  """SIGTERM: the run saved a checkpoint where it stopped (status 143, as a shell reports a
  process that SIGTERM ended)."""

  exit_code = 143


@contextlib.contextmanager
def on_signal(signum: int, handler: Any) -> Iterator[bool]:
  """`signum` goes to `handler` inside, then back to its previous handler; yields whether it
  was installed (not off the main thread, nor where the signal is ignored)."""
  previous = signal.getsignal(signum)
  if threading.current_thread() is not threading.main_thread() or previous is signal.SIG_IGN:
    yield False
    return
  signal.signal(signum, handler)
  try:
    yield True
  finally:
    signal.signal(signum, previous)


@contextlib.contextmanager
def stop_requests() -> Iterator[Callable[[], bool]]:
  """`requested()`: whether Ctrl-C asked the loop to stop after this step (a second Ctrl-C
  raises KeyboardInterrupt at once)."""
  requested: list[bool] = []

  def handler(signum: int, frame: Any) -> None:
    if requested:
      raise KeyboardInterrupt
    requested.append(True)

  with on_signal(signal.SIGINT, handler) as installed:
    yield (lambda: bool(requested)) if installed else (lambda: False)


@contextlib.contextmanager
def preemption_notices() -> Iterator[Callable[[int], bool]]:
  """`reached(step)`: whether to save at `step` and stop. Call it at every step, on every
  process (several processes agree on the step through JAX's preemption service)."""
  if jax.distributed.is_initialized():
    yield _synced
    return
  noticed: list[bool] = []
  previous = signal.getsignal(signal.SIGTERM)
  with on_signal(signal.SIGTERM, lambda signum, frame: noticed.append(True)) as installed:
    yield (lambda step: bool(noticed)) if installed else (lambda step: False)
  if noticed and callable(previous):  # a notice the loop ended before acting on (the last
    previous(signal.SIGTERM, None)  # step, the final evaluation): to the handler outside


def _synced(step: int) -> bool:
  """JAX's agreed preemption step; never, where its preemption service was not started (a
  local decision would leave the other processes waiting in the collective save)."""
  try:
    return multihost_utils.reached_preemption_sync_point(step)
  except RuntimeError:  # "Preemption sync manager has not been initialized"
    return False


@contextlib.contextmanager
def shielded() -> Iterator[None]:
  """Ctrl-C and SIGTERM ignored inside, for work that must not be cut short (a save in flight,
  closing data workers). Where JAX's preemption service holds SIGTERM (several processes) it
  is left to it: replacing its handler from Python would drop it."""
  with contextlib.ExitStack() as stack:
    stack.enter_context(on_signal(signal.SIGINT, signal.SIG_IGN))
    if not jax.distributed.is_initialized():
      stack.enter_context(on_signal(signal.SIGTERM, signal.SIG_IGN))
    yield


def interrupted(step: int, total_steps: int, manager: Any) -> Interrupted:
  """Ctrl-C during `step`: the checkpoint a re-run resumes from, in one line. A save in flight
  completes first (it is the newest checkpoint), shielded from a further Ctrl-C, which would
  otherwise escape as an interrupt "before training started", and from SIGTERM."""
  last = _newest_saved(manager)
  resume = f"from checkpoint step {last}" if last is not None else "from the start"
  return Interrupted(
    f"interrupted at step {step} of {total_steps}; re-run the same command to resume {resume}."
  )


def preempted(step: int, total_steps: int, manager: Any) -> Preempted:
  """SIGTERM: the checkpoint of `step`, just started, written out (a further signal meanwhile
  is ignored: the scheduler's grace period is for this), in one line naming the newest step."""
  return Preempted(
    f"preempted (SIGTERM) at step {step} of {total_steps}: saved checkpoint step "
    f"{_newest_saved(manager)}; re-run the same command to resume from it."
  )


def _newest_saved(manager: Any) -> int | None:
  """The newest checkpoint step once a save in flight is written, shielded meanwhile."""
  with shielded():
    manager.wait_until_finished()
  return manager.latest_step()
