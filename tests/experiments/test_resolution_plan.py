"""The resolution benchmark's wiring: each arm's config carries the study's initial position
scales, its training choices, and policies that build (no training here)."""

import pytest

from experiments.resolution import plan, run
from lfpe import encodings
from lfpe.studies import sweep
from lfpe.tasks import classification

ARMS = {a.name: a for a in plan.arms()}


def _config(name: str):
  return run.load_config(ARMS[name], "direction", seed=1, quick=False)


@pytest.mark.parametrize("name", ["embed_1d", "embed_2d", "fourier unit", "gabor_edge"])
def test_arms_keep_the_position_studys_initial_scales(name):
  taken = set(encodings.options(ARMS[name].posemb)) & set(sweep.POSITION_INIT)
  options = encodings.parse(_config(name).model.posemb)[1]
  assert taken and all(options[k] == sweep.POSITION_INIT[k] for k in taken)


def test_training_choices_reach_the_config():
  assert dict(_config("fourier unit +aug").model.coord_augment) == plan.AUGMENT["coord_augment"]
  assert _config("embed_2d mixed-res").data.train_sizes == plan.MIXED
  assert _config("rope_axial").data.get("train_sizes") is None
  assert _config("sine_2d index").seed == 1


@pytest.mark.parametrize("name", sorted(ARMS))
def test_every_policy_of_every_arm_builds_a_model(name):
  """Each test-time policy is a valid set of options of the arm's encoding (checked when the
  model is built, as evaluate.at_sizes builds it)."""
  config = _config(name)
  task = classification.Classification()
  for options in ARMS[name].policies.values():
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.model.posemb = encodings.with_options(config.model.posemb, **options)
    task.create_model(variant).check()
