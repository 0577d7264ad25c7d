"""A workdir is a record: the config that trained its checkpoints, kept and enforced.

WORKDIR/config.json is written when a run starts training or resumes, never by a run that
is refused. A run in a workdir that holds checkpoints first compares its config with that
record (`check_compatible`): a field that changes the model, the optimizer state, the data
or the experiment is refused (ConfigError listing each field as `old -> new`, and the two
ways out) before anything is restored; a field in `SAFE_TO_CHANGE` or under `evals`
(evaluations read the checkpoints, never change them) is allowed and logged.

A workdir may be remote (`gs://bucket/run`, `s3://...`): every file here is read and written
through `etils.epath`, the layer orbax and TFDS use (gs:// needs `gcsfs` where TensorFlow is
absent, s3:// `s3fs`); the files that grow by appending go through `mirror.Mirror`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
import uuid
from typing import Any

from absl import logging
from etils import epath

from lfpe import extras
from lfpe.errors import ConfigError, WorkdirError

# Fields a run may change in a workdir that holds checkpoints: they change how long it
# trains, how often it logs, evaluates and saves, where it runs, and where data is read
# from, but not what the checkpoints hold or what experiment they record. Raising
# total_steps trains on from the last checkpoint (the decay of the schedule is stretched).
SAFE_TO_CHANGE = (
  "init_from",  # read only by a fresh start; a workdir with checkpoints resumes from its own
  "init_skip",
  "reset_data_position",  # how this run resumes, not what the checkpoints hold
  "total_steps",
  "log_every",
  "eval_every",
  "checkpoint_every",
  "keep_checkpoints",
  "report_every",
  "progress",
  "async_checkpoints",
  "distributed",
  "eval_batch_size",
  "mesh.data",
  "mesh.model",
  "mesh.fsdp",
  "data.data_dir",
)
_ABSENT = "<absent>"
# Fields added after workdirs existed, with the value that does what an older record did: a
# record without the field equals a config that has it at this value (JSON form).
ADDED_FIELDS = {
  "seeds": 0,
  "train_patch_sizes": [],
  "optim.trainable": [],
  "optim.freeze": [],
  "optim.no_decay": [],
  "optim.ema_decay": 0.0,
  "data.eval_preprocess": "",
  "data.epoch_orders": "grain",
  "task.mixup_alpha": 0.0,
  "task.cutmix_alpha": 0.0,
  "task.mix_prob": 1.0,
  "task.switch_prob": 0.5,
}


def is_remote(path: str) -> bool:
  """Whether `path` is a URL (`gs://...`, `s3://...`) rather than a local path."""
  return re.match(r"^[a-zA-Z][\w+.-]*://", str(path)) is not None


def absolute(path: str) -> epath.Path:
  """`path` as an epath: a local one made absolute, a URL as it is."""
  return epath.Path(path if is_remote(path) else os.path.abspath(path))


def prepare(workdir: str) -> None:
  """Creates `workdir` if needed; WorkdirError if it is a file or cannot be written (for a
  remote one: also if no filesystem library reads its scheme, naming the one to install)."""
  if is_remote(workdir):
    probe = epath.Path(workdir) / f".lfpe_write_test-{uuid.uuid4().hex}"
    try:
      probe.parent.mkdir(parents=True, exist_ok=True)
      probe.write_text("")
      probe.unlink()
    except ImportError as e:  # epath's: "Please install gcsfs to access Google Storage"
      raise WorkdirError(extras.cloud_message("--workdir", workdir, e)) from None
    except (OSError, ValueError) as e:
      raise WorkdirError(f"--workdir={workdir} cannot be written ({e}).") from None
    return
  if os.path.isfile(workdir):
    raise WorkdirError(f"--workdir={workdir} is a file, not a directory; give a directory.")
  try:
    os.makedirs(workdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=workdir, prefix=".lfpe_write_test"):
      pass  # unique per process: several processes may probe one shared workdir
  except OSError as e:
    raise WorkdirError(
      f"--workdir={workdir} cannot be written ({e.strerror or e}); give a writable directory."
    ) from None


def record_path(workdir: str) -> epath.Path:
  return epath.Path(workdir) / "config.json"


def flatten(config: Any) -> dict[str, Any]:
  """{dotted path: JSON value} of a ConfigDict (as config.json stores it) or of a dict."""
  tree = (
    json.loads(config.to_json_best_effort()) if hasattr(config, "to_json_best_effort") else config
  )
  out: dict[str, Any] = {}

  def walk(node: Any, prefix: str) -> None:
    if isinstance(node, dict) and node:
      for key, value in node.items():
        walk(value, f"{prefix}.{key}" if prefix else key)
    else:
      out[prefix] = node

  walk(tree, "")
  return out


def differences(old: Any, new: Any) -> dict[str, tuple[Any, Any]]:
  """{path: (old value, new value)} of every field that differs (`<absent>` if missing)."""
  a, b = flatten(old), flatten(new)
  return {
    path: (a.get(path, _ABSENT), b.get(path, _ABSENT))
    for path in sorted(set(a) | set(b))
    if a.get(path, _ABSENT) != b.get(path, _ABSENT)
  }


def has_checkpoints(workdir: str) -> bool:
  folder = epath.Path(workdir) / "checkpoints"
  return folder.is_dir() and any(path.name.isdigit() for path in folder.iterdir())


SHOWN_DIFFERENCES = 5  # fields a refusal lists before it counts the rest


def check_compatible(config: Any, workdir: str) -> None:
  """Refuses `config` if it differs from the workdir's record in a field that is not safe.

  Only a workdir with checkpoints is compared (one without has nothing to resume; its
  metrics are rewritten from step 0). A record that cannot be read is a WorkdirError.
  """
  path = record_path(workdir)
  if not (has_checkpoints(workdir) and path.exists()):
    return
  try:
    old = json.loads(path.read_text())
    if not isinstance(old, dict):
      raise ValueError(f"it holds a {type(old).__name__}, not a config")
  except (OSError, ValueError) as e:
    raise WorkdirError(
      f"{path} cannot be read ({e}); it records the config of this workdir's checkpoints. "
      "Restore it, or start a new --workdir."
    ) from None
  changed = {  # a field the record predates had the value ADDED_FIELDS names
    p: (ADDED_FIELDS[p] if o == _ABSENT and p in ADDED_FIELDS else o, n)
    for p, (o, n) in differences(old, config).items()
  }
  changed = {p: (o, n) for p, (o, n) in changed.items() if o != n}
  refused = {
    p: v for p, v in changed.items() if p not in SAFE_TO_CHANGE and p.split(".")[0] != "evals"
  }
  if refused:
    shown = list(refused.items())[:SHOWN_DIFFERENCES]
    listed = "; ".join(f"config.{p}: {o!r} -> {n!r}" for p, (o, n) in shown)
    more = len(refused) - len(shown)
    if more:  # many fields: most likely another config file than the one that trained it
      listed += f"; and {more} more (the config it trained with is {path})"
    first, (value, _) = shown[0]
    flag = shlex.quote(f"--config.{first}={value}")
    raise ConfigError(
      f"{workdir} was trained with another config, and its checkpoints cannot resume this one: "
      f"{listed}. Use a new --workdir for the new config, or the old values "
      f"(e.g. {flag}) to resume this one."
    )
  for p, (o, n) in changed.items():
    logging.warning("config.%s: %r -> %r (allowed in a workdir with checkpoints)", p, o, n)


def write_record(config: Any, workdir: str) -> None:
  """WORKDIR/config.json: the config this run trains with."""
  write_atomically(record_path(workdir), config.to_json_best_effort(indent=2))


def write_atomically(path: Any, text: str) -> None:
  """`path` (local or remote, `epath`) holding `text`: written beside it, then renamed over it,
  so a run killed mid-write leaves the old file or the new one, never part of one."""
  path = epath.Path(path)
  temp = path.parent / f".{path.name}.{os.getpid()}.tmp"
  temp.write_text(text)
  temp.replace(path)
