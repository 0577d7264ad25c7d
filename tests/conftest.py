"""Test setup: 8 fake CPU devices (for sharding tests), float32 matmuls, CPU only."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
