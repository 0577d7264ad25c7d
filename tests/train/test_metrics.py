"""Metric files: JSON lines, TensorBoard events, summary, truncation on resume."""

import json
import os
import struct
import time

import numpy as np
from tensorboardX.proto import event_pb2

from lfpe.train.metrics import MetricWriter, to_python


def _read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


def _tb_tags(tb_dir):
  tags = set()
  for name in os.listdir(tb_dir):
    with open(os.path.join(tb_dir, name), "rb") as f:
      data = f.read()
    pos = 0
    while pos < len(data):  # TFRecord framing: len (8), crc (4), payload, crc (4)
      (length,) = struct.unpack("<Q", data[pos : pos + 8])
      event = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + length])
      tags.update((v.tag, v.simple_value, event.step) for v in event.summary.value)
      pos += 12 + length + 4
  return tags


def test_writes_jsonl_tensorboard_and_summary(tmp_path):
  workdir = str(tmp_path)
  with MetricWriter(workdir, total_steps=4, progress=False) as writer:
    writer.write(2, "train", {"loss": np.float32(0.5), "lr": 0.1})
    writer.write(4, "train", {"loss": np.float32(0.25), "lr": 0.05})
    writer.write(4, "eval", {"accuracy": 0.75})
    writer.summary(4, wall_s=1.0)
  lines = _read_jsonl(tmp_path / "metrics.jsonl")
  assert lines[0] == {"step": 2, "split": "train", "loss": 0.5, "lr": 0.1}
  assert [(x["step"], x["split"]) for x in lines] == [(2, "train"), (4, "train"), (4, "eval")]
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary == {
    "step": 4,
    "train": {"loss": 0.25, "lr": 0.05},
    "eval": {"accuracy": 0.75},
    "wall_s": 1.0,
  }
  assert {("train/loss", 0.5, 2), ("eval/accuracy", 0.75, 4)} <= _tb_tags(tmp_path / "tb")


def test_resume_drops_lines_past_the_checkpoint(tmp_path):
  with MetricWriter(str(tmp_path), total_steps=9, progress=False) as writer:
    for step in (3, 6, 9):
      writer.write(step, "train", {"loss": float(step)})
  with MetricWriter(str(tmp_path), total_steps=9, start_step=6, progress=False) as writer:
    writer.write(9, "train", {"loss": -1.0})
  lines = _read_jsonl(tmp_path / "metrics.jsonl")
  assert [(x["step"], x["loss"]) for x in lines] == [(3, 3.0), (6, 6.0), (9, -1.0)]


def test_to_python_and_rate(tmp_path):
  assert to_python({"a": np.float32(1.5), "n": np.int32(3)}) == ({"a": 1.5, "n": 3}, {})
  assert to_python({"a": np.asarray([1.0, 2.0], np.float32)}) == ({"a": 1.5}, {"a": [1.0, 2.0]})
  writer = MetricWriter(str(tmp_path), total_steps=10, progress=False, is_main=False)
  assert writer.rate(5) > 0 and not os.listdir(tmp_path)  # other processes write nothing
  writer.close()


def test_resume_drops_a_torn_line_names_the_splits_at_its_step_and_purges_tensorboard(tmp_path):
  """A line a kill cut short is dropped; the splits logged at the resumed step are known (the
  trainer evaluates those a preempted run put off); TensorBoard is told to drop the
  interrupted run's events past the checkpoint (its `purge_step`, a file_version event), all
  of them for a run killed before its first checkpoint (they stayed beside the new ones)."""
  with MetricWriter(str(tmp_path), total_steps=9, progress=False) as writer:
    for step in (3, 6, 9):
      writer.write(step, "train", {"loss": float(step)})
    writer.write(6, "eval", {"accuracy": 0.5})
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 9, "split": "ev')
  time.sleep(1.05)  # an events file is named by the second it was opened in
  with MetricWriter(str(tmp_path), total_steps=9, start_step=6, progress=False) as writer:
    assert writer.splits_at_start == {"train", "eval"}
  assert [(x["step"], x["split"]) for x in _read_jsonl(tmp_path / "metrics.jsonl")] == [
    (3, "train"),
    (6, "train"),
    (6, "eval"),
  ]
  time.sleep(1.05)
  with MetricWriter(str(tmp_path), total_steps=9, start_step=0, progress=False):
    assert not (tmp_path / "metrics.jsonl").read_text()  # a fresh start keeps nothing
  purges = []
  for name in os.listdir(tmp_path / "tb"):
    data = (tmp_path / "tb" / name).read_bytes()
    pos = 0
    while pos < len(data):
      (length,) = struct.unpack("<Q", data[pos : pos + 8])
      event = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + length])
      purges += [event.step] * bool(event.file_version and event.step)
      pos += 12 + length + 4
  assert sorted(purges) == [1, 1, 7]  # the first run's (nothing before it), the resume's, 0's
