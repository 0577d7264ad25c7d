"""Errors the user fixes (a config, a dataset, a workdir), as opposed to bugs.

`python -m lfpe.main` prints a `UserError`'s message alone and exits with its `exit_code`
(2; 130 for Ctrl-C, 143 for SIGTERM) (LFPE_TRACEBACK=1 or --verbosity=1 adds the
traceback); any other exception is a bug and keeps its traceback. Each class also derives
from the built-in error it used to be, so existing `except ValueError` / `except
FileNotFoundError` still catch it.
"""

import difflib
import os
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str]) -> str:
  """' (did you mean 'X'?)' for the closest of `choices` to a misspelled `name`, or ''."""
  close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
  return f" (did you mean {close[0]!r}?)" if close else ""


def traceback_requested() -> bool:
  """Whether LFPE_TRACEBACK (set, not "0") asks for a user error's traceback too."""
  return os.environ.get("LFPE_TRACEBACK", "0") not in ("", "0")


class UserError(Exception):
  """A problem in what the user gave (config, data, workdir); the message says the fix."""

  exit_code = 2  # the status `python -m lfpe.main` and the experiments exit with


class Interrupted(UserError):
  """Ctrl-C: the message says where the run stopped and how to resume (status 130, as a shell
  reports a process that SIGINT ended)."""

  exit_code = 130


class ConfigError(UserError, ValueError):
  """A config field is missing or invalid (found before anything is built or compiled)."""


class DatasetMissingError(UserError, FileNotFoundError):
  """A dataset is not prepared in `data_dir`; the message gives the commands that prepare it."""


class DatasetDamagedError(UserError, RuntimeError):
  """A prepared dataset's files cannot be read (truncated, corrupted or deleted); the message
  names the folder and how to prepare it again."""


class WorkdirError(UserError):
  """The workdir cannot be written, or none of its checkpoints can be read."""
