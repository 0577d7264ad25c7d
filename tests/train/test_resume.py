"""Exact resume: a run killed with SIGKILL and restarted ends bitwise equal to an unbroken one.

Both runs are `python -m lfpe.main` subprocesses on the small digits config (8 fake CPU
devices, inherited from tests/conftest.py): one runs 40 steps straight; the other is
killed as soon as a checkpoint past step 20 exists, then started again with the same
command, and resumes from its latest checkpoint (state and data iterator position).
"""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _command(workdir, data_dir):
  return [
    sys.executable,
    "-m",
    "lfpe.main",
    "--config=configs/vit_digits.py:small=1",
    f"--workdir={workdir}",
    f"--config.data.data_dir={data_dir}",
    "--config.total_steps=40",
    "--config.checkpoint_every=4",
    "--config.eval_every=20",
    "--config.eval_batch_size=120",
    "--config.log_every=1",
    "--config.keep_checkpoints=2",
    "--config.progress=False",
  ]


def _start(workdir, data_dir):
  return subprocess.Popen(
    _command(workdir, data_dir),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )


def _steps(workdir):
  folder = os.path.join(workdir, "checkpoints")
  names = os.listdir(folder) if os.path.isdir(folder) else []
  return sorted(int(n) for n in names if n.isdigit())


def _final_state(workdir):
  path = os.path.abspath(os.path.join(workdir, "checkpoints", "40", "state"))
  return ocp.StandardCheckpointer().restore(path)  # step, params, opt_state, constants


def _losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    lines = [json.loads(line) for line in f]
  return [(x["step"], x["loss"]) for x in lines if x["split"] == "train"]


def test_sigkill_then_resume_is_bitwise_exact(tmp_path):
  data_dir, straight, broken = tmp_path / "data", tmp_path / "straight", tmp_path / "broken"
  # Build the dataset once, so that the two runs below do not race to build it.
  from lfpe.data import prepare  # noqa: PLC0415

  prepare("digits", str(data_dir))
  unbroken = _start(straight, data_dir)
  victim = _start(broken, data_dir)
  deadline = time.time() + 600  # generous: two subprocesses on a loaded 2-core machine
  while not [s for s in _steps(broken) if s > 20]:
    assert victim.poll() is None, victim.stderr.read()[-3000:]
    assert time.time() < deadline, "no checkpoint past step 20 in time"
    time.sleep(0.01)
  victim.send_signal(signal.SIGKILL)
  victim.wait()
  assert victim.returncode == -signal.SIGKILL  # killed mid-run, not finished
  assert max(_steps(broken)) < 40
  resumed = subprocess.run(
    _command(broken, data_dir), cwd=ROOT, capture_output=True, text=True, timeout=600
  )
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert unbroken.wait(timeout=600) == 0, unbroken.stderr.read()[-3000:]

  first, second = _final_state(straight), _final_state(broken)
  assert jax.tree.structure(first) == jax.tree.structure(second)
  for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True):
    np.testing.assert_array_equal(a, b)  # parameters and Adam moments, bit for bit
  assert _losses(broken) == _losses(straight)  # the metrics file reads as one run
  summary = json.loads((broken / "summary.json").read_text())
  assert summary["step"] == 40 and summary["start_step"] > 20
