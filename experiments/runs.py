"""How an experiment adapts a shipped config to one of its runs (seed, length, no progress bar)."""

from __future__ import annotations

from typing import Any


def for_run(config: Any, *, seed: int, steps: int = 0, eval_every: int = 0) -> Any:
  """`config` (unlocked and changed in place) with `seed`, no progress bar, and with `steps`
  > 0 that many updates, evaluated every `eval_every` steps (0: at the end), checkpointed at
  the end, and warmup cut to at most a tenth of the run."""
  with config.unlocked():
    config.seed = seed
    config.progress = False
    if steps:
      config.total_steps = steps
      config.eval_every = eval_every or steps
      config.checkpoint_every = steps
      config.schedule.warmup_steps = min(config.schedule.warmup_steps, steps // 10)
  return config
