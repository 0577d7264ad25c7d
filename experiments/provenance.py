"""Where a record comes from: commit, command, machine, library versions and date.

Every results file an experiment writes carries `provenance()` under "provenance", so a
number can be traced to the code and machine that made it (tests/experiments check it).
"""

from __future__ import annotations

import datetime
import fnmatch
import importlib.metadata
import os
import platform
import re
import subprocess
import sys

LIBRARIES = ("jax", "jaxlib", "flax", "optax", "numpy", "orbax-checkpoint", "grain")
FIELDS = ("commit", "command", "machine", "libraries", "date")


def _commit() -> str:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    out = subprocess.run(
      ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    dirty = subprocess.run(
      ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
      capture_output=True,
      text=True,
      check=True,
    )
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return out.stdout.strip() + ("+uncommitted changes" if code_changes(dirty.stdout) else "")


# What a running record writes as it goes: another record's progress does not make the code
# this one runs any different.
RECORD_DATA = ("experiments/*/results.json", "experiments/*/checks.json")


def code_changes(porcelain: str) -> list[str]:
  """The changed paths of `git status --porcelain` output, but records' data (`RECORD_DATA`)."""
  paths = [line[3:].split(" -> ")[-1] for line in porcelain.splitlines() if line.strip()]
  return [p for p in paths if not any(fnmatch.fnmatch(p, pattern) for pattern in RECORD_DATA)]


def machine() -> dict:
  """CPU model, cores this process may use, instruction-set extensions XLA:CPU cares about,
  and XLA_FLAGS (the setting a CPU number depends on)."""
  cpuinfo = ""
  if os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo") as f:
      cpuinfo = f.read()
  model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
  flags = (
    set(re.search(r"flags\s*:\s*(.*)", cpuinfo).group(1).split()) if "flags" in cpuinfo else set()
  )
  return {
    "cpu": model.group(1).strip() if model else platform.processor() or "unknown",
    "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    "isa": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma"}),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "python": platform.python_version(),
  }


def provenance(command: list[str] | None = None) -> dict:
  """The provenance of a record made now by `command` (default: this process's argv)."""
  versions = {}
  for name in LIBRARIES:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      pass
  return {
    "commit": _commit(),
    "command": " ".join(command if command is not None else ["python", *sys.argv]),
    "machine": machine(),
    "libraries": versions,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }
