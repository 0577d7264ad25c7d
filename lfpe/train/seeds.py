"""`config.seeds = S`: S runs of one config trained as one compiled program (a seed axis).

Run i is the run of `config.seed + i`: its own initialisation and dropout keys
(`program.seed_keys`), its own data order (the loader seeded with it) and its own optimizer
state, stacked on a leading axis `[S, ...]` of the train state. One jitted step vmaps the
trainer's own `steps.train_step` over that axis (batched matmuls, one compilation); each
evaluation vmaps the task's eval step over the parameters on a shared batch and finalises
each seed with the task's own `finalize`. So seed i of a seeded run trains as the run with
`config.seed = seed + i` would, to float32 rounding (tests/train/test_seeds.py), and 003's
10-seed tables cost one run. `config.seeds = 0` (the default) is a plain run.

Metrics carry the axis too: metrics.jsonl, TensorBoard and the progress lines show the mean
over seeds, and every line and summary.json split also holds `seeds`: {metric: [S values]}.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def count(config: Any) -> int:
  """The number of seeds of `config` (0: a plain run without a seed axis)."""
  return int(config.get("seeds", 0) or 0)


def of(config: Any) -> list[int]:
  """The seeds a config trains: `[config.seed]`, or `config.seed + i` for i < `config.seeds`."""
  return [config.seed + i for i in range(count(config))] or [config.seed]


def with_seed_axis(shardings: Any) -> Any:
  """Shardings of a seeded tree: each leaf's spec with an unsharded leading seed axis."""
  return jax.tree.map(lambda s: NamedSharding(s.mesh, P(None, *s.spec)), shardings)


def stacked(abstract: Any, num_seeds: int) -> Any:
  """ShapeDtypeStructs of `abstract` with a leading seed axis of `num_seeds`."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct((num_seeds, *a.shape), a.dtype), abstract)


def stack_keys(keys: Sequence[jax.Array]) -> jax.Array:
  """One key array `[S]` from S typed keys."""
  return jnp.stack(list(keys))


class SeedBatches:
  """Training batches of every seed, `[S, B, ...]`: one loader per seed, stacked each step.

  Checkpointable like one loader: `get_state` holds every seed's position.
  """

  def __init__(self, loaders: Sequence[Any], sharding: NamedSharding):
    self._loaders = list(loaders)
    stack = lambda *batches: jax.tree.map(lambda *x: jnp.stack(x), *batches)
    self._stack = jax.jit(stack, out_shardings=with_seed_axis(sharding))

  def __iter__(self) -> SeedBatches:
    return self

  def __next__(self) -> dict[str, jax.Array]:
    return self._stack(*(next(loader) for loader in self._loaders))

  def get_state(self) -> bytes:
    states = [loader.get_state() for loader in self._loaders]
    return json.dumps([s.decode() if isinstance(s, bytes) else s for s in states]).encode()

  def close(self) -> None:
    for loader in self._loaders:
      close(loader)

  def set_state(self, state: bytes) -> None:
    states = json.loads(state)
    if len(states) != len(self._loaders):
      raise ValueError(
        f"the checkpoint holds the data positions of {len(states)} seeds, this run has "
        f"{len(self._loaders)}."
      )
    for loader, s in zip(self._loaders, states, strict=True):
      loader.set_state(s.encode() if isinstance(s, str) else s)


def close(loader: Any) -> None:
  """Stops a training loader's workers (`loader.close()`, where it has one: lfpe.data's
  loaders; a test's in-memory iterator may have none)."""
  if hasattr(loader, "close"):
    loader.close()


def _takes(fn: Callable, name: str) -> bool:
  """Whether `fn` accepts the keyword `name` (a user's loader may not know `size_seed`)."""
  parameters = inspect.signature(fn).parameters.values()
  return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


def train_loader(make_loader: Callable, config: Any, sharding: NamedSharding) -> Any:
  """The training batches of `config`: one loader, or with `config.seeds` one per seed (each
  seed's own order and augmentation; the batch sizes of `data.train_sizes` drawn from
  `config.seed` for all, so that the seeds' batches stack)."""
  sizes = count(config) and config.data.get("train_sizes") and _takes(make_loader, "size_seed")
  shared = {"size_seed": config.seed} if sizes else {}
  make = lambda seed: make_loader(
    config.data, global_batch_size=config.batch_size, seed=seed, train=True, mesh=sharding, **shared
  )
  if not count(config):
    return make(config.seed)
  return SeedBatches([make(seed) for seed in of(config)], sharding)
