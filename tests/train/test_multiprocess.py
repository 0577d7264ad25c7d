"""Two processes, one mesh: `python -m lfpe.main` launched twice on this CPU, as on two hosts.

Each process has one CPU device and joins the other through `jax.distributed.initialize()`
(a local coordinator on a free port, gloo collectives), so the mesh's `data` axis spans
both. The run is killed with SIGKILL after its second checkpoint and launched again with
the same commands; it resumes and finishes. A reference trains the same config in this
process on two devices, reading the real pipeline as the two processes do (slice `i` of 2
of the split feeds rows `i` of every global batch): losses and eval metrics are equal.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from train_fixtures import digits_small

from lfpe.data import builders, pipeline
from lfpe.data import config as data_lib
from lfpe.train import trainer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
STEPS, KILL_AFTER, TIMEOUT_S = 12, 6, 400  # kill once step 6 is saved; 400 s a launch
OVERRIDES = {
  "total_steps": STEPS,
  "checkpoint_every": 3,
  "eval_every": 3,  # due at every checkpoint: a resumed run's processes agree on what to evaluate
  "log_every": 1,
  "keep_checkpoints": 10,
  "progress": False,
}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _launch(workdir, data_dir, overrides=OVERRIDES):
  """The two commands a user types (one per host), started as children; each launch on a
  fresh port (a relaunch must not wait for the killed coordinator's port to be released)."""
  port = _free_port()
  xla_flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
  flags = [f"--config.{k}={v}" for k, v in overrides.items()]
  procs = []
  for index in range(2):
    env = {
      **os.environ,
      "XLA_FLAGS": " ".join(xla_flags),  # one CPU device per process
      "JAX_PLATFORMS": "cpu",
      "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
      "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
      "JAX_NUM_PROCESSES": "2",
      "JAX_PROCESS_ID": str(index),
      "JAX_COMPILATION_CACHE_DIR": str(workdir.parent / "jax_cache"),  # the relaunch reuses it
    }
    command = [
      sys.executable,
      "-m",
      "lfpe.main",
      "--config=configs/vit_digits.py:small=1",
      f"--workdir={workdir}",
      f"--config.data.data_dir={data_dir}",
      *flags,
    ]
    log = open(workdir.parent / f"{workdir.name}_{index}.log", "a")
    procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log))
    log.close()
  return procs


def _logs(workdir) -> str:
  return "".join(
    f"--- process {i}:\n" + (workdir.parent / f"{workdir.name}_{i}.log").read_text()[-3000:]
    for i in range(2)
  )


def _kill(procs) -> None:
  """SIGKILL to both at once (killed one by one, the survivor may abort on its own first)."""
  for p in procs:
    if p.poll() is None:
      p.send_signal(signal.SIGKILL)
  for p in procs:
    p.wait()


def _wait(procs, workdir, until=None) -> None:
  """Polls until both exit 0 (or `until()` holds); on an error or a timeout kills both."""
  deadline = time.time() + TIMEOUT_S
  while not (until() if until else all(p.poll() is not None for p in procs)):
    codes = [p.poll() for p in procs]
    if any(c not in (None, 0) for c in codes) or time.time() > deadline:
      _kill(procs)
      raise AssertionError(f"exit codes {codes} (None: timed out)\n{_logs(workdir)}")
    time.sleep(0.01)
  if not until:
    assert [p.returncode for p in procs] == [0, 0], _logs(workdir)


def _steps(workdir) -> list[int]:
  """The committed checkpoint steps (orbax renames a step's folder to its number when done)."""
  folder = workdir / "checkpoints"
  names = os.listdir(folder) if folder.is_dir() else []
  return sorted(int(n) for n in names if n.isdigit())


def _metrics(workdir) -> list[tuple]:
  lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
  return [(x["step"], x["split"], x["loss"], x.get("accuracy")) for x in lines]


class _Joined:
  """Global batches whose rows `i` come from slice `i` of 2 of the real pipeline."""

  def __init__(self, parts, sharding, train):
    self.parts, self.sharding, self.train = parts, sharding, train

  def __iter__(self):
    return self if self.train else map(self._join, zip(*self.parts, strict=True))

  def __next__(self):
    return self._join([next(p) for p in self.parts])

  def _join(self, batches):
    return {
      k: jax.device_put(np.concatenate([b[k] for b in batches]), self.sharding) for k in batches[0]
    }

  def get_state(self):
    return [p.get_state().decode() for p in self.parts]


def _two_slices_loader(data, *, global_batch_size, seed, train, mesh):
  """What processes 0 and 1 read (pipeline.make_loader with shard i of 2), in one process."""
  resolved = data_lib.resolve(data)
  split = resolved.split(train)
  source = builders.data_source(resolved.spec.name, split, resolved.data_dir)
  source = pipeline.NamedSource(source, f"{resolved.spec.name}:{split}")
  kwargs = dict(batch_size=global_batch_size // 2, shard_count=2)
  if train:
    parts = [
      pipeline.train_batches(source, resolved.ops(True), seed=seed, shard_index=i, **kwargs)
      for i in range(2)
    ]
  else:
    parts = [
      pipeline.EvalBatches(source, resolved.ops(False), shard_index=i, **kwargs) for i in range(2)
    ]
  return _Joined(parts, mesh, train)


@pytest.mark.slow  # 55-80 s on a shared 2-core machine (about 60 CPU-seconds)
def test_two_processes_one_mesh_kill_resume_match_one_process(tmp_path):
  data_dir, workdir = tmp_path / "data", tmp_path / "two"  # digits: built by process 0
  procs = _launch(workdir, data_dir)
  try:
    _wait(procs, workdir, until=lambda: any(s >= KILL_AFTER for s in _steps(workdir)))
  finally:
    _kill(procs)
  assert [p.returncode for p in procs] == [-signal.SIGKILL] * 2, _logs(workdir)
  killed_at = max(_steps(workdir))
  assert KILL_AFTER <= killed_at < STEPS  # killed mid-run
  procs = _launch(workdir, data_dir)  # the same commands again: resume
  try:
    _wait(procs, workdir)
  finally:
    _kill(procs)
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["step"] == STEPS and summary["start_step"] == killed_at

  # (b) Each step's checkpoint written once, by both: one folder (no leftovers) holding the
  # sharded state and the data iterator state of each process.
  config = digits_small()
  config.update_from_flattened_dict(OVERRIDES)
  steps = list(range(config.checkpoint_every, STEPS + 1, config.checkpoint_every))
  assert sorted(os.listdir(workdir / "checkpoints")) == sorted(str(s) for s in steps)
  local = config.batch_size // 2
  for step in steps:
    folder = workdir / "checkpoints" / str(step)
    assert (folder / "state" / "commit_success.txt").exists()
    names = sorted(os.listdir(folder / "data"))
    assert names == ["commit_success.txt", "process_0-of-2.json", "process_1-of-2.json"]
    for i in range(2):
      saved = json.loads((folder / "data" / f"process_{i}-of-2.json").read_text())
      state = json.loads(saved["bytes"])  # grain's DataLoader state
      # (a) Process i reads slice i of 2 of the split (its sampler's shard), `local` records
      # a step: its sampler indices are 2 * record + i. Past the restart this holds only if
      # both processes restored their position.
      assert f"shard_index={i}, shard_count=2" in state["sampler"]
      assert state["last_seen_indices"]["0"] == 2 * (step * local - 1) + i

  # (d) One process, two devices, reading the same two slices: the same numbers, bit for bit.
  config.data.data_dir = str(data_dir)
  reference = tmp_path / "one"
  trainer.train_and_evaluate(
    config, str(reference), make_loader=_two_slices_loader, devices=jax.devices()[:2]
  )
  assert _metrics(workdir) == _metrics(reference)  # every logged train and eval loss/accuracy
  two, one = (json.loads((w / "summary.json").read_text()) for w in (workdir, reference))
  assert two["train"]["loss"] == one["train"]["loss"] and two["eval"] == one["eval"]


@pytest.mark.slow  # about 60 s on a shared 2-core machine
def test_a_preemption_notice_to_one_process_saves_one_step_on_both(tmp_path):
  """SIGTERM to process 1 alone (one host of a pod told it is preempted): JAX's preemption
  service picks one step, both processes save it together and exit 143, and the same
  commands resume from it. No periodic checkpoint is due, so the saved step is the notice's."""
  data_dir, workdir = tmp_path / "data", tmp_path / "two"
  overrides = {**OVERRIDES, "total_steps": 100_000, "checkpoint_every": 100_000}
  overrides["eval_every"] = 100_000
  procs = _launch(workdir, data_dir, overrides)
  steps = lambda: len(_metrics(workdir)) if (workdir / "metrics.jsonl").exists() else 0
  try:
    _wait(procs, workdir, until=lambda: steps() >= 5)
    procs[1].send_signal(signal.SIGTERM)
    for p in procs:
      p.wait(timeout=TIMEOUT_S)
  finally:
    _kill(procs)
  assert [p.returncode for p in procs] == [143, 143], _logs(workdir)
  [saved] = _steps(workdir)
  names = sorted(os.listdir(workdir / "checkpoints" / str(saved) / "data"))
  assert names == ["commit_success.txt", "process_0-of-2.json", "process_1-of-2.json"]
  line = f"preempted (SIGTERM) at step {saved} of 100000: saved checkpoint step {saved}"
  assert _logs(workdir).count(line) == 2, _logs(workdir)
  procs = _launch(workdir, data_dir, {**overrides, "total_steps": saved + 2})
  try:
    _wait(procs, workdir)
  finally:
    _kill(procs)
  summary = json.loads((workdir / "summary.json").read_text())
  assert (summary["start_step"], summary["step"]) == (saved, saved + 2)
