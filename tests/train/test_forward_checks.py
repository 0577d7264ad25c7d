"""Every grid a run meets besides its own (`data.train_sizes`, each named evaluation's data)
is traced through the model before training: a grid the model refuses is a ConfigError that
names the field, not a traceback at the step or evaluation that first reaches it."""

import jax
import pytest

from configs import vit_digits
from lfpe.errors import ConfigError
from lfpe.tasks.classification import Classification
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
    config.model.trained_patch_size = None  # a field an evaluation may set, left to lfpe
    config.total_steps = 2
    config.evals = evals
  return config


def test_an_evaluation_at_another_patch_size_keeps_the_trained_kernel(tmp_path):
  """A 4x2 patch kernel has the 2x4 one's shape but not its layout: the evaluation's model
  keeps the trained layout (`trained_patch_size`) and PI-resizes it on the fly (FlexiViT);
  a patch that does not divide the training images runs on the evaluation's own images."""
  transposed, p3 = {"model": {"patch_size": (4, 2)}}, {"model": {"patch_size": (3, 3)}}
  p3["data"] = {"image_size": 18}
  config = _patch_config({"transposed": transposed, "p3": p3})
  variants = evaluation.configs(config)
  built = evaluation.on_training_data(config, variants["transposed"]).model
  assert (built.patch_size, built.trained_patch_size) == ((4, 2), (2, 4))
  assert evaluation.on_training_data(config, variants["p3"]).model.trained_patch_size == (2, 4)
  assert evaluation.on_training_data(config, config).model.trained_patch_size is None
  summary = trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert 0 <= summary["eval/transposed"]["accuracy"] <= 1 and "eval/p3" in summary


def test_an_evaluation_that_names_another_trained_patch_size_is_refused(tmp_path):
  wrong = {"model": {"patch_size": (4, 2), "trained_patch_size": (4, 2)}}
  config = _patch_config({"wrong": wrong})
  refused = r"config.evals.wrong.model.trained_patch_size=\(4, 2\) is not the trained \(2, 4\)"
  with pytest.raises(ConfigError, match=refused):
    trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:1])
  assert not (tmp_path / "metrics.jsonl").exists()


def test_a_packed_evaluation_cuts_the_patches_of_its_own_model():
  """NaFlex: the pipeline cuts each evaluation's patches, so its `naflex.patch` is checked
  against the evaluation's patch size (4x4 patches read as 2x8 ones would score silently)."""
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.data.naflex = {"patch": 2, "max_tokens": 64, "sizes": ((16, 16),)}
    config.evals = {"p4": {"model": {"patch_size": 4}}}
  with pytest.raises(
    ValueError, match=r"config.data.naflex.patch=2 .*config.evals.p4.model: \(4, 4\)"
  ):
    Classification().validate(config)
  with config.unlocked():
    config.evals.p4.data = {"naflex": {"patch": 4, "max_tokens": 16, "sizes": ((16, 16),)}}
  Classification().validate(config)
