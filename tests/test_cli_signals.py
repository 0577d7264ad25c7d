"""Signals to `python -m lfpe.main`: Ctrl-C stops after the step (exit 130), SIGTERM (a
preemption notice) saves the step reached (exit 143), each in one line naming the checkpoint a
re-run resumes from; grain's data workers leave the signal to the trainer and end with it."""

import glob
import os
import re
import signal
import time

import pytest
from cli_helpers import run_main, start_main

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)

SMALL = "--config=configs/vit_digits.py:small=1"
SMALL_MODEL = [f"--config.model.{k}={v}" for k, v in dict(width=16, depth=1, mlp_dim=32).items()]


def _signalled_mid_run(tmp_path, signum, checkpoint_every):
  """A small run signalled past step 10 (`checkpoint_every` sets whether checkpoints were
  due): (its one `lfpe.main:` line, its arguments) once it exited with `signum`'s status."""
  args = [SMALL, f"--workdir={tmp_path / 'w'}", "--config.total_steps=100000"]
  args += [f"--config.checkpoint_every={checkpoint_every}", "--config.log_every=5"]
  args += ["--config.report_every=5", "--config.eval_every=100000"]
  job = start_main(*args)
  for line in job.stderr:  # wait for training to be under way
    if re.match(r"lfpe: step (1\d|[2-9]\d)", line):
      break
  job.send_signal(signum)
  stderr = job.stderr.read()
  assert job.wait(timeout=120) == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], stderr
  assert "Traceback" not in stderr, stderr[-3000:]
  [line] = [x for x in stderr.splitlines() if x.startswith("lfpe.main: ")]
  return line, args


def _resumes_from(args, step: int) -> None:
  resumed = run_main(*args[:2], f"--config.total_steps={step + 3}", *args[3:])
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"training from step {step} to step" in resumed.stderr


def test_ctrl_c_is_one_line_naming_the_checkpoint_and_exit_130(tmp_path):
  """SIGINT mid-run: where it stopped, the checkpoint a re-run resumes from; then it does."""
  line, args = _signalled_mid_run(tmp_path, signal.SIGINT, checkpoint_every=5)
  found = re.fullmatch(
    r"lfpe.main: interrupted at step (\d+) of 100000; re-run the same command to resume from "
    r"checkpoint step (\d+)\.",
    line,
  )
  assert found and 0 < int(found[2]) <= int(found[1]), line
  _resumes_from(args, int(found[2]))


def test_sigterm_saves_the_step_it_reached_and_exits_143(tmp_path):
  """A preemption notice mid-run, with no periodic checkpoint yet: the run saves the step it
  reached, says so in one line, exits 143, and a re-run resumes from exactly that step."""
  line, args = _signalled_mid_run(tmp_path, signal.SIGTERM, checkpoint_every=100_000)
  found = re.fullmatch(
    r"lfpe.main: preempted \(SIGTERM\) at step (\d+) of 100000: saved checkpoint step (\d+); "
    r"re-run the same command to resume from it\.",
    line,
  )
  assert found and found[1] == found[2] and int(found[1]) > 10, line
  _resumes_from(args, int(found[1]))


def _start_with_workers(tmp_path):
  """The digits config's batches of 64 (large enough for grain to pass them in shared memory)
  with 2 data workers, once training is under way and they are sending batches. The model is
  cut to 1 block of width 16 (the CI variant's sizes but its 4 heads): the workers' behaviour
  does not depend on it, and its steps are about 7x faster at the suite's -O0."""
  args = ["--config=configs/vit_digits.py", f"--workdir={tmp_path / 'w'}", *SMALL_MODEL]
  args += ["--config.total_steps=100000", "--config.data.worker_count=2"]
  args += ["--config.log_every=5", "--config.report_every=5", "--config.eval_every=100000"]
  job = start_main(*args)
  for line in job.stderr:
    if re.match(r"lfpe: step [1-9]\d\d", line):
      return job
  raise AssertionError(f"the run ended first: {job.wait()}")


def _assert_group_ends(pgid: int) -> None:
  """No process of group `pgid` is left running, within 30 s (the resource tracker ends once
  the run has; a worker whose run has gone, within a second)."""
  deadline = time.monotonic() + 30
  while _group(pgid) and time.monotonic() < deadline:
    time.sleep(0.2)
  assert not _group(pgid)


@pytest.mark.parametrize(
  "signum, status, says",
  [(signal.SIGINT, 130, "interrupted at step "), (signal.SIGTERM, 143, "preempted (SIGTERM)")],
)
def test_a_signal_to_the_group_stops_the_data_workers_too_and_leaves_nothing(
  tmp_path, signum, status, says
):
  """A terminal's Ctrl-C, or a scheduler's SIGTERM to the job's every process (Slurm's), reaches
  the run and its grain workers (`data.worker_count=2`): still one line and the signal's exit
  status, no worker's traceback (a worker that ended with the signal would fail the step that
  reads its batch), no process left running, no semaphore for the resource tracker to warn
  about (the trainer closes the loader)."""
  job = _start_with_workers(tmp_path)
  os.killpg(job.pid, signum)
  _, stderr = job.communicate(timeout=120)  # to EOF: every process holding stderr has ended
  assert job.returncode == status, stderr[-3000:]
  # (grain may still leave a batch or two in shared memory, which the resource tracker frees)
  assert "Traceback" not in stderr and "leaked semaphore" not in stderr, stderr[-3000:]
  [line] = [x for x in stderr.splitlines() if x.startswith("lfpe.main: ")]
  assert line.startswith(f"lfpe.main: {says}"), line
  _assert_group_ends(job.pid)


def test_a_data_worker_that_gets_sigterm_keeps_sending_batches(tmp_path):
  """SIGTERM to the workers alone (how a scheduler's notice reaches every process of the job,
  deterministically): they ignore it, the run trains on, and the trainer alone acts on a
  signal (here a Ctrl-C)."""
  job = _start_with_workers(tmp_path)
  workers = [pid for pid in _group(job.pid) if pid != job.pid]
  assert len(workers) >= 2, workers  # the two workers (and the resource tracker)
  for pid in workers:
    os.kill(pid, signal.SIGTERM)
  for line in job.stderr:  # 200 steps on, far past the batches the workers had sent
    if re.match(r"lfpe: step [3-9]\d\d", line):
      break
  assert job.poll() is None and set(workers) <= set(_group(job.pid))
  job.send_signal(signal.SIGINT)
  _, stderr = job.communicate(timeout=120)
  assert job.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]


def test_data_workers_of_a_killed_run_end_with_it(tmp_path):
  """SIGKILL to the run alone (no trainer left to close its workers): they end too."""
  job = _start_with_workers(tmp_path)
  job.kill()
  job.wait(timeout=60)
  _assert_group_ends(job.pid)


def _group(pgid: int) -> list[int]:
  """The pids of the processes of group `pgid` still running (not zombies: a finished process
  left to an init that does not reap it stays one)."""
  running = []
  for path in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(path) as f:
        stat = f.read()
    except OSError:  # it ended meanwhile
      continue
    state, _, group = stat.rsplit(")", 1)[1].split()[:3]
    if int(group) == pgid and state != "Z":
      running.append(int(stat.split()[0]))
  return running
