"""Checkpoints: state and data position round-trip, across meshes; keep the last N."""

import sys

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from lfpe.train import checkpoint


class FakeIterator:
  def __init__(self, state):
    self.state = state

  def get_state(self):
    return self.state

  def set_state(self, state):
    self.state = state


def _state(mesh, spec):
  table = np.arange(32, dtype=np.float32).reshape(8, 4) / 7
  return {
    "w": jax.device_put(table, NamedSharding(mesh, spec)),
    "step": jax.device_put(np.int32(5), NamedSharding(mesh, P())),
  }


@pytest.mark.parametrize("data_state", [b'{"pos": 7}', {"position": 7, "epoch": 1}])
def test_roundtrip_onto_another_mesh(tmp_path, data_state):
  big = jax.make_mesh((4, 2), ("data", "model"), devices=jax.devices())
  small = jax.make_mesh((1, 1), ("data", "model"), devices=jax.devices()[:1])
  state = _state(big, P("data", "model"))
  with checkpoint.make_manager(str(tmp_path), keep=2) as manager:
    checkpoint.save(manager, 10, state, FakeIterator(data_state))
    manager.wait_until_finished()
  target_shardings = {"w": NamedSharding(small, P()), "step": NamedSharding(small, P())}
  target = checkpoint.with_shardings(jax.eval_shape(lambda: state), target_shardings)
  restored_iter = FakeIterator(None)
  hooks = sys.excepthook, sys.unraisablehook
  with checkpoint.make_manager(str(tmp_path), keep=2) as manager:
    step, restored = checkpoint.restore_latest(manager, target, restored_iter)
  assert (sys.excepthook, sys.unraisablehook) == hooks  # the echo filter is gone after a read
  assert step == 10 and restored_iter.state == data_state
  np.testing.assert_array_equal(np.asarray(restored["w"]), np.asarray(state["w"]))
  assert restored["w"].sharding == target_shardings["w"]
  assert int(restored["step"]) == 5


def test_fresh_directory_restores_nothing_and_keeps_last_n(tmp_path):
  mesh = jax.make_mesh((1, 1), ("data", "model"), devices=jax.devices()[:1])
  state = _state(mesh, P())
  with checkpoint.make_manager(str(tmp_path), keep=2, async_save=False) as manager:
    assert checkpoint.restore_latest(manager, state, FakeIterator(None)) is None
    for step in (1, 2, 3, 4):
      checkpoint.save(manager, step, state, FakeIterator({"position": step}))
    manager.wait_until_finished()
    assert list(manager.all_steps()) == [3, 4]
  assert sorted(p.name for p in tmp_path.joinpath("checkpoints").iterdir()) == ["3", "4"]


def test_unfinished_checkpoints_are_removed_before_the_manager_returns(tmp_path):
  """Orbax's background removal of tmp checkpoints has ended when `make_manager` returns, so
  a run that stops before its first save cannot exit under it."""
  unfinished = [tmp_path / "checkpoints" / f"{step}.orbax-checkpoint-tmp" for step in range(20)]
  for path in unfinished:
    (path / "state").mkdir(parents=True)
  with checkpoint.make_manager(str(tmp_path), keep=2) as manager:
    assert not any(path.exists() for path in unfinished)
    assert manager.all_steps() == []


def test_the_echo_filter_drops_only_abandoned_reads_and_stops(monkeypatch):
  """After a failed read the filter stays for the run: a real error must still be printed
  (the main thread's uncaught errors go through sys.excepthook too)."""
  printed, unraisable = [], []
  monkeypatch.setattr(sys, "excepthook", lambda kind, error, trace: printed.append(error))
  monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
  stop = checkpoint._silence_abandoned_reads()
  closed, bug = RuntimeError("Event loop is closed"), ValueError("a bug after the resume")
  for error in (closed, bug):
    sys.excepthook(type(error), error, None)
  damaged = Exception("orbax's wrapper")
  damaged.__cause__ = ValueError("OUT_OF_RANGE: Error reading byte range")
  for error in (damaged, closed, TypeError("not an echo")):
    sys.unraisablehook(type("Unraisable", (), {"exc_value": error, "object": None}))
  assert printed == [bug]
  assert [type(u.exc_value) for u in unraisable] == [TypeError]
  stop()
  assert sys.unraisablehook == unraisable.append  # the previous hooks are back
  sys.excepthook(RuntimeError, closed, None)
  assert printed == [bug, closed]
