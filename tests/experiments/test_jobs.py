"""The job processes of a record's `--jobs` (`experiments.jobs`)."""

import os
import subprocess
import sys
import threading
from concurrent import futures

import pytest

from experiments import jobs

# A child that runs XLA:CPU ops for 1.5 s and prints the share of that CPU time not spent by
# its busiest thread, and whether every thread may still run on every CPU it started with.
_POOL_SHARE = """
import os, sys, time
allowed = os.sched_getaffinity(0)
if sys.argv[1] == "one":
    from experiments.jobs import one_thread_backend
    one_thread_backend()
import jax, jax.numpy as jnp
f = jax.jit(lambda a: jnp.tanh(a @ a))
x = jnp.ones((768, 768))
f(x).block_until_ready()
def cpu():
    ticks = lambda tid: open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[11:13]
    return {tid: sum(map(int, ticks(tid))) for tid in os.listdir("/proc/self/task")}
before, start = cpu(), time.time()
while time.time() - start < 1.5:
    f(x).block_until_ready()
spent = {tid: t - before.get(tid, 0) for tid, t in cpu().items()}
free = all(os.sched_getaffinity(int(tid)) == allowed for tid in os.listdir("/proc/self/task"))
print(1 - max(spent.values()) / max(sum(spent.values()), 1), free)
"""


@pytest.mark.skipif(
  not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
  reason="needs CPU affinity and two CPUs",
)
def test_a_job_runs_its_ops_on_one_thread_and_keeps_its_cpus():
  """`one_thread_backend` (what every `--jobs` process calls): one thread does the ops' work,
  and every thread of the process may still use every CPU after it (the previous commit's
  left the pool pinned to one CPU); without it, on two CPUs, a second thread of XLA's pool
  does a large part of the work (so this test can fail both ways)."""

  def share(mode: str) -> tuple[float, bool]:
    out = subprocess.run(
      [sys.executable, "-c", _POOL_SHARE, mode],
      capture_output=True,
      text=True,
      check=True,
      env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""},  # one device, as a job has
    )
    other, same = out.stdout.split()
    return float(other), same == "True"

  one = share("one")
  assert one[0] < 0.1 and one[1]
  # Retried: a busy machine may leave a second thread no core (a pinned pool never gets one).
  assert any(share("default")[0] > 0.15 for _ in range(3))


def test_a_stopping_record_silences_only_the_pool_threads_cancelled_future_error(monkeypatch):
  seen = []  # Python 3.11's broken pool thread raises InvalidStateError on cancelled futures
  monkeypatch.setattr(threading, "excepthook", lambda hook_args: seen.append(hook_args.exc_type))

  def fail_in_a_thread(error: Exception) -> None:
    thread = threading.Thread(target=lambda: (_ for _ in ()).throw(error))
    thread.start()
    thread.join()

  with jobs._quiet_cancelled_futures():
    fail_in_a_thread(futures.InvalidStateError("cancelled"))
    fail_in_a_thread(ValueError("a real error"))
  fail_in_a_thread(futures.InvalidStateError("after the stop"))
  assert seen == [ValueError, futures.InvalidStateError]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_thread_that_ends_before_its_release_is_no_error(monkeypatch):
  """A thread listed by `one_thread_backend` may end before its CPUs are given back (a record
  stopped on 2026-12-07 with ProcessLookupError, starting a job): it needs nothing."""
  allowed, listdir = os.sched_getaffinity(0), os.listdir
  gone = str(2**22 + 1)  # above Linux's largest pid_max: no such thread
  monkeypatch.setattr(os, "listdir", lambda path: [*listdir(path), gone])
  jobs.one_thread_backend()
  assert os.sched_getaffinity(0) == allowed
