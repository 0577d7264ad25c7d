"""`benchmarks.aot_tpu`'s eval compile, on the CPU mesh (a TPU topology needs libtpu): at a
new image size, with and without `config.seeds` (every seed's variables, one eval batch)."""

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
