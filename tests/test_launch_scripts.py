"""The launch scripts parse, and refuse a call without their arguments in one line."""

import pathlib
import subprocess

import pytest

pytestmark = pytest.mark.cli  # starts lfpe's command line: pinned stack only (.ci/run)

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["launch_tpu_pod.sh", "launch_gpu_host.sh"])
def test_a_launch_script_says_its_usage(script):
  env = {"PATH": "/usr/bin:/bin", "TPU_NAME": "t", "ZONE": "z"}
  done = subprocess.run(["bash", f"scripts/{script}"], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=30)  # fmt: skip
  assert done.returncode == 2 and "usage:" in done.stderr and done.stderr.count("\n") == 1


def test_the_pod_script_names_a_missing_variable():
  command = ["bash", "scripts/launch_tpu_pod.sh", "c", "w", "d"]
  env = {"PATH": "/usr/bin:/bin"}
  done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
  assert done.returncode != 0 and "TPU_NAME" in done.stderr
