"""In-memory training batches: grain's batches and grain's checkpoint state, at a gather's cost."""

import numpy as np
import pytest

from lfpe.data import memory, ops, pipeline

SOURCE = [{"image": np.full((2, 2, 1), i, np.uint8), "label": np.int64(i % 3)} for i in range(23)]
TRANSFORMS = ops.parse("value_range(0, 1)")


def _both(**kwargs):
  grain_path = pipeline.train_batches(SOURCE, TRANSFORMS, **kwargs)
  return grain_path, memory.MemoryBatches(SOURCE, TRANSFORMS, **kwargs)


def _equal(a, b):
  assert sorted(a) == sorted(b)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert a[k].dtype == b[k].dtype, k


@pytest.mark.parametrize("shard_index,shard_count", [(0, 1), (1, 2), (2, 3)])
def test_the_same_batches_as_grain_over_several_epochs(shard_index, shard_count):
  """Also when the process caches only its own rows (`CachedRows` of `shard_rows`)."""
  kwargs = dict(batch_size=2, seed=5, shard_index=shard_index, shard_count=shard_count)
  grain_path, in_memory = _both(**kwargs)
  rows = memory.shard_rows(len(SOURCE), shard_index, shard_count)
  own = memory.MemoryBatches(memory.CachedRows(SOURCE, rows), TRANSFORMS, **kwargs)
  for _ in range(20):  # 40 records: past the third epoch of a shard of 7 to 23 records
    batch = next(grain_path)
    _equal(batch, next(in_memory))
    _equal(batch, next(own))
    assert set(np.round(batch["image"][:, 0, 0, 0] * 255).tolist()) <= set(rows)


def test_cached_rows_hold_only_the_shards_records():
  rows = memory.shard_rows(23, 1, 2)
  assert rows == range(11, 22)
  cached = memory.CachedRows(SOURCE, rows)
  assert len(cached) == 23 and cached[11]["label"] == 11 % 3
  with pytest.raises(IndexError, match="outside this process's cached rows"):
    cached[3]


def test_num_epochs_ends_both_alike():
  grain_path, in_memory = _both(batch_size=5, seed=0, num_epochs=1)
  assert len(list(grain_path)) == len(list(in_memory)) == 4


@pytest.mark.parametrize("direction", ["grain to memory", "memory to grain"])
def test_a_position_saved_on_one_path_resumes_on_the_other(direction):
  grain_path, in_memory = _both(batch_size=4, seed=2)
  first, second = (
    (grain_path, in_memory) if direction == "grain to memory" else (in_memory, grain_path)
  )
  for _ in range(3):
    next(first), next(second)
  state = first.get_state()
  assert state == second.get_state()  # byte for byte grain's JSON
  _, fresh = _both(batch_size=4, seed=2)
  other = (
    fresh
    if direction == "grain to memory"
    else pipeline.train_batches(SOURCE, TRANSFORMS, batch_size=4, seed=2)
  )
  other.set_state(state)
  _equal(next(other), next(first))


def test_random_ops_or_workers_keep_grain():
  assert memory.applies(TRANSFORMS, cached=True, worker_count=0)
  assert not memory.applies(TRANSFORMS, cached=False, worker_count=0)
  assert not memory.applies(TRANSFORMS, cached=True, worker_count=2)
  assert not memory.applies(ops.parse("value_range(0, 1)|flip_lr"), cached=True, worker_count=0)


def test_a_position_of_another_sampler_is_refused():
  _, in_memory = _both(batch_size=4, seed=2)
  _, other = _both(batch_size=4, seed=3)
  with pytest.raises(ValueError, match="another sampler"):
    in_memory.set_state(other.get_state())
