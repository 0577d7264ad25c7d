"""A checkpoint written by another number of processes: its data position cannot be split anew.

Each process saves its own data position (`process_I-of-N.json`). A workdir trained on N hosts
and resumed on M != N is refused in one line naming the way out, and with
`config.reset_data_position` it resumes the model and optimizer with a fresh data stream.
"""

import functools
import json
import logging
import shutil

import jax
import pytest
from train_fixtures import Interrupted, make_array_loader, tiny_config

from lfpe.errors import WorkdirError
from lfpe.train import trainer


def _run(workdir, stop_after=None, **overrides):
  config = tiny_config(**{"mesh.data": 1, **overrides})
  loader = functools.partial(make_array_loader, stop_after=stop_after)
  return trainer.train_and_evaluate(
    config, str(workdir), make_loader=loader, devices=jax.devices()[:1]
  )


@pytest.fixture
def from_two_hosts(tmp_path):
  """A workdir stopped after its step-10 checkpoint, whose data position looks as two
  processes would have saved it."""
  workdir = tmp_path / "w"
  with pytest.raises(Interrupted):
    _run(workdir, stop_after=15)
  data = workdir / "checkpoints" / "10" / "data"
  state = data / "process_0-of-1.json"
  for i in range(2):
    shutil.copy(state, data / f"process_{i}-of-2.json")
  state.unlink()
  return workdir


def test_another_process_count_is_refused_naming_the_option(from_two_hosts):
  with pytest.raises(
    WorkdirError, match=r"written by 2 processes, this run has 1.*reset_data_position=true"
  ):
    _run(from_two_hosts)
  assert (from_two_hosts / "checkpoints" / "10").exists()  # not taken for damage
  assert not (from_two_hosts / "unreadable_checkpoints").exists()


def test_reset_data_position_resumes_the_model_with_a_fresh_stream(from_two_hosts, caplog):
  with caplog.at_level(logging.WARNING):
    summary = _run(from_two_hosts, reset_data_position=True)
  assert summary["step"] == 20 and summary["start_step"] == 10
  assert "the data stream starts afresh" in caplog.text
  record = json.loads((from_two_hosts / "config.json").read_text())
  assert record["reset_data_position"] is True  # allowed in a workdir with checkpoints


def test_the_flag_leaves_a_position_of_as_many_processes_alone(tmp_path):
  """A command that keeps `reset_data_position` after it was needed resumes exactly when it
  is interrupted again (it restarted the data stream on every resume)."""
  straight = _run(tmp_path / "straight")
  with pytest.raises(Interrupted):
    _run(tmp_path / "w", stop_after=15, reset_data_position=True)
  resumed = _run(tmp_path / "w", reset_data_position=True)
  assert resumed["start_step"] == 10
  assert resumed["eval"] == straight["eval"]
  assert resumed["train"]["loss"] == straight["train"]["loss"]
