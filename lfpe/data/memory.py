"""Training batches of a small split held in memory: grain's order, without grain's per-record cost.

With `data.cache=True`, deterministic ops and no workers, `make_loader` transforms every
record once and serves each batch by indexing those arrays in the order of grain's own
`IndexSampler` (the sampler `pipeline.train_batches` gives its `DataLoader`). The batches are
the same, and so is the checkpointed position (grain's state JSON), so a run may resume
across the two paths; the cost per batch drops from a Python call per record to one gather
(red-green, 10 seeds x 100 images: about 257 -> 3 ms a step; benchmarks/README.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import grain
import numpy as np

from lfpe.data import ops

_VERSION = 2  # of grain's DataLoader state, whose layout `get_state` writes


def applies(transforms: Sequence, cached: bool, worker_count: int) -> bool:
  """Whether a training split can be served from memory: cached, no workers, and every op a
  deterministic map (a random op needs grain's per-record generator)."""
  return (
    cached and not worker_count and all(isinstance(op, grain.transforms.Map) for op in transforms)
  )


EPOCH_ORDERS = ("grain", "independent")  # `data.epoch_orders`
_ORDER_TAG = 0x6C667065  # mixed with the seed under 'independent' ("lfpe")


def sampler_seed(seed: int, epoch_orders: str = "grain") -> int:
  """grain's sampler seed for a run's `seed`. grain shuffles epoch e with seed + e, so with
  the seed as it is ('grain', the default: every record so far trained so) seed s + 1's
  epoch e is seed s's epoch e + 1: consecutive seeds see the same orders one epoch apart
  (their initialisations and augmentations still differ). 'independent' hashes the seed
  first (numpy's SeedSequence), so that no two seeds share an epoch's order."""
  if epoch_orders == "grain":
    return seed
  return int(np.random.SeedSequence([seed, _ORDER_TAG]).generate_state(1)[0] % 2**31)


def train_sampler(
  num_records: int, *, seed: int, shard_index: int, shard_count: int, num_epochs: int | None
) -> tuple[grain.sharding.ShardOptions, grain.samplers.IndexSampler]:
  """(shard options, sampler) of a training shard: the one order both training paths read."""
  shard = grain.sharding.ShardOptions(shard_index, shard_count, drop_remainder=True)
  sampler = grain.samplers.IndexSampler(
    num_records, shard, shuffle=True, num_epochs=num_epochs, seed=seed
  )
  return shard, sampler


def shard_rows(num_records: int, shard_index: int, shard_count: int) -> range:
  """The records the training sampler of shard `shard_index` ever reads: its contiguous slice
  (the same whatever the seed; grain shuffles within it)."""
  shard = grain.sharding.ShardOptions(shard_index, shard_count, drop_remainder=True)
  ordered = grain.samplers.IndexSampler(num_records, shard, shuffle=False, num_epochs=1, seed=0)
  size = num_records // shard_count
  start = ordered[shard_index].record_key if size else 0
  return range(start, start + size)


class CachedRows:
  """The records `rows` of `source`, read (decoded) once and kept: a process caches only its
  own slice, not the whole split. Indexed as `source` is; other records are not held."""

  def __init__(self, source: Sequence, rows: range):
    self._rows, self._num = rows, len(source)
    self._records = [source[i] for i in rows]

  def __len__(self) -> int:
    return self._num

  def __getitem__(self, index: int):
    if index not in self._rows:
      raise IndexError(f"record {index} is outside this process's cached rows {self._rows}.")
    return self._records[index - self._rows.start]


class MemoryBatches:
  """Local training batches of `source` after `transforms`, in `IndexSampler`'s order."""

  def __init__(
    self,
    source: Sequence,
    transforms: list,
    *,
    batch_size: int,
    seed: int,
    shard_index: int = 0,
    shard_count: int = 1,
    num_epochs: int | None = None,
    draw: Callable[[Mapping, int], np.ndarray] | None = None,
  ):
    _, self._sampler = train_sampler(
      len(source),
      seed=seed,
      shard_index=shard_index,
      shard_count=shard_count,
      num_epochs=num_epochs,
    )
    self._rows = shard_rows(len(source), shard_index, shard_count)  # all this shard reads
    examples = [ops.apply(transforms, source[i]) for i in self._rows]
    self._arrays = {k: np.stack([e[k] for e in examples]) for k in examples[0]}
    self._batch_size, self._shard_count = batch_size, shard_count
    in_memory = isinstance(source, (list, tuple, np.ndarray))  # grain names these by type
    self._source_repr = str(type(source)) if in_memory else repr(source)
    self._next = shard_index  # the sampler's global index of the next record
    self._source, self._transforms, self._draw = source, transforms, draw
    self._last: list[int] = []  # the record keys of the last batch

  def __iter__(self) -> MemoryBatches:
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    stop = self._next + self._batch_size * self._shard_count
    try:
      rows = [self._sampler[k].record_key for k in range(self._next, stop, self._shard_count)]
    except IndexError:  # num_epochs passed
      raise StopIteration from None
    self._next, self._last = stop, rows
    rows = np.asarray(rows) - self._rows.start
    return {k: v[rows] for k, v in self._arrays.items()}

  def drawn(self, size: int) -> dict[str, np.ndarray]:
    """The last batch again, each record's image drawn natively at `size` px by the dataset's
    `draw` and transformed as every record is: a mixed-resolution batch at that size."""
    if self._draw is None:
      raise ValueError("drawn: this dataset has no `draw` (DatasetSpec.draw).")
    records = (self._source[key] for key in self._last)
    examples = [ops.apply(self._transforms, {**r, "image": self._draw(r, size)}) for r in records]
    return {k: np.stack([e[k] for e in examples]) for k in examples[0]}

  def get_state(self) -> bytes:
    """grain's DataLoader state at this position (a run may resume on either path)."""
    state = {
      "version": _VERSION,
      "last_seen_indices": {"0": self._next - self._shard_count},
      "last_worker_index": -1,
      "worker_count": 0,
      "sampler": repr(self._sampler),
      "data_source": self._source_repr,
    }
    return json.dumps(state, indent=4).encode()

  def set_state(self, state: bytes) -> None:
    saved = json.loads(state)
    if saved["sampler"] != repr(self._sampler) or saved["worker_count"]:
      raise ValueError(
        f"the checkpointed data position is of another sampler or worker count "
        f"({saved['sampler']}, {saved['worker_count']} workers), not {self._sampler!r}."
      )
    self._next = saved["last_seen_indices"]["0"] + self._shard_count

  def start_prefetch(self) -> None:
    """Nothing to prefetch: the batches are in memory."""
