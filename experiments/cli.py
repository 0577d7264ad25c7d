"""An experiment's command line as a user meets it: a mistake or Ctrl-C is one line, no traceback.

  if __name__ == "__main__":
    cli.run(main)

A `lfpe.errors.UserError` (a bad flag or config, a missing dataset, an `--out` made in another
mode) prints `python -m experiments.NAME.run: <message>` and exits 2; Ctrl-C prints where to
resume and exits 130 (a record resumes: finished runs are kept, runs part-way restart from
their last checkpoint). LFPE_TRACEBACK=1 adds the traceback. Other exceptions are bugs and keep
theirs.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

from experiments import provenance
from lfpe.errors import Interrupted, UserError, traceback_requested

RESUME = (
  "interrupted; re-run the same command to resume (finished runs are kept, runs part-way "
  "continue from their last checkpoint)."
)


def run(main: Callable[[], Any]) -> None:
  """Calls `main()`; a user error or Ctrl-C ends the process with one line."""
  program = f"python -m {sys.modules['__main__'].__spec__.name}"
  provenance.run_provenance()  # the commit of the code imported now, whatever is committed later
  try:
    main()
  except KeyboardInterrupt as e:
    _exit(program, Interrupted(RESUME), e)
  except UserError as e:
    _exit(program, e, e)


def _exit(program: str, error: UserError, raised: BaseException) -> None:
  if traceback_requested():
    traceback.print_exception(raised)
  print(f"{program}: {error}", file=sys.stderr, flush=True)
  sys.exit(error.exit_code)
