"""Mesh construction, logical-axis rules and parameter shardings."""

import logging
import re
import subprocess
import sys
import types

import jax
import ml_collections
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from train_fixtures import TinyModel

from lfpe.train import sharding


def _mesh_config(data, model, fsdp=False):
  return ml_collections.ConfigDict(dict(data=data, model=model, fsdp=fsdp))


def test_make_mesh_shapes_and_fill():
  mesh = sharding.make_mesh(_mesh_config(4, 2))
  assert dict(mesh.shape) == {"data": 4, "model": 2}
  assert dict(sharding.make_mesh(_mesh_config(-1, 2)).shape) == {"data": 4, "model": 2}
  one = sharding.make_mesh(_mesh_config(1, 1), jax.devices()[:1])
  assert one.devices.size == 1
  with pytest.raises(ValueError, match="mesh"):
    sharding.make_mesh(_mesh_config(4, 4))


def test_a_mesh_that_leaves_devices_idle_says_so(caplog):
  with caplog.at_level(logging.WARNING):
    sharding.make_mesh(_mesh_config(3, 1), jax.devices()[:8])
    sharding.make_mesh(_mesh_config(-1, 1), jax.devices()[:8])
  (note,) = [r.getMessage() for r in caplog.records if "idle" in r.getMessage()]
  assert note.startswith("config.mesh (data=3, model=1) uses 3 of the 8 devices; 5 stay idle")


@pytest.mark.parametrize("processes", [2, 4])
@pytest.mark.parametrize("model", [1, 2, 4, 8])
def test_a_mesh_over_several_processes_gives_each_process_consecutive_data_rows(processes, model):
  """The input pipeline gives each process one contiguous slice of the batch, so each
  process's devices must fill consecutive rows of `data` (on a TPU slice `jax.make_mesh`
  orders by the chips' layout and split hosts' rows apart). Devices interleaved by id across
  processes, as a slice's ids may be; a model axis wider than a process spans processes."""
  devices = [
    types.SimpleNamespace(id=i, process_index=i % processes, platform="cpu", device_kind="cpu")
    for i in range(8)
  ]
  grid = sharding._process_major(devices, (8 // model, model))
  owners = np.vectorize(lambda d: d.process_index)(grid)  # [data, model]
  assert sorted(d.id for d in grid.flat) == list(range(8))
  row_owner = owners.min(axis=1)
  assert np.all(np.diff(row_owner) >= 0)  # processes in order along data, never interleaved
  if model <= 8 // processes:  # a row inside one process
    assert np.all(owners == row_owner[:, None])


def test_fsdp_rules_shard_embed_over_data():
  assert dict(sharding.logical_rules(False))["embed"] is None
  rules = dict(sharding.logical_rules(True))
  assert rules["embed"] == "data" and rules["mlp"] == "model" and rules["heads"] == "model"


def _param_specs(mesh, fsdp):
  model = TinyModel(num_classes=4, width=8)
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False))
  shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(fsdp))["params"]
  return {name: s["kernel"].spec for name, s in shardings.items()}, shardings


def test_parameter_shardings_follow_logical_axes():
  mesh = sharding.make_mesh(_mesh_config(4, 2))
  specs, shardings = _param_specs(mesh, fsdp=False)
  assert specs["mlp_in"] == P(None, "model") and specs["mlp_out"] == P("model", None)
  assert specs["head"] == P(None, None)
  assert shardings["mlp_in"]["bias"].spec == P("model")
  fsdp_specs, _ = _param_specs(mesh, fsdp=True)
  assert fsdp_specs["mlp_in"] == P("data", "model") and fsdp_specs["head"] == P("data", None)


def test_check_divisible_names_the_parameter():
  mesh = sharding.make_mesh(_mesh_config(2, 4))
  model = TinyModel(num_classes=4, width=2)  # mlp width 4 splits over 4; embed 2 over data 2
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False))
  shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(True))
  sharding.check_divisible(sharding.unbox(boxed), shardings)
  model = TinyModel(num_classes=4, width=3)  # mlp width 6 does not split over 4
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False))
  shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(False))
  with pytest.raises(ValueError, match=r"mlp_in.*config.mesh.model"):
    sharding.check_divisible(sharding.unbox(boxed), shardings)


def test_fsdp_leaves_whole_what_data_does_not_divide():
  """embed 4 over data 8 stays whole (it used to refuse the mesh); what divides still splits,
  and the `model` axis stays a requirement (check_divisible)."""
  mesh = sharding.make_mesh(_mesh_config(8, 1))
  model = TinyModel(num_classes=4, width=4)  # embed 4, mlp 8
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False))
  abstract = sharding.unbox(boxed)
  shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(True))
  with pytest.raises(ValueError, match="embed"):
    sharding.check_divisible(abstract, shardings)
  fitted = sharding.fit_fsdp(abstract, shardings)
  sharding.check_divisible(abstract, fitted)
  specs = {name: p["kernel"].spec for name, p in fitted["params"].items()}
  assert specs == {  # every embed dimension (4) whole; the model axis kept
    "embed": P(None, None),
    "head": P(None, None),
    "mlp_in": P(None, "model"),
    "mlp_out": P("model", None),
  }
  wide = TinyModel(num_classes=4, width=8)  # embed 8: split as before
  boxed = jax.eval_shape(lambda: wide.init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False))
  shardings = sharding.tree_shardings(boxed, mesh, sharding.logical_rules(True))
  assert sharding.fit_fsdp(sharding.unbox(boxed), shardings) == shardings


def test_unbox_strips_boxes():
  boxed = jax.eval_shape(
    lambda: TinyModel(num_classes=4).init(jax.random.key(0), np.zeros((1, 4, 4, 1)), train=False)
  )
  leaves = jax.tree.leaves(sharding.unbox(boxed))
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  assert sorted(x.shape for x in leaves)[-1] == (16, 8)


@pytest.mark.parametrize(
  "env, expected",
  [
    ({}, False),
    ({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}, True),
    ({"SLURM_NTASKS": "1"}, False),
    ({"SLURM_NTASKS": "4"}, True),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, True),
  ],
)
def test_wants_distributed_from_env(monkeypatch, env, expected):
  _no_cluster(monkeypatch)
  for key, value in env.items():
    monkeypatch.setenv(key, value)
  assert sharding.wants_distributed() is expected
  assert sharding.wants_distributed(force=True)


def _no_cluster(monkeypatch):
  for key in (
    "JAX_COORDINATOR_ADDRESS",
    "COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
    "OMPI_COMM_WORLD_SIZE",
    "SLURM_NTASKS",
    "WORLD_SIZE",
  ):
    monkeypatch.delenv(key, raising=False)


def test_forced_distributed_without_a_cluster_says_what_to_set(monkeypatch):
  """`config.distributed=True` on one machine (jax's own ValueError named no field).

  In a fresh process: `jax.distributed.initialize` must come before any JAX call, and this
  test process has made many.
  """
  _no_cluster(monkeypatch)
  code = (
    "from lfpe.errors import ConfigError\n"
    "from lfpe.train import sharding\n"
    "try:\n  sharding.maybe_initialize_distributed(force=True)\n"
    "except ConfigError as e:\n  print('ConfigError:', e)\n"
  )
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr
  assert re.search(
    "ConfigError: config.distributed=True, but no cluster.*JAX_COORDINATOR", done.stdout
  )


@pytest.mark.parametrize("topology", ["v5e:4x4", "v5p:2x2x2"])
def test_every_host_of_a_tpu_slice_gets_its_input_slice(topology, monkeypatch):
  """On a real slice's devices (libtpu's topology, no TPU needed; requirements-aot.txt), the
  default mesh gives every host a contiguous slice of the batch (`process_shard` refuses
  otherwise, as it did for `jax.make_mesh`'s physical order)."""
  pytest.importorskip("libtpu")
  from jax.experimental import topologies  # noqa: PLC0415

  from lfpe.data import pipeline  # noqa: PLC0415

  devices = topologies.get_topology_desc(topology, "tpu").devices
  hosts = sorted({d.process_index for d in devices})
  assert len(hosts) > 1
  for model in (1, 2):
    mesh = sharding.make_mesh(ml_collections.ConfigDict(dict(data=-1, model=model)), devices)
    batch = jax.sharding.NamedSharding(mesh, P("data"))
    shards = []
    for host in hosts:
      monkeypatch.setattr(jax, "process_index", lambda host=host: host)
      shards.append(pipeline.process_shard(batch, 16 * len(devices)))  # (index, count)
    counts = {count for _, count in shards}
    assert len(counts) == 1 and sorted({i for i, _ in shards}) == list(range(counts.pop()))
