"""FlexiViT training (`config.train_patch_sizes`, lfpe/train/flexi.py): each step cuts its
images at the patch size drawn for it from (seed, step), with the kernel kept at the trained
patch size; a size the model cannot take fails before the first step."""

import contextlib
import dataclasses

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from configs import vit_digits
from lfpe.errors import ConfigError
from lfpe.train import flexi, program, sharding, stopping, trainer

DEVICES = jax.devices()[:1]


def _config(sizes, posemb="embed_1d"):  # a learned table: resampled to each step's grid
  config = vit_digits.get_config(f"small=1,posemb={posemb}")
  with config.unlocked():
    config.mesh.data = 1
    config.batch_size = 8
    config.model = {**config.model.to_dict(), "patch_size": 4, "dropout": 0.0}
    config.model.head_init_std = 0.1  # every parameter gets a gradient at the first step
    config.schedule.warmup_steps = 0  # and a rate: the first step moves them
    config.train_patch_sizes = sizes
  return config


def _batch(config):
  rng = np.random.default_rng(0)
  size = config.data.image_size
  return {
    "image": rng.normal(size=(config.batch_size, size, size, 1)).astype(np.float32),
    "label": rng.integers(0, 10, config.batch_size).astype(np.int32),
  }


def test_a_step_is_the_train_step_of_the_model_at_its_drawn_patch():
  config = _config((2, (4, 2)))
  mesh = sharding.make_mesh(config.mesh, DEVICES)
  prog = program.build(config, mesh)
  assert set(prog.patch_steps) == {2, (4, 2)}
  with config.unlocked():
    config.train_patch_sizes = (2, 4, 8)  # the kernel's own size, after another: train_step
  sized = program.build(config, mesh)
  assert sized.patch_steps[4] is sized.train_step
  assert len({id(step) for step in sized.patch_steps.values()}) == 3
  with config.unlocked():  # a kernel laid out at 8, images cut at 4: train_step cuts at 4
    config.model.trained_patch_size, config.train_patch_sizes = 8, (4, 8)
  kept = program.build(config, mesh)
  assert kept.patch_steps[4] is kept.train_step and kept.patch_steps[8] is not kept.train_step
  assert kept.model.patch_size == 4
  with config.unlocked():
    config.model.trained_patch_size = None
  drawn = [flexi.patch_at((2, (4, 2)), config.seed, step) for step in range(1, 33)]
  assert set(drawn) == {2, (4, 2)}
  assert prog.step_at(drawn.index((4, 2)) + 1) is prog.patch_steps[(4, 2)]
  assert prog.step_at(drawn.index(2) + 1) is prog.patch_steps[2]

  at = flexi.at_patch(config, (4, 2))
  assert (at.model.patch_size, at.model.trained_patch_size) == ((4, 2), (4, 4))
  with at.unlocked():
    at.train_patch_sizes = ()
  alone = program.build(at, mesh)  # a ViT that cuts 4x2 patches with the 4x4 kernel
  batch = _batch(config)
  flexible, metrics = prog.patch_steps[(4, 2)](prog.init_state(), batch, prog.dropout_rng)
  initial = prog.init_state().params
  reference, expected = alone.train_step(alone.init_state(), batch, alone.dropout_rng)
  assert float(metrics["loss"]) == float(expected["loss"])
  jax.tree.map(np.testing.assert_array_equal, flexible.params, reference.params)
  kernel = lambda params: np.asarray(params["embedding"]["kernel"])  # noqa: E731
  assert kernel(flexible.params).shape == (4 * 4 * 1, 16)  # laid out at the trained 4x4
  assert not np.array_equal(kernel(flexible.params), kernel(initial))  # trained through PI
  _, other = prog.patch_steps[2](prog.init_state(), batch, prog.dropout_rng)
  assert float(metrics["grad_norm"]) == float(expected["grad_norm"])
  assert float(other["grad_norm"]) != float(metrics["grad_norm"])  # another size's model
  # (the loss at init is ln 10 at every size: the head starts at zero)


def _recording(monkeypatch):
  """The names of the jitted steps the trainer runs, in order: each size's, or 'plain'."""
  ran, build = [], program.build

  def recording(step, name):
    return lambda *args: ran.append(name) or step(*args)

  def build_recording(*args, **kwargs):
    prog = build(*args, **kwargs)
    steps = {p: recording(step, p) for p, step in prog.patch_steps.items()}
    plain = recording(prog.train_step, "plain")
    return dataclasses.replace(prog, train_step=plain, patch_steps=steps)

  monkeypatch.setattr(program, "build", build_recording)
  return ran


@pytest.mark.parametrize("seeds", [0, 2])  # with seeds, one vmapped step per size
def test_training_takes_every_step_at_its_drawn_patch(tmp_path, monkeypatch, seeds):
  """Every step runs the drawn size's step; with seeds=0 the run is also stopped at step 3
  (a preemption notice) and resumed, and it draws and ends as the unbroken run does."""
  config = _config((2, 4, 8))
  with config.unlocked():
    config.seeds, config.seed = seeds, 1  # seed 0 draws 2 at its first six steps; 1 all three
  ran = _recording(monkeypatch)
  summary = trainer.train_and_evaluate(config, str(tmp_path / "unbroken"), devices=DEVICES)
  drawn = [flexi.patch_at((2, 4, 8), config.seed, s) for s in range(1, config.total_steps + 1)]
  assert ran == drawn and summary["step"] == len(ran) and len(set(drawn)) > 1
  if seeds:
    return
  ran.clear()
  notices = stopping.preemption_notices
  monkeypatch.setattr(stopping, "preemption_notices", lambda: _notice_at(3))
  with pytest.raises(stopping.Preempted):
    trainer.train_and_evaluate(config, str(tmp_path / "resumed"), devices=DEVICES)
  monkeypatch.setattr(stopping, "preemption_notices", notices)
  trainer.train_and_evaluate(config, str(tmp_path / "resumed"), devices=DEVICES)
  assert ran == drawn
  final = lambda name: ocp.StandardCheckpointer().restore(  # noqa: E731
    (tmp_path / name / "checkpoints" / str(config.total_steps) / "state").absolute()
  )["params"]
  jax.tree.map(np.testing.assert_array_equal, final("resumed"), final("unbroken"))


@contextlib.contextmanager
def _notice_at(step):  # a preemption notice read at `step`
  yield lambda reached: reached >= step


@pytest.mark.parametrize(
  "sizes, posemb, message",
  [
    ((4, 0), "embed_1d", r"^config\.train_patch_sizes has 0: give each patch size"),
    ((2, "x"), "embed_1d", r"^config\.train_patch_sizes has 'x'"),
    ((True,), "embed_1d", r"^config\.train_patch_sizes has True"),
    ((4, (4, 4)), "embed_1d", r"^config\.train_patch_sizes has \(4, 4\) twice"),
    ((2,), "rope_axial(scaling='pi')", r"config\.train_patch_sizes trains grids up to \(8, 8\)"),
    ((8,), "rel_bias_2d(resample_method='beit_geometric')", r"^config\.train_patch_sizes has 8: "),
  ],
)
def test_a_patch_size_the_model_cannot_take_fails_before_the_first_step(
  tmp_path, sizes, posemb, message
):
  config = _config(sizes, posemb)
  with pytest.raises(ConfigError, match=message):
    trainer.train_and_evaluate(config, str(tmp_path), devices=DEVICES)
  assert not (tmp_path / "metrics.jsonl").exists()


def test_packed_batches_are_refused_their_patch_is_the_pipelines():
  config = _config((2, 4))
  with config.unlocked():
    config.data.naflex = {"patch": 4, "max_tokens": 16, "sizes": ((16, 16),)}
  with pytest.raises(ConfigError, match=r"^config\.train_patch_sizes with config\.data\.naflex"):
    flexi.sizes(config)


def test_train_sizes_are_refused_with_patch_sizes():
  config = _config((2, 4))
  with config.unlocked():
    config.data.train_sizes = (12, 16)
  with pytest.raises(ConfigError, match=r"^config\.train_patch_sizes with config\.data\.train_si"):
    flexi.sizes(config)


def test_a_variant_gives_the_kernel_its_patch():
  config = _config((2, 8))
  with config.unlocked():
    del config.model["patch_size"]
    config.model.variant = "mu/4"
  at = flexi.at_patch(config, 2)
  assert (at.model.patch_size, at.model.trained_patch_size) == (2, (4, 4))
  with config.unlocked():
    config.model.trained_patch_size = 8  # an explicit kernel layout wins over the variant's
  assert flexi.at_patch(config, 2).model.trained_patch_size == (8, 8)


def test_flexivit_layout_kernel_and_table_at_their_own_sizes():
  """FlexiViT's layout (`trained_patch_size` for the kernel, `model.posemb_grid` for the
  table, neither given by the image size): every drawn size builds on the same parameters."""
  config = _config((2, 4, 8))
  with config.unlocked():
    config.model.trained_patch_size, config.model.posemb_grid = 8, 3
  prog = program.build(config, sharding.make_mesh(config.mesh, DEVICES))
  params = prog.abstract_state.params
  assert params["Transformer"]["pos"]["encoding"]["table"].shape == (9, 16)
  assert params["embedding"]["kernel"].shape == (8 * 8 * 1, 16)
  assert set(prog.patch_steps) == {2, 4, 8} and prog.patch_steps[4] is prog.train_step
