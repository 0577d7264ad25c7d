"""Remote workdirs (gs://): every file through etils.epath, appended ones through a Mirror.

gs://bucket is mocked onto a local folder (`epath.testing.mock_epath`); orbax's own gs://
I/O (tensorstore's GCS driver) is orbax's and is pointed at the same folder.
"""

import functools
import json
import os

import pytest
from etils.epath import testing as epath_testing
from train_fixtures import make_array_loader, tiny_config

from lfpe.train import checkpoint, mirror, trainer
from lfpe.train.workdir import is_remote


@pytest.fixture
def bucket(tmp_path, monkeypatch):
  """gs://bucket/... read and written in tmp_path/bucket; yields that folder."""
  root = tmp_path / "bucket"
  root.mkdir()
  local = lambda path: str(path).replace("gs://bucket", str(root))

  def mapped(fn, path, *args, **kwargs):
    args = [local(a) if isinstance(a, str) or hasattr(a, "parts") else a for a in args]
    return fn(local(path), *args, **kwargs)

  names = (
    "copy exists glob isdir listdir makedirs mkdir open remove rename replace rmtree stat walk"
  )
  manager = checkpoint.make_manager
  monkeypatch.setattr(
    checkpoint, "make_manager", lambda workdir, **kw: manager(local(workdir), **kw)
  )
  with epath_testing.mock_epath(**dict.fromkeys(names.split(), mapped)):
    yield root


def test_is_remote():
  assert is_remote("gs://b/run") and is_remote("s3://b") and not is_remote("/tmp/gs:/x")


def test_mirror_uploads_changed_files_whole_and_pulls_named_ones(bucket):
  (bucket / "run").mkdir()
  (bucket / "run" / "metrics.jsonl").write_text("old\n")
  with mirror.Mirror("gs://bucket/run", pull=("metrics.jsonl",), every_s=3600) as m:
    assert m.local != "gs://bucket/run" and not m.local.startswith("gs:")
    assert open(os.path.join(m.local, "metrics.jsonl")).read() == "old\n"  # pulled
    with open(os.path.join(m.local, "metrics.jsonl"), "a") as f:
      f.write("new\n")
    os.makedirs(os.path.join(m.local, "tb"))
    open(os.path.join(m.local, "tb", "events"), "w").write("e1")
    m.push()  # the first push goes through; the next within `every_s` waits
    assert (bucket / "run" / "metrics.jsonl").read_text() == "old\nnew\n"
    assert (bucket / "run" / "tb" / "events").read_text() == "e1"
    open(os.path.join(m.local, "tb", "events"), "a").write("e2")
    m.push()
    assert (bucket / "run" / "tb" / "events").read_text() == "e1"
    m.push(force=True)
    assert (bucket / "run" / "tb" / "events").read_text() == "e1e2"
  assert not os.path.exists(m.local)  # the local side is removed on close


def test_a_local_mirror_is_the_workdir(tmp_path):
  with mirror.Mirror(str(tmp_path / "run")) as m:
    assert m.local == str(tmp_path / "run") and os.path.isdir(m.local)
    m.push(force=True)  # nothing to do
  assert os.path.isdir(m.local)


def test_training_in_a_remote_workdir_writes_and_resumes_there(bucket, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # a URL taken for a local path would make ./gs:
  run = functools.partial(trainer.train_and_evaluate, make_loader=make_array_loader)
  run(tiny_config(total_steps=10, checkpoint_every=5), "gs://bucket/run")
  summary = run(tiny_config(total_steps=20, checkpoint_every=5), "gs://bucket/run")
  workdir = bucket / "run"
  lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert [x["step"] for x in lines if x["split"] == "train"] == list(range(1, 21))
  assert json.loads((workdir / "summary.json").read_text()) == summary and summary["step"] == 20
  assert json.loads((workdir / "config.json").read_text())["total_steps"] == 20
  assert sorted(os.listdir(workdir / "checkpoints")) == ["10", "15", "20"]
  assert len(os.listdir(workdir / "tb")) == 2  # one event file per run
  assert not (tmp_path / "gs:").exists()
  # A finished remote run is left as it is: its summary read back through epath.
  assert run(tiny_config(total_steps=20, checkpoint_every=5), "gs://bucket/run") == summary
