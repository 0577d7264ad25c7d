"""A damaged newest checkpoint: restore falls back to the previous step, and the run ends exact.

A tiny config (TinyModel on blobs, width 32 so that its larger arrays live in OCDBT data
files rather than inline in the B-tree, one device) trains 20 steps with checkpoints at 10
and 20. Copies of that workdir get step 20 damaged (its merged OCDBT index halved, every array
file halved, the metadata JSON, the data iterator state) and
are run again: each must log the failure in one line, resume from step 10, set step 20
aside, and end bitwise equal to the uninterrupted run. A truncated array file makes orbax
raise a bare `Exception` (caused by tensorstore's ValueError), the first two cases' path.
(Not "the largest array file": an OCDBT step may keep files of earlier flushes that no read
touches, and the largest was once one of those.)
With every step damaged, the run stops with one WorkdirError naming the directory and the
way out.
"""

import json
import logging
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from train_fixtures import make_array_loader, tiny_config

from lfpe.errors import UserError, WorkdirError
from lfpe.train import trainer


def _run(workdir):
  config = tiny_config(**{"mesh.data": 1, "model.width": 32})
  return trainer.train_and_evaluate(
    config, str(workdir), make_loader=make_array_loader, devices=jax.devices()[:1]
  )


def _truncate(path):
  path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _truncate_arrays(step_dir):
  """Every tensorstore (OCDBT) data file of the state."""
  files = [p for p in (step_dir / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
  assert len(files) >= 3
  for path in files:
    _truncate(path)


def _truncate_one_small(step_dir):
  """The merged OCDBT index (`state/d/`, a few KiB, read for every array): a single small
  file. (Which per-process data files a step still reads depends on the write order, so a
  small one of those may be a leftover that no read touches.)"""
  [index] = [p for p in (step_dir / "state" / "d").iterdir() if p.is_file()]
  _truncate(index)


DAMAGE = {
  "one_small_array_file": _truncate_one_small,
  "every_array_file": _truncate_arrays,
  "metadata_json": lambda step_dir: _truncate(step_dir / "state" / "_METADATA"),
  "data_state": lambda step_dir: (step_dir / "data" / "process_0-of-1.json").unlink(),
}


def _final_state(workdir):
  return ocp.StandardCheckpointer().restore((workdir / "checkpoints" / "20" / "state").absolute())


def _records(workdir):
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  records = [json.loads(line) for line in lines]
  return [{k: v for k, v in r.items() if k != "steps_per_s"} for r in records]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """The uninterrupted run: 20 steps, checkpoints 10 and 20."""
  workdir = tmp_path_factory.mktemp("straight")
  return workdir, _run(workdir)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_newest_checkpoint_falls_back_and_ends_exact(tmp_path, straight, damage, caplog):
  workdir = tmp_path / "w"
  shutil.copytree(straight[0], workdir)
  DAMAGE[damage](workdir / "checkpoints" / "20")
  with caplog.at_level(logging.WARNING):
    summary = _run(workdir)
  notes = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
  assert len(notes) == 1, notes
  assert notes[0].startswith("Resuming from checkpoint step 10, the newest readable one: ")
  assert "step(s) [20] in" in notes[0] and "cannot be read (step 20: " in notes[0]
  on_disk = json.loads((workdir / "summary.json").read_text())
  assert on_disk["start_step"] == 10 and on_disk["step"] == 20
  assert [p.name.split("-")[0] for p in (workdir / "unreadable_checkpoints").iterdir()] == ["20"]
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["10", "20"]

  first, second = _final_state(straight[0]), _final_state(workdir)
  assert jax.tree.structure(first) == jax.tree.structure(second)
  for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True):
    np.testing.assert_array_equal(a, b)  # parameters and Adam moments, bit for bit
  assert _records(workdir) == _records(straight[0])  # one run's metrics
  assert summary["eval"] == straight[1]["eval"]


@pytest.mark.parametrize("damage", ["metadata_json", "every_array_file"])
def test_no_readable_checkpoint_is_one_clear_error(tmp_path, straight, damage):
  workdir = tmp_path / "w"
  shutil.copytree(straight[0], workdir)
  for step in ("10", "20"):
    DAMAGE[damage](workdir / "checkpoints" / step)
  metrics = (workdir / "metrics.jsonl").read_bytes()
  with pytest.raises(WorkdirError) as e:
    _run(workdir)
  message = str(e.value)
  assert isinstance(e.value, UserError)
  assert (
    f"No checkpoint in {workdir / 'checkpoints'} can be read: all are damaged (steps [10, 20]"
    in message
  )
  assert "Delete" not in message and "start a new --workdir" in message
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["10", "20"]  # kept
  assert (workdir / "metrics.jsonl").read_bytes() == metrics
