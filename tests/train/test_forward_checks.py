"""Every grid a run meets besides its own (`data.train_sizes`, each named evaluation's data)
is traced through the model before training: a grid the model refuses is a ConfigError that
names the field, not a traceback at the step or evaluation that first reaches it."""

import jax
import pytest

from configs import vit_digits
from lfpe.errors import ConfigError
from lfpe.train import trainer

SHRINKS = "rel_bias_2d(resample_method='beit_geometric')"  # BEiT's resize only enlarges


@pytest.mark.parametrize(
  "field, value, message",
  [
    ("evals", {"small": {"data": {"image_size": 8}}}, r"^config\.evals\.small: beit_geometric"),
    ("train_sizes", (16, 8), r"^config\.data\.train_sizes has 8 px: beit_geometric"),
  ],
)
def test_a_grid_the_model_refuses_fails_before_the_first_step(tmp_path, field, value, message):
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.model.posemb = SHRINKS
    config.total_steps = 2
    if field == "evals":
      config.evals = value
    else:
      config.data.train_sizes = value
  with pytest.raises(ConfigError, match=message):
    trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert not (tmp_path / "metrics.jsonl").exists()  # no step ran


def test_grids_the_model_takes_pass_and_train(tmp_path):
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.model.posemb = SHRINKS
    config.total_steps = 2
    config.evals = {"large": {"data": {"image_size": 24}}}
  summary = trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert summary["step"] == 2 and "eval/large" in summary


def test_an_evaluation_at_another_patch_layout_is_refused(tmp_path):
  """A 4x2 patch kernel has the 2x4 one's shape but not its layout: scored row for row it
  would be another model, so the evaluation is refused, pointing to init_from."""
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.model = {**config.model.to_dict(), "patch_size": (2, 4)}  # a pair, not an int field
    config.total_steps = 2
    config.evals = {"transposed": {"model": {"patch_size": (4, 2)}}}
  refused = r"config.evals.transposed.model.patch_size=\(4, 2\) is not the trained \(2, 4\)"
  with pytest.raises(ConfigError, match=refused + ".*--config.init_from"):
    trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert not (tmp_path / "metrics.jsonl").exists()
