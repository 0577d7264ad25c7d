"""`benchmarks.aot_tpu`'s eval compile, on the CPU mesh (a TPU topology needs libtpu): at a
new image size, with and without `config.seeds` (every seed's variables, one eval batch)."""

import pathlib

import jax
import pytest

from benchmarks import aot_tpu
from configs import detr_shapes, vit_digits
from lfpe.train import program as program_lib
from lfpe.train import sharding


@pytest.mark.parametrize("module, size", [(detr_shapes, 48), (vit_digits, 32)])
@pytest.mark.parametrize("seeds", [0, 2])
def test_eval_compiles_at_another_size(module, size, seeds):
  config = module.get_config("small=1")
  with config.unlocked():
    config.seeds, config.eval_batch_size, config.mesh.data = seeds, 8, 4
  prog = program_lib.build(config, sharding.make_mesh(config.mesh, jax.devices()[:4]))
  compiled = aot_tpu.compile_eval(prog, size)
  variables, batch = compiled.args_info[0]
  assert batch["image"].shape[:3] == (8, size, size)  # one batch, whatever the seeds
  leading = {x.shape[0] for x in jax.tree.leaves(variables["params"])}
  assert leading == {seeds} if seeds else len(leading) > 1
  row = aot_tpu._row("eval", compiled, prog.mesh)
  assert row.startswith("| eval | (4, 1) |") and row.count("|") == 9


def test_every_flexivit_patch_size_compiles_with_its_own_sequence():
  """`--train-patch-sizes`: one compiled step per patch size, the kernel's own being the
  program's train step; a smaller patch is a longer sequence, so more FLOPs per step."""
  config = vit_digits.get_config("small=1")
  with config.unlocked():
    config.train_patch_sizes, config.mesh.data = (2, 4, 8), 4
  prog = program_lib.build(config, sharding.make_mesh(config.mesh, jax.devices()[:4]))
  compiled = prog.train_step.lower(*prog.abstract_inputs(config.batch_size)).compile()
  by_patch = aot_tpu.compile_patch_steps(prog, compiled)
  assert list(by_patch) == [2, 4, 8] and by_patch[2] is compiled  # small=1 cuts at 2
  flops = [by_patch[p].cost_analysis()["flops"] for p in (2, 4, 8)]
  assert flops[0] > flops[1] > flops[2]
  plain = vit_digits.get_config("small=1")
  mesh = sharding.make_mesh(plain.mesh, jax.devices()[:1])
  assert aot_tpu.compile_patch_steps(program_lib.build(plain, mesh), None) == {}


def test_set_reaches_fields_the_config_file_leaves_out():
  """`--set`: FlexiViT's 240 px layout on the ImageNet config, which names neither field."""
  path = str(pathlib.Path(__file__).parents[2] / "configs" / "vit_b16_imagenet.py")
  sets = ("data.image_size=240", "model.trained_patch_size=32", "model.posemb_grid=7")
  config = aot_tpu.config_for(path, "embed_1d", 2, True, (8, 48), sets)
  assert (config.mesh.model, config.mesh.fsdp, config.train_patch_sizes) == (2, True, (8, 48))
  model = config.model
  assert (config.data.image_size, model.posemb_grid, model.trained_patch_size) == (240, 7, 32)
