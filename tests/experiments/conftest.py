"""Fixtures shared by the experiments' tests."""

import pytest

from experiments import provenance


@pytest.fixture
def fresh_stamp():
  """This process's run provenance taken anew in the test (a faked `provenance`), and dropped
  after it, so no other test sees the fake."""
  provenance.run_provenance.cache_clear()
  yield
  provenance.run_provenance.cache_clear()
