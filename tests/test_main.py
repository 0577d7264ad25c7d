"""`python -m lfpe.main` on user errors: the message alone on stderr, exit status 2.

Each case runs the command line as a subprocess (8 fake CPU devices, inherited from
tests/conftest.py) and fails before training: a bad config override, a catalog dataset
not prepared in data_dir, a workdir that cannot be used. LFPE_TRACEBACK=1 or
--verbosity=1 adds the traceback.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _main(*args, **env):
  environ = {k: v for k, v in os.environ.items() if k != "LFPE_TRACEBACK"}
  return subprocess.run(
    [sys.executable, "-m", "lfpe.main", *args],
    cwd=ROOT,
    env={**environ, **env},
    capture_output=True,
    text=True,
    timeout=180,
  )


def _bad_batch(tmp_path, *extra, **env):
  return _main(
    "--config=configs/vit_digits.py:small=1",
    "--config.batch_size=0",
    f"--workdir={tmp_path / 'w'}",
    *extra,
    **env,
  )


def _assert_user_error(result, message):
  assert result.returncode == 2, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  assert f"lfpe.main: {message}" in result.stderr


def test_bad_config_prints_the_message_alone(tmp_path):
  _assert_user_error(_bad_batch(tmp_path), "config.batch_size must be an integer >= 1, got 0.")


@pytest.mark.parametrize(
  "extra, env", [((), {"LFPE_TRACEBACK": "1"}), (("--verbosity=1",), {})], ids=["env", "flag"]
)
def test_traceback_on_request(tmp_path, extra, env):
  result = _bad_batch(tmp_path, *extra, **env)
  assert result.returncode == 2
  assert "Traceback" in result.stderr and "lfpe.errors.ConfigError" in result.stderr
  assert "lfpe.main: config.batch_size must be an integer >= 1, got 0." in result.stderr


def test_missing_dataset_says_how_to_prepare_it(tmp_path):
  (tmp_path / "data").mkdir()
  result = _main(
    "--config=configs/vit_cifar10.py:small=1",
    f"--config.data.data_dir={tmp_path / 'data'}",
    f"--workdir={tmp_path / 'w'}",
  )
  _assert_user_error(result, "Dataset 'cifar10' is not prepared as array_record")
  assert f"tfds build cifar10 --data_dir={tmp_path / 'data'}" in result.stderr


def test_workdir_that_is_a_file(tmp_path):
  (tmp_path / "w").write_text("not a directory")
  result = _main("--config=configs/vit_digits.py:small=1", f"--workdir={tmp_path / 'w'}")
  _assert_user_error(result, f"Cannot write to --workdir={tmp_path / 'w'}")


def test_workdir_without_a_readable_checkpoint(tmp_path):
  step = tmp_path / "w" / "checkpoints" / "6"
  for name in ("state/_METADATA", "data/process_0-of-1.json"):
    (step / name).parent.mkdir(parents=True)
    (step / name).write_text("{not json")
  result = _main(
    "--config=configs/vit_digits.py:small=1",
    f"--config.data.data_dir={tmp_path / 'data'}",
    f"--workdir={tmp_path / 'w'}",
  )
  _assert_user_error(result, f"No checkpoint in {tmp_path / 'w' / 'checkpoints'} can be read")
  assert "Delete that directory" in result.stderr
