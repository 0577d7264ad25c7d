"""A workdir is a record: its config.json is what trained its checkpoints, and stays so.

One small run trains a workdir (module fixture); each test copies it and runs the real
command line on it: refused runs leave config.json and the checkpoints as they were and
list each differing field as `old -> new`; safe changes are allowed and logged; a workdir
without its record holding another model is refused without moving a checkpoint.
"""

import json
import shutil

import pytest
from cli_helpers import assert_one_line_error, run_main

from lfpe.train import workdir as workdir_lib

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)

SMALL = "--config=configs/vit_digits.py:small=1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("trained") / "w"
  result = run_main(SMALL, f"--workdir={workdir}")
  assert result.returncode == 0, result.stderr[-3000:]
  return workdir


@pytest.fixture
def copy(trained, tmp_path):
  workdir = tmp_path / "w"
  shutil.copytree(trained, workdir)
  return workdir


def _snapshot(workdir):
  files = [workdir / "config.json", workdir / "summary.json", workdir / "metrics.jsonl"]
  checkpoints = sorted(str(p.relative_to(workdir)) for p in (workdir / "checkpoints").rglob("*"))
  return [f.read_bytes() for f in files], checkpoints


def test_the_record_is_the_config_that_trained(trained):
  record = json.loads((trained / "config.json").read_text())
  assert record["total_steps"] == 6 and record["model"]["posemb"] == "fourier(gamma=0.25)"


def test_a_refused_value_leaves_the_record(copy):
  before = _snapshot(copy)
  assert_one_line_error(run_main(SMALL, f"--workdir={copy}", "--config.batch_size=-8"))
  assert _snapshot(copy) == before


@pytest.mark.parametrize(
  "overrides, listed",
  [
    (
      ("--config.model.posemb=sine_2d", "--config.model.mlp_dim=64"),
      (
        "config.model.mlp_dim: 32 -> 64",
        "config.model.posemb: 'fourier(gamma=0.25)' -> 'sine_2d'",
        "--config.model.mlp_dim=32",
      ),
    ),
    (
      ("--config.model.posemb.gamma=0.5",),
      (
        "'fourier(gamma=0.25)' -> 'fourier(gamma=0.5)'",
        "'--config.model.posemb=fourier(gamma=0.25)'",  # quoted: pasted into a shell as is
      ),
    ),
    (("--config.optim.lr=0.1",), ("config.optim.lr: 0.003 -> 0.1",)),
    (("--config.seed=3",), ("config.seed: 0 -> 3",)),
    (("--config.data.image_size=8",), ("config.data.image_size: 16 -> 8",)),
  ],
  ids=["model", "spec option", "optimizer", "seed", "data"],
)
def test_another_experiment_is_refused_before_restoring(copy, overrides, listed):
  before = _snapshot(copy)
  message = assert_one_line_error(
    run_main(SMALL, f"--workdir={copy}", *overrides),
    f"{copy} was trained with another config",
    "Use a new --workdir",
    *listed,
  )
  assert "Delete" not in message and "No checkpoint" not in message
  assert _snapshot(copy) == before
  assert not (copy / "unreadable_checkpoints").exists()


def test_safe_changes_are_allowed_and_logged(copy):
  result = run_main(
    SMALL,
    f"--workdir={copy}",
    "--config.total_steps=8",
    "--config.eval_every=4",
    "--config.progress=false",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "config.total_steps: 6 -> 8 (allowed" in result.stderr
  assert "config.eval_every: 3 -> 4 (allowed" in result.stderr
  record = json.loads((copy / "config.json").read_text())
  assert (record["total_steps"], record["eval_every"], record["progress"]) == (8, 4, False)
  assert json.loads((copy / "summary.json").read_text())["start_step"] == 6


def test_without_its_record_another_model_is_refused_and_its_checkpoints_kept(copy):
  (copy / "config.json").unlink()
  checkpoints = sorted((copy / "checkpoints").iterdir())
  message = assert_one_line_error(
    run_main(SMALL, f"--workdir={copy}", "--config.model.mlp_dim=64"),
    "holds another model than this config's",
    "shape (32,) in the checkpoint, shape (64,) in this config's model",
    "The checkpoints are kept",
  )
  assert "Delete" not in message
  assert sorted((copy / "checkpoints").iterdir()) == checkpoints
  assert not (copy / "unreadable_checkpoints").exists() and not (copy / "config.json").exists()


def test_a_workdir_without_checkpoints_is_not_compared(tmp_path):
  """A run killed before its first checkpoint leaves nothing to resume: any config may start."""
  workdir = tmp_path / "w"
  workdir.mkdir()
  (workdir / "config.json").write_text(json.dumps({"seed": 5}))
  result = run_main(SMALL, f"--workdir={workdir}", "--config.total_steps=2")
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads((workdir / "config.json").read_text())["seed"] == 0


def test_differences_lists_every_changed_and_missing_field():
  old = {"a": 1, "m": {"x": 1, "y": [1, 2]}, "gone": 1}
  new = {"a": 1, "m": {"x": 2, "y": [1, 2]}, "new": {"z": 0}}
  assert workdir_lib.differences(old, new) == {
    "gone": (1, "<absent>"),
    "m.x": (1, 2),
    "new.z": ("<absent>", 0),
  }


def test_safe_fields_exist_in_the_base_config():
  from lfpe.train.config_lib import base_config  # noqa: PLC0415

  fields = set(workdir_lib.flatten(base_config())) | {"data.data_dir"}
  assert set(workdir_lib.SAFE_TO_CHANGE) <= fields


def test_a_record_older_than_a_new_field_resumes_at_the_fields_neutral_value(copy):
  """Fields added since a workdir was trained (`ADDED_FIELDS`) compare equal when this config
  leaves them at the value that does what the older code did; any other value is refused."""
  record = json.loads((copy / "config.json").read_text())
  del record["seeds"], record["optim"]["trainable"], record["data"]["eval_preprocess"]
  del record["data"]["epoch_orders"]
  (copy / "config.json").write_text(json.dumps(record))
  result = run_main(SMALL, f"--workdir={copy}", "--config.total_steps=7")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "seeds" not in result.stderr and "eval_preprocess" not in result.stderr
  (copy / "config.json").write_text(json.dumps(record))
  flag = "--config.data.epoch_orders=independent"
  assert_one_line_error(  # the record predates both fields: the values the older code had
    run_main(SMALL, f"--workdir={copy}", "--config.total_steps=8", "--config.seeds=2", flag),
    "config.seeds: 0 -> 2",
    "config.data.epoch_orders: 'grain' -> 'independent'",
    "--config.data.epoch_orders=grain",
  )


def test_added_fields_are_at_their_base_config_defaults():
  from lfpe.data import default_config  # noqa: PLC0415
  from lfpe.train.config_lib import base_config  # noqa: PLC0415

  config = base_config()
  config.data = default_config()
  defaults = workdir_lib.flatten(config)
  assert {p: defaults[p] for p in workdir_lib.ADDED_FIELDS} == workdir_lib.ADDED_FIELDS
