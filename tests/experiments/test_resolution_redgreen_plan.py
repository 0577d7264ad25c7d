"""The resolution benchmark's wiring: each arm's config carries the study's initial position
scales, its training choices, and policies that build (no training here)."""

import jax
import numpy as np
import pytest

from experiments.resolution_redgreen import plan, run
from lfpe import encodings
from lfpe.data import ops, redgreen
from lfpe.studies import sweep
from lfpe.tasks import classification
from lfpe.train import evaluation, program, sharding, trainer

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
  model is built, as the trainer builds each named evaluation's model)."""
  config = _config(name)
  task = classification.Classification()
  for options in ARMS[name].policies.values():
    variant = config.copy_and_resolve_references()
    with variant.unlocked():
      variant.model.posemb = encodings.with_options(config.model.posemb, **options)
    task.create_model(variant).check()


def test_each_policy_and_size_is_a_named_evaluation():
  config = _config("rope_axial")
  assert set(config.evals) == {
    plan.eval_name(p, s) for p in plan.ROPE_POLICIES for s in plan.TEST_SIZES
  }
  ntk_64 = config.evals[plan.eval_name("ntk", 64)]
  assert ntk_64.data.image_size == 64
  assert encodings.parse(ntk_64.model.posemb)[1]["scaling"] == "ntk"
  assert encodings.parse(ntk_64.model.posemb)[0] == "rope_axial"


@pytest.mark.parametrize("task", ["direction", "absolute"])
@pytest.mark.parametrize("size", [16, 24, 48, 96])
def test_the_resized_test_split_is_the_scene_drawn_natively(task, size):
  """The evaluations resize the 32 px test split (nearest): exactly the scenes drawn at
  `size` with squares and grid of `size // 8` pixels, the benchmark's definition."""
  base = redgreen.generate(redgreen.RedGreenConfig(name="base", task=task), "test")
  side = size // 8
  native = redgreen.generate(
    redgreen.RedGreenConfig(
      name=f"{size}px", task=task, image_size=size, square_size=side, stride=side
    ),
    "test",
  )
  resize = ops.parse(
    _config("none").evals[plan.eval_name("extrapolate", size)].data.eval_preprocess
  )
  resized = np.stack([ops.apply(resize, {"image": im})["image"] for im in base["image"]])
  np.testing.assert_array_equal(resized, native["image"])
  np.testing.assert_array_equal(base["label"], native["label"])


def test_an_evaluation_at_another_size_keeps_the_trained_table():
  """The evaluations' models are built on the training grid (8x8 tables) and resample to the
  evaluation's; built on the evaluation's data they would hold 4x4 tables and be refused."""
  config = run.load_config(ARMS["embed_2d"], "direction", seed=0, quick=True)
  task, model = trainer.checked_task_and_model(config, 1)
  prog = program.build(
    config, sharding.make_mesh(config.mesh, jax.devices()[:1]), task=task, model=model
  )
  built = evaluation.build(prog, config, lambda *a, **k: [], prog.data_sharding)
  assert sorted(e.split for e in built) == ["eval"] + sorted(f"eval/{n}" for n in config.evals)
