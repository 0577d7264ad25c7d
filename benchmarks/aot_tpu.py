"""Ahead-of-time compile of any config's train step for a TPU slice, on a CPU.

  pip install -r requirements-aot.txt     # libtpu: TPU compiler, no TPU needed
  python -m benchmarks.aot_tpu [--config configs/vit_b16_imagenet.py] [--topology v5e:4x4] \
      [--posembs embed_1d,fourier]
  python -m benchmarks.aot_tpu --config configs/detr_coco.py --posembs detr_sine,fourier

Builds the config (`posemb=NAME` as its argument, at full scale) on a ('data', 'model')
mesh over the topology's devices, lowers and compiles `Program.train_step` with its
shardings, and prints XLA's per-device memory and FLOPs against the chip's HBM: the
full-scale config fits if the peak is below it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util

import jax
import numpy as np
from jax.experimental import topologies

from lfpe.train import program as program_lib

HBM_GIB = {"TPU v5 lite": 16, "TPU v5": 95, "TPU v4": 32, "TPU v6 lite": 32}


def load_config(path: str, arg: str):
  """`get_config(arg)` of the config file at `path`."""
  spec = importlib.util.spec_from_file_location("config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def compile_for(path: str, topology: str, posemb: str, model_axis: int, fsdp: bool):
  """(compiled train step, mesh) of the config at `path` on `topology`."""
  devices = topologies.get_topology_desc(topology, "tpu").devices
  config = load_config(path, f"posemb={posemb}")
  with config.unlocked():
    config.mesh.model, config.mesh.fsdp = model_axis, fsdp
  mesh = jax.sharding.Mesh(
    np.array(devices).reshape(len(devices) // model_axis, model_axis),
    ("data", "model"),
    axis_types=(jax.sharding.AxisType.Auto,) * 2,
  )
  prog = program_lib.build(config, mesh)
  compiled = prog.train_step.lower(*prog.abstract_inputs(config.batch_size)).compile()
  return compiled, mesh


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/vit_b16_imagenet.py")
  parser.add_argument("--topology", default="v5e:4x4")
  parser.add_argument("--posembs", default="embed_1d,fourier")
  parser.add_argument("--model-axis", type=int, default=1)
  parser.add_argument("--fsdp", action="store_true")
  args = parser.parse_args()
  print(
    f"Date {datetime.date.today()}; jax {jax.__version__}; {args.config}; "
    f"topology {args.topology}\n"
  )
  print(
    "| posemb | mesh (data, model) | args GiB | temps GiB | outputs GiB | peak GiB/device | "
    "HBM GiB | TFLOPs/step/device |\n|---|---|---|---|---|---|---|---|"
  )
  for posemb in args.posembs.split(","):
    compiled, mesh = compile_for(args.config, args.topology, posemb, args.model_axis, args.fsdp)
    mem = compiled.memory_analysis()
    gib = lambda b: b / 2**30
    peak = (
      mem.argument_size_in_bytes
      + mem.temp_size_in_bytes
      + mem.output_size_in_bytes
      - (mem.alias_size_in_bytes)
    )
    flops = compiled.cost_analysis()["flops"]
    kind = mesh.devices.flat[0].device_kind
    print(
      f"| `{posemb}` | {tuple(mesh.shape.values())} | {gib(mem.argument_size_in_bytes):.2f} "
      f"| {gib(mem.temp_size_in_bytes):.2f} | {gib(mem.output_size_in_bytes):.2f} | "
      f"{gib(peak):.2f} | {HBM_GIB.get(kind, '?')} ({kind}) | {flops / 1e12:.2f} |",
      flush=True,
    )


if __name__ == "__main__":
  main()
