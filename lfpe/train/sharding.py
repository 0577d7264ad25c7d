"""Device mesh, logical-axis rules and shardings: how arrays spread over devices.

The mesh has two named axes: `data` (the batch is split over it) and `model`
(tensor parallelism: attention heads and MLP hidden units are split over it).
Parameters carry logical axis names (flax `nn.with_logical_partitioning`:
'embed', 'mlp', 'heads', 'kv', 'classes', 'patch', 'channels' (a convolution's output
channels), ...); `logical_rules` maps them onto mesh axes. With `fsdp=True` the 'embed' and
'channels' axes are also split over `data`, so every parameter with one of them, and its
optimizer slots, is sharded, not replicated, across data replicas (ZeRO-3 / FSDP); XLA
inserts the all-gathers. A dimension that `data` does not divide (a 64-channel stem over 128
devices) stays whole (`fit_fsdp`); the `model` axis must divide (`check_divisible`). Every
model family names its parameters but a position encoding's own (a Fourier encoding's MLP,
learned tables: modules users import into their own models, kept free of sharding metadata):
with FSDP over 8 devices the replicated share of the full-scale configs' state is under 0.2 %
(ViT-B/16, DETR-R50, the Reformer) and a few % for the small layout captioners
(`tests/train/test_fsdp.py`).

On several processes the mesh puts each process's devices on consecutive rows of `data`
(`make_mesh`), since each process feeds one contiguous slice of the batch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from absl import logging
from jax.experimental import mesh_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from lfpe.errors import ConfigError

MESH_AXES = ("data", "model")
# Logical names a model may use (parameters and activations) -> mesh axis (None: replicated).
BASE_RULES = (
  ("batch", "data"),
  ("mlp", "model"),
  ("heads", "model"),
  ("kv", None),
  ("embed", None),
  ("classes", None),
  ("patch", None),
  ("length", None),
  ("channels", None),
)
FSDP_AXES = ("embed", "channels")  # also split over `data` with `mesh.fsdp`
_MULTIPROCESS_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS")
_WORLD_SIZE_ENV = ("JAX_NUM_PROCESSES", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE")


def logical_rules(fsdp: bool = False) -> tuple[tuple[str, str | None], ...]:
  """Logical axis name -> mesh axis rules; `fsdp` also shards FSDP_AXES over `data` (a
  parameter with two of them splits the first; flax gives each mesh axis to one dimension)."""
  if not fsdp:
    return BASE_RULES
  return tuple((name, "data" if name in FSDP_AXES else axis) for name, axis in BASE_RULES)


def mesh_shape(mesh_config: Any, num_devices: int) -> tuple[int, int]:
  """(data, model) sizes of the mesh; `data=-1` takes every device `model` leaves."""
  data, model = int(mesh_config.data), int(mesh_config.model)
  if data == -1:
    data = max(num_devices // model, 1)
  return data, model


def make_mesh(mesh_config: Any, devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
  """The ('data', 'model') mesh of `mesh_config` over the first data*model devices."""
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(mesh_config, len(devices))
  count = int(np.prod(shape))
  if count > len(devices):
    raise ValueError(
      f"`mesh` data*model={count} exceeds the {len(devices)} available devices; "
      "lower config.mesh.data or config.mesh.model."
    )
  if count < len(devices):  # allowed (e.g. a batch that `data` must divide), never silent
    logging.warning(
      "config.mesh (data=%d, model=%d) uses %d of the %d devices; %d stay idle "
      "(config.mesh.data=-1 takes every device `model` leaves).",
      *shape,
      count,
      len(devices),
      len(devices) - count,
    )
  axis_types = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
  devices = devices[:count]
  if len({d.process_index for d in devices}) > 1:
    return jax.sharding.Mesh(_process_major(devices, shape), MESH_AXES, axis_types=axis_types)
  return jax.make_mesh(shape, MESH_AXES, axis_types=axis_types, devices=devices)


def _process_major(devices: list[jax.Device], shape: tuple[int, int]) -> np.ndarray:
  """`devices` as a `[data, model]` array in which each process's devices fill consecutive
  rows of `data`: the input pipeline gives each process one contiguous slice of the batch
  (`lfpe.data.pipeline.process_shard`). `jax.make_mesh` orders a TPU slice by its physical
  layout instead, which splits a host's rows apart on slices of several hosts (v5e-16 and up:
  every host refused its slice). XLA's hybrid mesh (physical layout within a process, the
  processes stacked along `data`) where the model axis fits in one process, else the
  devices sorted by (process, id)."""
  processes = len({d.process_index for d in devices})
  data, model = shape
  if data % processes == 0 and (len(devices) // processes) % model == 0:
    try:
      return mesh_utils.create_hybrid_device_mesh(
        (data // processes, model), (processes, 1), devices, process_is_granule=True
      )
    except (ValueError, AssertionError, NotImplementedError):
      pass  # a device set XLA's layout rules do not cover: the plain order below
  ordered = sorted(devices, key=lambda d: (d.process_index, d.id))
  return np.array(ordered, dtype=object).reshape(shape)


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
  """Leading (batch) dimension split over `data`, everything else replicated."""
  return NamedSharding(mesh, P("data"))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def tree_shardings(boxed_tree: Any, mesh: jax.sharding.Mesh, rules) -> Any:
  """NamedShardings for a tree whose leaves may be `nn.LogicallyPartitioned` boxes.

  Unannotated leaves (step counters, biases without names) are replicated. The
  result has the structure of `nn.meta.unbox(boxed_tree)`.
  """
  empty = lambda x: isinstance(x, nn.meta.AxisMetadata) and not jax.tree.leaves(x.unbox())
  boxed_tree = jax.tree.map(  # boxes of nothing (a frozen parameter's optimizer slots) go
    lambda x: x.unbox() if empty(x) else x,
    boxed_tree,
    is_leaf=lambda x: isinstance(x, nn.meta.AxisMetadata),
  )
  specs = nn.get_partition_spec(boxed_tree)
  return nn.logical_to_mesh_sharding(specs, mesh, rules)


def unbox(tree: Any) -> Any:
  """`tree` without flax axis-metadata boxes (and without adding sharding constraints)."""

  def strip(x):
    if isinstance(x, nn.LogicallyPartitioned):
      return x.unbox(apply_constraint=False)
    return x.unbox() if isinstance(x, nn.meta.AxisMetadata) else x

  return jax.tree.map(strip, tree, is_leaf=lambda x: isinstance(x, nn.meta.AxisMetadata))


def fit_fsdp(abstract: Any, shardings: Any) -> Any:
  """`shardings` with `data` dropped from every dimension it does not divide: FSDP splits
  what it can and leaves the rest whole, as big_vision's `fsdp` rule does, where the
  `model` axis (tensor parallelism) stays a requirement."""

  def fit(leaf, sharding):
    size = sharding.mesh.shape.get("data", 1)
    spec = [
      None if axes == "data" and dim % size else axes
      for dim, axes in zip(leaf.shape, sharding.spec, strict=False)
    ]
    return NamedSharding(sharding.mesh, P(*spec))

  return jax.tree.map(fit, abstract, shardings)


def check_divisible(abstract: Any, shardings: Any) -> None:
  """Every sharded dimension must split evenly; names the parameter and mesh axis if not."""
  flat_abstract = jax.tree_util.tree_flatten_with_path(abstract)[0]
  flat_shardings = jax.tree.leaves(shardings)
  for (path, leaf), sharding in zip(flat_abstract, flat_shardings, strict=True):
    for dim, axes in zip(leaf.shape, sharding.spec, strict=False):
      axes = (axes,) if isinstance(axes, str) else axes or ()
      size = int(np.prod([sharding.mesh.shape[a] for a in axes]))
      if dim % size:
        name = jax.tree_util.keystr(path)
        raise ConfigError(
          f"config.mesh: parameter {name} of shape {leaf.shape} has a dimension of size {dim} "
          f"sharded over mesh axes {axes} of size {size}; change config.mesh.model or the "
          f"model size so that it divides."
        )


def wants_distributed(force: bool = False) -> bool:
  """Whether to call `jax.distributed.initialize()`: forced, or the env shows several processes."""
  if force or any(os.environ.get(k) for k in _MULTIPROCESS_ENV):
    return True
  return any(int(os.environ.get(k, "1") or 1) > 1 for k in _WORLD_SIZE_ENV)


def maybe_initialize_distributed(force: bool = False) -> None:
  """Joins the multi-process JAX cluster once, before any other JAX call.

  jax reads JAX_COORDINATOR_ADDRESS and detects SLURM, Open MPI and Cloud TPU itself, but
  not JAX_NUM_PROCESSES / JAX_PROCESS_ID: those are passed on here.
  """
  if wants_distributed(force) and not jax.distributed.is_initialized():
    count, index = (os.environ.get(k) for k in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID"))
    try:
      jax.distributed.initialize(
        num_processes=int(count) if count else None, process_id=int(index) if index else None
      )
    except ValueError as e:  # no cluster found: jax names no field the user set
      raise ConfigError(
        f"config.distributed=True, but no cluster was found ({e}); set JAX_COORDINATOR_ADDRESS"
        " (host:port of process 0), JAX_NUM_PROCESSES and JAX_PROCESS_ID on every process, or "
        "run under SLURM, Open MPI or a Cloud TPU; on one machine drop config.distributed."
      ) from None
