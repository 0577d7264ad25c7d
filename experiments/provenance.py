"""Where a record comes from: commit, command, machine, library versions and date.

Every results file an experiment writes carries `provenance()` under "provenance", so a
number can be traced to the code and machine that made it (tests/experiments check it);
every run keeps its own (`run_provenance`), and a `--jobs` job process checks that the code
it imports is the code its record started with (`same_code`).
"""

from __future__ import annotations

import datetime
import fnmatch
import functools
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import re
import subprocess
import sys

from lfpe.errors import ConfigError

LIBRARIES = ("jax", "jaxlib", "flax", "optax", "numpy", "orbax-checkpoint", "grain")
FIELDS = ("commit", "command", "machine", "libraries", "date")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINED_CODE = ("lfpe", "configs")  # what a job process imports to train a run


def _git(*args: str) -> str:
  """git's output; a file name that is not UTF-8 (printed raw with -z) is kept, escaped."""
  return subprocess.run(
    ["git", "-C", ROOT, *args], capture_output=True, text=True, errors="surrogateescape",
    check=True,
  ).stdout  # fmt: skip


def code_fingerprint(paths: tuple[str, ...] = TRAINED_CODE) -> str | None:
  """A hash of the files under `paths` as the working tree has them, tracked or not (but
  ignored): their names and contents, so committing them, or committing elsewhere (e.g.
  experiments/), leaves it as it was; a deleted file hashes as deleted. None outside a git
  checkout."""
  try:
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths)
  except (OSError, subprocess.CalledProcessError):
    return None
  digest = hashlib.sha256()
  for name in sorted(set(listed.split("\0")) - {""}):
    path = os.path.join(ROOT, name)
    content = pathlib.Path(path).read_bytes() if os.path.isfile(path) else b"<deleted>"
    digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
  return digest.hexdigest()


DIRTY = "+uncommitted changes"  # a commit's suffix when the tree differs from it


def _commit() -> str:
  try:
    head = _git("rev-parse", "HEAD").strip()
    changed = _git("status", "--porcelain", "-z", "--untracked-files=all")
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return head + (DIRTY if code_changes(changed) else "")


# What a running record writes as it goes: another record's progress does not make the code
# this one runs any different.
RECORD_DATA = ("experiments/*/results.json", "experiments/*/checks.json")
CODE = ("lfpe/", "configs/", "experiments/")  # where an untracked .py file is code a run imports


def code_changes(porcelain: str) -> list[str]:
  """The changed paths of `git status --porcelain -z` output (NUL-separated, names unquoted,
  a rename's new path then its old one) that can change what a record computes: tracked files
  but records' data (`RECORD_DATA`), and untracked Python files under `CODE` (a new module a
  run imports; not a record's new report or figure)."""
  changed = []
  entries = iter(porcelain.split("\0"))
  for entry in entries:
    status, path = entry[:2], entry[3:]
    if "R" in status or "C" in status:
      next(entries)  # the path it was renamed or copied from
    if not path or any(fnmatch.fnmatch(path, pattern) for pattern in RECORD_DATA):
      continue
    if status == "??" and not (path.endswith(".py") and path.startswith(CODE)):
      continue
    changed.append(path)
  return changed


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


def run_cpu(entry) -> tuple[str, tuple[str, ...] | None] | None:
  """(CPU name, instruction-set extensions or None) of a results entry's own stamp
  (`run_provenance`); None where it has none. The extensions are stamped since 2026-12-05:
  two hosts of one name may compile other code."""
  stamp = entry.get("provenance") if isinstance(entry, dict) else None
  if not isinstance(stamp, dict) or not stamp.get("cpu"):
    return None
  return stamp["cpu"], tuple(stamp["isa"]) if stamp.get("isa") else None


def same_cpu(a, b) -> bool:
  """Whether two `run_cpu`s name one CPU: one name, and one set of extensions where both
  have them (an older stamp without them matches its name)."""
  return bool(a and b) and a[0] == b[0] and (not a[1] or not b[1] or a[1] == b[1])


def this_cpu() -> tuple[str, tuple[str, ...]]:
  """This machine's CPU as `run_cpu` gives a run's."""
  here = machine()
  return here["cpu"], tuple(here["isa"])


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


@functools.cache
def run_provenance() -> dict:
  """The provenance each run this invocation trains records in its own results entry: the
  commit (with `DIRTY` appended when the tree was dirty, and `dirty` saying so), command, date,
  CPU name and instruction-set extensions (`isa`, since 2026-12-05), and
  `own_command`: whether the command was an experiment's `run.py` rather than, say, a driver
  script (records span many invocations; the record-level provenance names only the last). A
  run read back from a finished workdir is stamped by the invocation that read it.

  Taken once per process, as it starts (`experiments.cli.run` calls it before the record's
  `main`): the commit of the code the process imported, not of commits made while it trains."""
  stamp = provenance()
  start_code()  # fixed now, with the commit
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  name = getattr(spec, "name", "") or ""
  own = name.startswith("experiments.") and name.endswith(".run")
  keep = {k: stamp[k] for k in ("commit", "command", "date")}
  dirty = stamp["commit"].endswith(DIRTY)
  machine = {k: stamp["machine"][k] for k in ("cpu", "isa") if k in stamp["machine"]}
  return {**keep, "dirty": dirty, **machine, "own_command": own}


RUN_STAMP = "provenance.json"  # in a run's workdir: the invocation that trained it


def stamp_workdir(workdir: str, stamp: dict) -> None:
  """Writes `stamp` (`run_provenance`) into the workdir of the run it trained."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, RUN_STAMP), "w") as f:
    json.dump(stamp, f, indent=1)


def of_workdir(workdir: str, reader: dict) -> dict:
  """The provenance of the invocation that trained the run in `workdir`, else `reader`'s (the
  invocation reading it back) marked `read_back`: it was trained by code that wrote none."""
  path = os.path.join(workdir, RUN_STAMP)
  if not os.path.exists(path):
    return {**reader, "read_back": True}
  with open(path) as f:
    return json.load(f)


@functools.cache
def start_code() -> str | None:
  """The trained code's fingerprint (`provenance.code_fingerprint`) as this process started:
  cached on the first call, which `run_provenance` makes before a record's `main`."""
  return code_fingerprint()


def warn_if_unfit_for_a_record(stamp: dict) -> None:
  """One loud line when the runs about to train cannot be traced to a commit and to the
  record's own command (their entries say so too)."""
  problems = []
  if stamp["dirty"]:
    problems.append("the tree has uncommitted changes")
  if not stamp["own_command"]:
    problems.append(f"the command ({stamp['command']}) is not an experiment's run.py")
  if problems:
    print(
      f"WARNING: the runs trained now are marked in results.json: {'; '.join(problems)}.",
      file=sys.stderr,
      flush=True,
    )


def same_code(code: str | None) -> None:
  """Stops a job process whose library differs from its record's (`code`, the record's
  `start_code`; None: not checked): a job process imports lfpe/ and configs/ from the working
  tree as it starts (one per run, `runs.execute`), while the record's process (and the
  provenance it stamps on every run) keeps the code it started with."""
  if code and code_fingerprint() != code:
    raise ConfigError(
      "lfpe/ or configs/ changed since this record started, so a new job would train with "
      "code its provenance does not name: start the record's command again (finished runs "
      "are kept; a run part-way resumes from its checkpoint)."
    )
