"""Errors the user fixes (a config, a dataset, a workdir), as opposed to bugs.

`python -m lfpe.main` prints a `UserError`'s message alone and exits with status 2
(LFPE_TRACEBACK=1 or --verbosity=1 adds the traceback); any other exception is a bug
and keeps its traceback. Each class also derives from the built-in error it used to
be, so existing `except ValueError` / `except FileNotFoundError` still catch it.
"""


class UserError(Exception):
  """A problem in what the user gave (config, data, workdir); the message says the fix."""


class ConfigError(UserError, ValueError):
  """A config field is missing or invalid (found before anything is built or compiled)."""


class DatasetMissingError(UserError, FileNotFoundError):
  """A dataset is not prepared in `data_dir`; the message gives the commands that prepare it."""


class WorkdirError(UserError):
  """The workdir cannot be written, or none of its checkpoints can be read."""
