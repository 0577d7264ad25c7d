"""experiments/runs.py: how a record adapts a shipped config for one run."""

from configs import reformer_digits
from experiments.runs import for_run


def test_for_run_sets_seed_steps_and_keeps_the_configs_checkpoints():
  config = for_run(reformer_digits.get_config(), seed=3, steps=2000, eval_every=250)
  assert (config.seed, config.progress, config.total_steps) == (3, False, 2000)
  assert config.eval_every == 250
  assert config.checkpoint_every == 1000  # the config's: a killed run loses < 1,000 steps
  assert config.schedule.warmup_steps == 100  # the config's, under a tenth of the run
  short = for_run(reformer_digits.get_config(), seed=0, steps=300)
  assert (short.checkpoint_every, short.eval_every, short.schedule.warmup_steps) == (300, 300, 30)
  unchanged = for_run(reformer_digits.get_config(), seed=1)
  assert (unchanged.total_steps, unchanged.checkpoint_every) == (3000, 1000)
