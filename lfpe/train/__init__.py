"""Training: one sectioned trainer (trainer.py) and its parts.

program.py (model, optimizer, state shardings and jitted steps of a config on a mesh),
sharding.py (mesh, logical-axis rules), optim.py (optax optimizers and schedules),
steps.py (train state, train/eval steps), checkpoint.py (orbax), metrics.py (JSON
lines, TensorBoard, progress bar, summary), validate.py (config checks),
config_lib.py (the trainer's config defaults, "key=value,..." config arguments).
Needs the `train` extra: `pip install "lfpe[train]"`.
"""

from lfpe.extras import require_extra

require_extra("train", "lfpe.train")
