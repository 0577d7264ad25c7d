"""Ahead-of-time compile of any config's train step for a TPU slice, on a CPU.

  pip install -r requirements-aot.txt     # libtpu: TPU compiler, no TPU needed
  python -m benchmarks.aot_tpu [--config configs/vit_b16_imagenet.py] [--topology v5e:4x4] \
      [--posembs embed_1d,fourier]
  python -m benchmarks.aot_tpu --config configs/detr_coco.py --posembs detr_sine,fourier
  python -m benchmarks.aot_tpu --posembs embed_2d,rope_mixed --eval-sizes 160,224,384,512
  python -m benchmarks.aot_tpu --posembs embed_2d --train-patch-sizes 8,16,28,32
  python -m benchmarks.aot_tpu --posembs embed_2d --train-patch-sizes 8,48 --set \
      data.image_size=240 model.trained_patch_size=32 model.posemb_grid=7   # FlexiViT's

Builds the config (`posemb=NAME` as its argument, at full scale) on a ('data', 'model')
mesh over the topology's devices, lowers and compiles `Program.train_step` with its
shardings, and prints XLA's per-device memory and FLOPs against the chip's HBM: the
full-scale config fits if the peak is below it. `--eval-sizes` also compiles the eval step
for images of each size (the resolution benchmark at full scale: trained at the config's
size, tested at others without fine-tuning; learned tables resample, the grid follows).
`--train-patch-sizes` trains FlexiViT-style (`config.train_patch_sizes`, lfpe/train/flexi.py)
and compiles the step of every patch size: each is its own program, and the smallest patch
(the longest sequence) usually sets the peak. `--set path=value ...` changes config fields
as the trainer's `--config.path=value` does (same parser, same errors).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util

import jax
from jax.experimental import topologies

from lfpe.train import config_cli, sharding
from lfpe.train import program as program_lib

HBM_GIB = {"TPU v5 lite": 16, "TPU v5": 95, "TPU v4": 32, "TPU v6 lite": 32}


def load_config(path: str, arg: str):
  """`get_config(arg)` of the config file at `path`."""
  spec = importlib.util.spec_from_file_location("config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def config_for(
  path: str,
  posemb: str,
  model_axis: int = 1,
  fsdp: bool = False,
  train_patch_sizes: tuple[int, ...] = (),
  overrides: tuple[str, ...] = (),
):
  """The config at `path` with `posemb`, the mesh's model axis and FSDP, FlexiViT's patch
  sizes, and `overrides` ('dotted.path=value', as the trainer's --config.path=value)."""
  config = load_config(path, f"posemb={posemb}")
  with config.unlocked():
    config.mesh.model, config.mesh.fsdp = model_axis, fsdp
    config.train_patch_sizes = train_patch_sizes
  for override in overrides:
    config_cli.set_field(config, *override.split("=", 1))
  return config


def compile_for(path: str, topology: str, posemb: str, *args):
  """(compiled train step, mesh, program) of `config_for(path, posemb, *args)` on `topology`."""
  devices = topologies.get_topology_desc(topology, "tpu").devices
  config = config_for(path, posemb, *args)
  mesh = sharding.make_mesh(config.mesh, devices)  # the mesh training builds on this slice
  prog = program_lib.build(config, mesh)
  compiled = prog.train_step.lower(*prog.abstract_inputs(config.batch_size)).compile()
  return compiled, mesh, prog


def compile_patch_steps(prog, compiled) -> dict:
  """{patch size: compiled train step} for every size of `config.train_patch_sizes` (the
  kernel's own size is `compiled`, the program's train step); {} without FlexiViT training."""
  inputs = prog.abstract_inputs(prog.config.batch_size)
  return {
    patch: compiled if step is prog.train_step else step.lower(*inputs).compile()
    for patch, step in (prog.patch_steps or {}).items()
  }


def compile_eval(prog, size: int):
  """The eval step compiled for batches of `eval_batch_size` images of `size` x `size` (with
  `config.seeds`, every seed's variables on the one batch, as training evaluates them)."""
  state, _, _ = prog.abstract_inputs(prog.config.eval_batch_size)
  batch = prog.abstract_batch(prog.config.eval_batch_size, train=False)
  variables = {"params": state.params, **state.constants}
  hw = tuple(batch["image"].shape[1:3])

  def at_size(x):  # every per-pixel field (the image, DETR's padding mask) at size x size
    if x.ndim < 3 or tuple(x.shape[1:3]) != hw:
      return x
    return jax.ShapeDtypeStruct(
      (x.shape[0], size, size, *x.shape[3:]), x.dtype, sharding=x.sharding
    )

  batch = {key: at_size(x) for key, x in batch.items()}
  # the eval batch's real examples: `mask` [B], or `valid` [B] where `mask` is DETR's pixels
  real = "valid" if "mask" in batch and batch["mask"].ndim == 3 else "mask"
  batch[real] = jax.ShapeDtypeStruct((batch["image"].shape[0],), bool, sharding=prog.data_sharding)
  return prog.eval_step.lower(variables, batch).compile()


def _row(name: str, compiled, mesh) -> str:
  """One table row: XLA's per-device memory and FLOPs of `compiled`."""
  mem = compiled.memory_analysis()
  gib = lambda b: b / 2**30
  peak = (
    mem.argument_size_in_bytes
    + mem.temp_size_in_bytes
    + mem.output_size_in_bytes
    - mem.alias_size_in_bytes
  )
  flops = compiled.cost_analysis()["flops"]
  kind = mesh.devices.flat[0].device_kind
  return (
    f"| {name} | {tuple(mesh.shape.values())} | {gib(mem.argument_size_in_bytes):.2f} "
    f"| {gib(mem.temp_size_in_bytes):.2f} | {gib(mem.output_size_in_bytes):.2f} | "
    f"{gib(peak):.2f} | {HBM_GIB.get(kind, '?')} ({kind}) | {flops / 1e12:.2f} |"
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/vit_b16_imagenet.py")
  parser.add_argument("--topology", default="v5e:4x4")
  parser.add_argument("--posembs", default="embed_1d,fourier")
  parser.add_argument("--model-axis", type=int, default=1)
  parser.add_argument("--fsdp", action="store_true")
  parser.add_argument("--eval-sizes", default="", help="also compile eval at these image sizes")
  parser.add_argument(
    "--train-patch-sizes", default="", help="train FlexiViT-style at these patch sizes"
  )
  parser.add_argument("--set", nargs="*", default=[], help="config fields: path=value ...")
  args = parser.parse_args()
  print(
    f"Date {datetime.date.today()}; jax {jax.__version__}; {args.config}; "
    f"topology {args.topology}{'; ' + ' '.join(args.set) if args.set else ''}\n"
  )
  print(
    "| step | mesh (data, model) | args GiB | temps GiB | outputs GiB | peak GiB/device | "
    "HBM GiB | TFLOPs/step/device |\n|---|---|---|---|---|---|---|---|"
  )
  sizes = [int(s) for s in args.eval_sizes.split(",") if s]
  patches = tuple(int(p) for p in args.train_patch_sizes.split(",") if p)
  for posemb in args.posembs.split(","):
    compiled, mesh, prog = compile_for(
      args.config, args.topology, posemb, args.model_axis, args.fsdp, patches, tuple(args.set)
    )
    by_patch = compile_patch_steps(prog, compiled) or {"": compiled}
    for patch, step in by_patch.items():
      at = f" at patch {patch}" if patch else ""
      print(_row(f"`{posemb}` train step{at}", step, mesh), flush=True)
    for size in sizes:
      print(_row(f"`{posemb}` eval at {size} px", compile_eval(prog, size), mesh), flush=True)


if __name__ == "__main__":
  main()
