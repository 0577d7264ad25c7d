"""Command line entry point: train and evaluate one config.

  python -m lfpe.main --config=configs/vit_digits.py:posemb=fourier --workdir=/tmp/digits
  python -m lfpe.main --config=configs/vit_digits.py --config.total_steps=100 --workdir=...
  python -m lfpe.main --config=configs/vit_digits.py --config.model.posemb.gamma=0.5 ...

`--config=FILE[:ARG]` picks the config, `--config.FIELD=VALUE` overrides any field of it,
`--config.SPEC.OPTION=VALUE` one option of an encoding spec (lfpe.train.config_cli). Running
again with the same workdir resumes from its newest readable checkpoint; a workdir already
trained to config.total_steps is left as it is; a config that differs from the workdir's
record in a field its checkpoints depend on is refused (lfpe.train.workdir). Several
processes (`config.distributed=True`, or a cluster environment such as
JAX_COORDINATOR_ADDRESS, SLURM or Open MPI) join with `jax.distributed.initialize()` first.

User errors (a bad flag or config, a missing dataset, an unusable workdir, a diverged loss)
print one line, `lfpe.main: <message>`, and exit with status 2; Ctrl-C prints the step it
stopped at and the checkpoint a re-run resumes from, and exits 130; SIGTERM (a preemption
notice) saves a checkpoint at the step reached, says so, and exits 143; `--help` exits 0.
LFPE_TRACEBACK=1 or --verbosity=1 also prints the traceback. Other exceptions are bugs and
keep their traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback

from absl import app, flags, logging

from lfpe.errors import ConfigError, Interrupted, UserError, did_you_mean, traceback_requested

_CONFIG = flags.DEFINE_string(
  "config",
  None,
  "Config file, optionally with an argument: configs/NAME.py:k=v,k2=v2. "
  "Override fields with --config.FIELD=VALUE.",
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Where checkpoints, metrics and summary go.")
_OVERRIDE = "--config."


def split_overrides(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
  """(argv without the overrides, [(dotted path, text)]) of `--config.PATH=VALUE` flags
  (also `--config.PATH VALUE`), in the order given."""
  rest, overrides, args = [], [], iter(argv)
  for arg in args:
    if not arg.startswith(_OVERRIDE):
      rest.append(arg)
      continue
    path, eq, text = arg[len(_OVERRIDE) :].partition("=")
    if not eq:
      text = next(args, None)
      if text is None:
        raise ConfigError(f"{arg} needs a value: {arg}=VALUE.")
    overrides.append((path, text))
  return rest, overrides


_HELP = ("--help", "-h", "-?", "--helpshort", "--helpfull")


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's flags from `argv`; returns [program, *encoded overrides] for `main`. Help is
  printed to stdout with status 0 (absl's own --help exits 1)."""
  asked = [arg for arg in argv[1:] if arg in _HELP]
  if asked:
    app.usage(shorthelp=asked[0] != "--helpfull", writeto_stdout=True, exitcode=0)
  try:
    rest, overrides = split_overrides(argv)
    unexpected = flags.FLAGS(rest)[1:]
    if unexpected:
      raise ConfigError(f"unexpected argument {unexpected[0]!r}; give --config=... --workdir=...")
  except (flags.Error, ConfigError) as e:
    _exit_with(e)
  return [argv[0], *(f"{path}={text}" for path, text in overrides)]


def _exit_with(error: Exception) -> None:
  """One line, `lfpe.main: <message>`, and the error's exit status (2; 130 Ctrl-C; 143 SIGTERM)."""
  if traceback_requested() or _verbose():
    traceback.print_exception(error)
  message = str(error)
  if isinstance(error, flags.UnrecognizedFlagError):
    hint = did_you_mean(error.flagname, ["config", "workdir"])
    if not hint and "." not in error.flagname:  # a config field given as a flag?
      hint = f"; a config field is set as --config.FIELD=VALUE (e.g. --config.{error.flagname})"
    message = f"unknown flag --{error.flagname}{hint}"
  print(f"lfpe.main: {message}", file=sys.stderr, flush=True)
  sys.stdout.flush()
  # Not sys.exit: a failed orbax restore leaves tensorstore callbacks that print "Event loop
  # is closed" tracebacks at interpreter exit. Nothing is pending here: user errors come
  # before training, or after the trainer has closed its checkpoints and metric files.
  os._exit(getattr(error, "exit_code", 2))


def _verbose() -> bool:
  return flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1


def main(argv: list[str]) -> None:
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  try:
    from lfpe.train import config_cli, sharding, trainer  # noqa: PLC0415 (lfpe[train])

    for name, flag in (("config", _CONFIG), ("workdir", _WORKDIR)):
      if not flag.value:
        raise ConfigError(f"--{name} is required: {flags.FLAGS[name].help}")
    overrides = [tuple(arg.split("=", 1)) for arg in argv[1:]]
    config = config_cli.load(_CONFIG.value, overrides)
    sharding.maybe_initialize_distributed(bool(config.get("distributed", False)))
    trainer.train_and_evaluate(config, _WORKDIR.value)
  except UserError as e:  # includes a NaN loss, a missing extra and Ctrl-C while training
    _exit_with(e)
  except KeyboardInterrupt:  # before training started (loading, compiling)
    _exit_with(Interrupted("interrupted before training started; re-run the same command."))


def _exit_with_parent(parent: int) -> None:
  """Ends this process within a second of its parent (`parent`, a pid) ending: a data worker of
  a run that was killed (SIGKILL, SIGTERM: no trainer left to close it) stops, instead of
  waiting on its full queue forever."""
  while os.getppid() == parent:
    time.sleep(1)
  os._exit(1)


def run() -> None:
  app.run(main, flags_parser=_parse_flags)


if __name__ == "__main__":
  run()
elif __name__ == "__mp_main__":  # a process this one spawned (grain's `data.worker_count` workers)
  # Ctrl-C reaches the whole process group, and a scheduler's SIGTERM (Slurm's) every process
  # of the job: the trainer alone acts on them (it stops after the step, or saves it, then
  # closes the workers; grain stops them by an event, then SIGKILL). A worker that died of one
  # would fail the step reading its batch, or print a KeyboardInterrupt traceback. So every
  # loader with workers must be closed (the trainer's are, however it ends): at exit,
  # multiprocessing's SIGTERM to a daemon worker no longer ends it.
  for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, signal.SIG_IGN)
  threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
