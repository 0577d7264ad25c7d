"""The processes a record trains its runs in with `--jobs` > 1 (`runs.execute`): a pool of
fresh interpreters, one run each, on one XLA:CPU thread, stopped together with the record."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterable
from concurrent import futures

import jax


def pool(jobs: int) -> futures.ProcessPoolExecutor:
  """`jobs` worker processes, each spawned fresh for one run (a fresh interpreter imports the
  code it checks, `provenance.same_code`; JAX is never forked), set up by `_start_job`."""
  return futures.ProcessPoolExecutor(
    jobs,
    mp_context=multiprocessing.get_context("spawn"),
    initializer=_start_job,
    max_tasks_per_child=1,
  )


def stop(started: Iterable[futures.Future], workers: futures.ProcessPoolExecutor) -> None:
  """Stops a record's pool now (a failed run or ^C), not after every run: the runs not started
  are cancelled, the running jobs terminated (each saves its step, `lfpe.train.stopping`, and
  resumes from its last checkpoint next time) and joined."""
  for future in started:
    future.cancel()
  running = multiprocessing.active_children()
  with _quiet_cancelled_futures():
    for job in running:
      job.terminate()
    for job in running:
      job.join(timeout=30)
    workers.shutdown()  # joins the broken pool here (wait=False races: CPython gh-119592)


@contextlib.contextmanager
def _quiet_cancelled_futures():
  """Python 3.11's pool thread, breaking, sets the exception of futures already cancelled and
  prints an `InvalidStateError` traceback of its own (3.12 checks first): silenced while a
  stopping record joins its pool; any other thread error still prints."""
  hook = threading.excepthook
  threading.excepthook = lambda a: None if a.exc_type is futures.InvalidStateError else hook(a)
  try:
    yield
  finally:
    threading.excepthook = hook


def one_thread_backend() -> None:
  """Starts JAX's CPU backend with one thread for its ops. XLA:CPU sizes that thread pool from
  the CPUs the process may run on when the backend starts (jax 0.10's runtime reads no flag
  for it: `--xla_cpu_multi_thread_eigen=false` left a second thread doing half the work), so
  the backend starts while the process is held to one CPU, which is then released for every
  thread (threads started meanwhile inherited it): the pool keeps one thread and the
  scheduler may still move it to whichever core is free. (Where the OS has no CPU affinity,
  e.g. macOS, the backend keeps its default pool.)"""
  if not hasattr(os, "sched_setaffinity"):
    return
  allowed = os.sched_getaffinity(0)
  os.sched_setaffinity(0, {min(allowed)})
  try:
    jax.devices()
  finally:  # every thread: those the backend started inherited the one CPU
    for thread in os.listdir("/proc/self/task"):
      try:
        os.sched_setaffinity(int(thread), allowed)
      except ProcessLookupError:  # it ended since the listing: nothing left to release
        pass


def _start_job() -> None:
  """A job process: one XLA:CPU thread (`one_thread_backend`), deaf to Ctrl-C (the record's
  process stops its jobs: one message, not one traceback per job), and killed with the
  record's process, so that no orphan keeps writing a workdir."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  if sys.platform == "linux":
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  one_thread_backend()
