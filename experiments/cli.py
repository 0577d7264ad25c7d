"""An experiment's command line as a user meets it: a mistake or Ctrl-C is one line, no traceback.

  if __name__ == "__main__":
    cli.run(main)

A `lfpe.errors.UserError` (a bad flag or config, a missing dataset, an `--out` made in another
mode) prints `python -m experiments.NAME.run: <message>` and exits 2; Ctrl-C prints where to
resume and exits 130 (a record resumes: finished runs are kept, runs part-way restart from
their last checkpoint); SIGTERM (a scheduler's notice) stops it the same way and exits 143.
Either way `--jobs`' job processes are stopped with SIGTERM, on which a run in its training
loop saves the step it reached (`lfpe.train.stopping`). LFPE_TRACEBACK=1 adds the traceback.
Other exceptions are bugs and keep theirs. `settle_mode` keeps a record and its `--quick`
test in separate `--out`s, and `add_jobs_flag` is every record's `--jobs`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from experiments import provenance
from lfpe.errors import ConfigError, Interrupted, UserError, traceback_requested
from lfpe.train import stopping

RESUME = (
  "re-run the same command to resume (finished runs are kept, runs part-way continue from "
  "their last checkpoint)."
)


class Terminated(KeyboardInterrupt):
  """SIGTERM to a record's command: it stops as on Ctrl-C (its jobs are stopped, its results
  kept), through the same cleanup."""


def _terminated(signum: int, frame: Any) -> None:
  raise Terminated


def _program() -> str:
  """`python -m experiments.NAME.run`: how the user ran this process."""
  spec = getattr(sys.modules["__main__"], "__spec__", None)
  return f"python -m {spec.name}" if spec else os.path.basename(sys.argv[0])


class _Parser(argparse.ArgumentParser):
  """argparse with a flag mistake in one line, as every other user error (not the usage)."""

  def error(self, message: str) -> NoReturn:
    print(f"{_program()}: {message} (--help lists the flags).", file=sys.stderr, flush=True)
    sys.exit(2)


def parser(doc: str) -> argparse.ArgumentParser:
  """An experiment's argument parser, described by the first line of its module's `doc`."""
  return _Parser(description=doc.splitlines()[0])


def run(main: Callable[[], Any]) -> None:
  """Calls `main()`; a user error, Ctrl-C or SIGTERM ends the process with one line."""
  program = _program()
  provenance.run_provenance()  # the commit of the code imported now, whatever is committed later
  with stopping.on_signal(signal.SIGTERM, _terminated):  # the trainer's own, while it trains
    try:
      main()
    except Terminated as e:
      _exit(program, stopping.Preempted(f"stopped (SIGTERM); {RESUME}"), e)
    except KeyboardInterrupt as e:
      _exit(program, Interrupted(f"interrupted; {RESUME}"), e)
    except UserError as e:
      _exit(program, e, e)


def _exit(program: str, error: UserError, raised: BaseException) -> None:
  if traceback_requested():
    traceback.print_exception(raised)
  print(f"{program}: {error}", file=sys.stderr, flush=True)
  sys.exit(error.exit_code)


QUICK_MARK = "QUICK"  # in an --out made with --quick


def settle_mode(args: Any) -> None:
  """Keeps a record and its `--quick` test apart: `args.quick` against the mode `args.out` was
  made with (a QUICK file marks a `--quick` one; a results.json without it is a record).

  `--status` reports the plan of the directory's own mode (and says so when the flag differs);
  training in the other mode is refused with a ConfigError, since one results.json must not
  mix the two; a `--quick` run marks a new `--out` as quick. An unset `--jobs` becomes the
  record's own (`recorded_jobs`).
  """
  mark = os.path.join(args.out, QUICK_MARK)
  made = True if os.path.exists(mark) else False if has_results(args.out) else None
  if made is not None and made != args.quick:
    if not args.status:
      raise ConfigError(
        f"--out={args.out} holds a {'--quick test' if made else 'record'}; "
        + (
          "add --quick to continue it, or give the record its own --out."
          if made
          else "give --quick runs their own --out (e.g. --out=/tmp/quick)."
        )
      )
    print(f"(--out={args.out} was made {'with' if made else 'without'} --quick: its plan)")
    args.quick = made
  if not args.status:
    try:
      os.makedirs(args.out, exist_ok=True)
    except OSError as e:
      raise ConfigError(f"--out={args.out} cannot be made ({e.strerror}); name a folder.") from None
  if made is None and args.quick and not args.status:
    with open(mark, "w") as f:
      f.write("Made by --quick: a test of the pipeline, not a record.\n")
  if getattr(args, "jobs", 0) is None:  # `add_jobs_flag` left unset: the record's own
    args.jobs = recorded_jobs(args.out) or 1


def has_results(out: str) -> bool:
  """Whether `out` holds a record's results (results.json or run workdirs)."""
  return os.path.exists(os.path.join(out, "results.json")) or os.path.isdir(
    os.path.join(out, "runs")
  )


def at_least(low: int) -> Callable[[str], int]:
  """An argparse `type`: an int >= `low` (argparse says which flag, in one line, exit 2)."""

  def parse(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < low:
      raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value

  return parse


def add_seeds_flag(parser: Any, *, default: int) -> None:
  """`--seeds N` of a record's command line: at least 2 (an interval needs two runs)."""
  parser.add_argument(
    "--seeds", type=at_least(2), default=default, help="seeds per arm (>= 2: an interval)"
  )


def add_jobs_flag(parser: Any) -> None:
  """`--jobs N` of a record's command line (`execute`'s `jobs`); unset, `settle_mode` makes it
  the record's own (`recorded_jobs`), so a resumed record and its `--status` ETA keep it."""
  parser.add_argument(
    "--jobs",
    type=at_least(1),
    default=None,
    help="runs trained at once, each in its own one-thread process (2 on a 2-core CPU: "
    "more steps per second; keep it the same across the invocations of one record). "
    "Default: the --jobs of the record's last invocation in --out, else 1",
  )


def recorded_jobs(out: str) -> int | None:
  """The `--jobs` of the last invocation that wrote `out`'s results.json (its provenance's
  command), or None (no results yet, or a command without `--jobs`: then it trained with 1)."""
  try:
    with open(os.path.join(out, "results.json")) as f:
      command = json.load(f)["provenance"]["command"]
  except (OSError, ValueError, KeyError, TypeError):
    return None
  parser = argparse.ArgumentParser(add_help=False)  # the flag as `add_jobs_flag` parsed it
  parser.add_argument("--jobs", type=int)
  return parser.parse_known_args(shlex.split(command))[0].jobs
