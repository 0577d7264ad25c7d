"""A remote workdir's growing files, written in a local folder and uploaded whole.

Object stores (gs://, s3://) cannot append to a file, and metrics.jsonl and TensorBoard's
event files grow by appends. For a remote workdir, `MetricWriter` writes them in a local
temporary folder (`Mirror.local`), and `push` uploads through `etils.epath` each file changed
since its last upload (whole: they are small). Files named in `pull` are first downloaded,
so that a resumed run appends to its earlier metrics. For a local workdir `local` is the
workdir itself and `push` does nothing.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time

from etils import epath

from lfpe.train.workdir import is_remote


class Mirror:
  """The local side of `workdir` (see the module docstring); uploads at most every `every_s`
  seconds unless forced. Use as a context manager: leaving it uploads and cleans up."""

  def __init__(self, workdir: str, *, pull: tuple[str, ...] = (), every_s: float = 30.0):
    self.remote = epath.Path(workdir) if is_remote(workdir) else None
    self.local = tempfile.mkdtemp(prefix="lfpe-workdir-") if self.remote else workdir
    os.makedirs(self.local, exist_ok=True)
    self._every_s = every_s
    self._uploaded: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime) uploaded
    self._last_push = -math.inf
    for name in pull if self.remote else ():
      source = self.remote / name
      if source.exists():
        local = os.path.join(self.local, name)
        epath.Path(local).write_bytes(source.read_bytes())
        self._uploaded[name] = _signature(local)

  def push(self, *, force: bool = False) -> None:
    """Uploads every local file changed since its last upload (remote workdirs only)."""
    now = time.monotonic()
    if self.remote is None or (not force and now - self._last_push < self._every_s):
      return
    for folder, _, names in os.walk(self.local):
      for name in names:
        local = os.path.join(folder, name)
        relative, signature = os.path.relpath(local, self.local), _signature(local)
        if self._uploaded.get(relative) != signature:
          target = self.remote / relative
          target.parent.mkdir(parents=True, exist_ok=True)
          target.write_bytes(epath.Path(local).read_bytes())
          self._uploaded[relative] = signature
    self._last_push = now

  def close(self) -> None:
    if self.remote is not None:
      self.push(force=True)
      shutil.rmtree(self.local, ignore_errors=True)

  def __enter__(self) -> Mirror:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _signature(path: str) -> tuple[int, int]:
  stat = os.stat(path)
  return stat.st_size, stat.st_mtime_ns
