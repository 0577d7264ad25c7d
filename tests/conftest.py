"""Test setup: 8 fake CPU devices (for sharding tests), float32 matmuls, CPU only."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


def pytest_collection_modifyitems(items):
  """A slow test (a whole `--quick` pipeline, up to 17 min on 2 cores) is cut off after
  40 min, not pyproject's `timeout` for the default suite."""
  for item in items:
    if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
      item.add_marker(pytest.mark.timeout(2400))
