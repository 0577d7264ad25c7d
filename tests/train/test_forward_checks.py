"""Every grid a run meets besides its own (`data.train_sizes`, each named evaluation's data)
is traced through the model before training: a grid the model refuses is a ConfigError that
names the field, not a traceback at the step or evaluation that first reaches it."""

import jax
import pytest

from configs import vit_digits
from lfpe.errors import ConfigError
from lfpe.train import evaluation, trainer

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


def _patch_config(evals):
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.model = {**config.model.to_dict(), "patch_size": (2, 4)}  # a pair, not an int field
    config.total_steps = 2
    config.evals = evals
  return config


def test_an_evaluation_at_another_patch_size_keeps_the_trained_kernel(tmp_path):
  """A 4x2 patch kernel has the 2x4 one's shape but not its layout: the evaluation's model
  keeps the trained layout (`trained_patch_size`) and PI-resizes it on the fly (FlexiViT)."""
  config = _patch_config({"transposed": {"model": {"patch_size": (4, 2)}}})
  variant = evaluation.configs(config)["transposed"]
  built = evaluation.on_training_data(config, variant).model
  assert (built.patch_size, built.trained_patch_size) == ((4, 2), (2, 4))
  assert "trained_patch_size" not in evaluation.on_training_data(config, config).model
  summary = trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert 0 <= summary["eval/transposed"]["accuracy"] <= 1


def test_an_evaluation_that_names_another_trained_patch_size_is_refused(tmp_path):
  config = _patch_config({"wrong": {"model": {"patch_size": (4, 2), "trained_patch_size": (4, 2)}}})
  with config.unlocked():
    config.model.trained_patch_size = None  # a field the evaluation may set
  refused = r"config.evals.wrong.model.trained_patch_size=\(4, 2\) is not the trained \(2, 4\)"
  with pytest.raises(ConfigError, match=refused):
    trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert not (tmp_path / "metrics.jsonl").exists()
