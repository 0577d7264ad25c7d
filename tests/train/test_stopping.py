"""lfpe.train.stopping's contexts on their own (the trainer's use of them: test_trainer.py,
tests/test_cli_signals.py, test_multiprocess.py)."""

import os
import signal
import time

import pytest

from lfpe.train import stopping


def _notice():
  os.kill(os.getpid(), signal.SIGTERM)
  time.sleep(0.05)  # the Python-level handler runs here


def test_a_notice_is_read_at_the_next_step_and_the_previous_handler_comes_back():
  seen = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
  try:
    with pytest.raises(RuntimeError, match="acted on"):
      with stopping.preemption_notices() as reached:
        assert not reached(1)
        _notice()
        assert reached(2) and reached(3)  # from then on, at every step
        raise RuntimeError("acted on")  # the trainer raises Preempted here
    assert seen == [] and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    _notice()
    assert seen == [signal.SIGTERM]  # the outer handler is back
  finally:
    signal.signal(signal.SIGTERM, previous)


def test_a_notice_the_loop_ended_before_acting_on_goes_to_the_handler_outside():
  """SIGTERM during the last step or the final evaluation: the run finishes, then the notice
  reaches the handler that was there before (a record's command stops on it)."""
  seen = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
  try:
    with stopping.preemption_notices():
      _notice()
      assert seen == []
    assert seen == [signal.SIGTERM]
  finally:
    signal.signal(signal.SIGTERM, previous)


def test_shielded_work_hears_neither_ctrl_c_nor_sigterm():
  seen = []
  handler = lambda signum, frame: seen.append(signum)
  before = [signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)]
  try:
    with stopping.shielded():
      for s in (signal.SIGINT, signal.SIGTERM):
        os.kill(os.getpid(), s)
      time.sleep(0.05)
    assert seen == []
  finally:
    for s, old in zip((signal.SIGINT, signal.SIGTERM), before, strict=True):
      signal.signal(s, old)
