"""Command line entry point: train and evaluate one config.

  python -m lfpe.main --config=configs/vit_digits.py:posemb=fourier --workdir=/tmp/digits
  python -m lfpe.main --config=configs/vit_digits.py --config.total_steps=100 --workdir=...

`--config.FIELD=VALUE` overrides any field of the (locked) config. Running again
with the same workdir resumes from its newest readable checkpoint; a workdir already
trained to config.total_steps is left as it is. Several processes
(`config.distributed=True`, or a cluster environment such as JAX_COORDINATOR_ADDRESS,
SLURM or Open MPI) join with `jax.distributed.initialize()` first.

User errors (a bad config, a missing dataset, an unusable workdir, a diverged loss)
print their message alone and exit with status 2; LFPE_TRACEBACK=1 or --verbosity=1
also prints the traceback. Other exceptions are bugs and keep their traceback.
"""

from __future__ import annotations

import os
import sys
import traceback

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from lfpe.errors import UserError, WorkdirError
from lfpe.train import sharding, trainer

_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file, optionally with an argument: configs/NAME.py:k=v,k2=v2."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Where checkpoints, metrics and summary go.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  config, workdir = _CONFIG.value, _WORKDIR.value
  sharding.maybe_initialize_distributed(bool(config.get("distributed", False)))
  try:
    if jax.process_index() == 0:
      _write_config(config, workdir)
    trainer.train_and_evaluate(config, workdir)
  except (UserError, trainer.NonFiniteLossError) as e:
    if os.environ.get("LFPE_TRACEBACK", "0") not in ("", "0") or flags.FLAGS.verbosity >= 1:
      traceback.print_exc()
    print(f"lfpe.main: {e}", file=sys.stderr)
    sys.exit(2)


def _write_config(config, workdir: str) -> None:
  """WORKDIR/config.json: the config this run used (WorkdirError if it cannot be written)."""
  try:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "config.json"), "w") as f:
      f.write(config.to_json_best_effort(indent=2))
  except OSError as e:
    raise WorkdirError(f"Cannot write to --workdir={workdir}: {e}") from e


if __name__ == "__main__":
  app.run(main)
