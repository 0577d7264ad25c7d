"""The grain pipeline: seeded shuffling, resumable state, sharded global batches, eval masks."""

import grain
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import pytest

from lfpe import resolution
from lfpe.data import builders, config, memory, pipeline
from lfpe.train import seeds


def _labels(it, n):
  return [np.asarray(next(it)["label"]).tolist() for _ in range(n)]


def _train(cfg, mesh, seed=0, batch=16, **kw):
  return pipeline.make_loader(cfg, global_batch_size=batch, seed=seed, train=True, mesh=mesh, **kw)


def _records(n):
  """A source whose label is the record number, so coverage can be counted."""
  return [{"image": np.full((2, 2, 1), i % 256, np.uint8), "label": np.int64(i)} for i in range(n)]


def test_batches_are_global_arrays_sharded_over_data(digits_config, mesh):
  digits_config.image_size = 16
  batch = next(_train(digits_config, mesh))
  assert batch["image"].shape == (16, 16, 16, 1) and batch["image"].dtype == np.float32
  assert batch["label"].shape == (16,) and batch["label"].dtype == np.int32
  for x in batch.values():
    assert isinstance(x, jax.Array) and x.sharding.spec == jax.sharding.PartitionSpec("data")
    assert {s.data.shape[0] for s in x.addressable_shards} == {4}  # 16 rows over data=4
  image = np.asarray(batch["image"])
  assert 0.0 <= image.min() and image.max() <= 1.0


def test_upsampling_through_the_pipeline(digits_config, mesh):
  """data.image_size=32 upsamples each 8x8 digit into exact 4x4 blocks (nearest)."""
  digits_config.image_size = 32
  loader = pipeline.make_loader(digits_config, global_batch_size=8, seed=0, train=False, mesh=mesh)
  image = np.asarray(next(iter(loader))["image"])
  source = builders.data_source("digits", "test", digits_config.data_dir)
  raw = np.stack([source[i]["image"] for i in range(8)]) / 255.0
  np.testing.assert_allclose(image, np.repeat(np.repeat(raw, 4, 1), 4, 2), atol=1e-6)


def test_eval_preprocess_runs_on_evaluation_only(digits_config, mesh):
  """The ImageNet-style evaluation: a central crop before `preprocess` at eval, none in
  training (which resizes the whole 8x8 digit to 6x6)."""
  digits_config.image_size = 6
  digits_config.eval_preprocess = "central_crop(6)"
  loader = pipeline.make_loader(digits_config, global_batch_size=8, seed=0, train=False, mesh=mesh)
  image = np.asarray(next(iter(loader))["image"])
  source = builders.data_source("digits", "test", digits_config.data_dir)
  raw = np.stack([source[i]["image"] for i in range(8)]) / 255.0
  np.testing.assert_allclose(image, raw[:, 1:7, 1:7], atol=1e-6)
  train = config.resolve(digits_config).ops(train=True)
  assert not any(type(op).__name__ == "CentralCrop" for op in train)
  assert np.asarray(next(_train(digits_config, mesh))["image"]).shape[1:3] == (6, 6)


def test_same_seed_same_order_other_seed_differs(digits_config, mesh):
  a, b, c = (_labels(_train(digits_config, mesh, seed=s), 3) for s in (1, 1, 2))
  assert a == b and a != c


def test_epochs_are_permutations_reshuffled(mesh):
  source = pipeline.NamedSource(_records(12), "records")
  it = pipeline.train_batches(source, [], batch_size=4, seed=0)
  labels = [next(it)["label"].tolist() for _ in range(6)]
  first, second = sum(labels[:3], []), sum(labels[3:], [])
  assert sorted(first) == sorted(second) == list(range(12)) and first != second


def test_state_restore_resumes_at_the_next_batch(digits_config, mesh):
  digits_config.augment = "random_crop(8, 1)"
  it = _train(digits_config, mesh, seed=3)
  _labels(it, 2)
  state = it.get_state()
  expected = [next(it) for _ in range(2)]
  restored = _train(digits_config, mesh, seed=3)
  restored.set_state(state)
  for want in expected:
    got = next(restored)
    for k in want:  # Same examples, same augmentation.
      np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]))


def test_orbax_checkpoint_roundtrip(digits_config, mesh, tmp_path):
  it = _train(digits_config, mesh, seed=4)
  _labels(it, 3)
  handlers = {"data": grain.checkpoint.CheckpointHandler()}
  with ocp.CheckpointManager(tmp_path, item_handlers=handlers) as manager:
    manager.save(3, args=ocp.args.Composite(data=grain.checkpoint.CheckpointSave(it)))
    manager.wait_until_finished()
  expected = _labels(it, 2)
  restored = _train(digits_config, mesh, seed=4)
  with ocp.CheckpointManager(tmp_path, item_handlers=handlers) as manager:
    manager.restore(3, args=ocp.args.Composite(data=grain.checkpoint.CheckpointRestore(restored)))
  assert _labels(restored, 2) == expected


@pytest.mark.parametrize("num_records,count,drop", [(10, 4, False), (1437, 3, True), (7, 8, False)])
def test_process_slices_are_disjoint_and_cover(num_records, count, drop):
  slices = [pipeline.process_slice(num_records, i, count) for i in range(count)]
  rows = [r for start, stop in slices for r in range(start, stop)]
  assert rows == list(range(num_records))  # Contiguous, disjoint, covering, in order.
  assert max(b - a for a, b in slices) - min(b - a for a, b in slices) <= 1


def test_simulated_processes_read_disjoint_slices():
  """4 processes x 2 batches of 3: each reads only its own quarter of 24 records."""
  source = pipeline.NamedSource(_records(24), "records")
  seen = []
  for index in range(4):
    it = pipeline.train_batches(source, [], batch_size=3, seed=0, shard_index=index, shard_count=4)
    labels = sum((next(it)["label"].tolist() for _ in range(2)), [])
    assert sorted(labels) == list(range(6 * index, 6 * index + 6))
    seen += labels
  assert sorted(seen) == list(range(24))


@pytest.mark.parametrize("num_records,count,batch", [(10, 3, 2), (5, 4, 4), (12, 2, 3)])
def test_eval_covers_every_record_once_with_mask(num_records, count, batch):
  source = _records(num_records)
  seen, lengths = [], set()
  for index in range(count):
    batches = pipeline.EvalBatches(
      source, [], batch_size=batch, shard_index=index, shard_count=count
    )
    out = list(batches)
    lengths.add(len(out))
    assert len(out) == len(batches)
    for b in out:
      assert b["label"].shape == (batch,) and b["mask"].dtype == bool
      seen += b["label"][b["mask"]].tolist()
      assert not b["label"][~b["mask"]].any()  # Padding is zeros.
  assert len(lengths) == 1  # Every process yields the same number of batches.
  assert sorted(seen) == list(range(num_records))


def test_eval_loader_over_the_digits_test_split(digits_config, mesh):
  loader = pipeline.make_loader(digits_config, global_batch_size=64, seed=0, train=False, mesh=mesh)
  batches = list(loader)
  assert len(batches) == len(loader) == 6  # ceil(360 / 64)
  mask = np.concatenate([np.asarray(b["mask"]) for b in batches])
  labels = np.concatenate([np.asarray(b["label"]) for b in batches])[mask]
  assert mask.sum() == 360
  np.testing.assert_array_equal(np.bincount(labels), [36] * 10)
  assert batches[-1]["mask"].sharding.spec == jax.sharding.PartitionSpec("data")


def test_process_shard_of_a_single_process(mesh):
  sharding = pipeline.batch_sharding(mesh)
  assert pipeline.process_shard(sharding, 16) == (0, 1)


def test_bad_image_size_is_caught_before_training(digits_config, mesh):
  digits_config.image_size = 16
  digits_config.preprocess = "value_range(0, 1)"  # Forgets to resize.
  with pytest.raises(ValueError, match=r"data.image_size`=16.*resize\(16\)"):
    _train(digits_config, mesh)


@pytest.mark.parametrize(
  "batch,match", [(10, "multiple of the mesh's 'data' axis"), (0, "positive int")]
)
def test_batch_must_split_over_the_data_axis(digits_config, mesh, batch, match):
  with pytest.raises(ValueError, match=match):
    config.validate_data_config(digits_config, global_batch_size=batch, mesh=mesh)


def test_cached_split_gives_the_same_batches_and_state(digits_config, mesh):
  plain = _train(digits_config, mesh, seed=3)
  cached_config = digits_config.copy_and_resolve_references()
  cached_config.cache = True
  cached = _train(cached_config, mesh, seed=3)
  for _ in range(3):
    a, b = next(plain), next(cached)
    np.testing.assert_array_equal(a["image"], b["image"])
    np.testing.assert_array_equal(a["label"], b["label"])
  assert plain.get_state() == cached.get_state()


def test_mixed_resolution_draws_one_size_per_batch_and_resumes_exactly(digits_config, mesh):
  """data.train_sizes: each batch at a size drawn by (seed, batch index), nearest-resized from
  image_size; the state keeps the index, so a restored iterator continues the same draws."""
  digits_config.image_size, digits_config.train_sizes = 16, (8, 16, 32)
  it = _train(digits_config, mesh, seed=5)
  first = [next(it) for _ in range(3)]
  sizes = [resolution.draw_size((8, 16, 32), 5, i) for i in range(6)]
  assert [b["image"].shape[1] for b in first] == sizes[:3]
  assert len(set(sizes)) > 1  # draws differ (seed 5 gives more than one size in 6 batches)
  state = it.get_state()
  expected = [next(it) for _ in range(3)]
  restored = _train(digits_config, mesh, seed=5)
  restored.set_state(state)
  for want in expected:
    got = next(restored)
    np.testing.assert_array_equal(np.asarray(got["image"]), np.asarray(want["image"]))
  digits_config.train_sizes = None  # the same batches at image_size: a nearest resize of them
  plain = _train(digits_config, mesh, seed=5)
  for batch in first:
    size = batch["image"].shape[1]
    want = np.asarray(next(plain)["image"])
    idx = np.floor((np.arange(size) + 0.5) * 16 / size).astype(int)
    np.testing.assert_array_equal(np.asarray(batch["image"]), want[:, idx][:, :, idx])


@pytest.mark.parametrize("orders", memory.EPOCH_ORDERS)
def test_consecutive_seeds_share_epoch_orders_only_under_grains_rule(orders):
  """grain shuffles epoch e with seed + e: with the seed as it is, seed 1's first epoch is
  seed 0's second; `data.epoch_orders='independent'` hashes the seed first."""
  source = pipeline.NamedSource(_records(20), "records")

  def epochs(seed):
    it = pipeline.train_batches(source, [], batch_size=4, seed=memory.sampler_seed(seed, orders))
    flat = np.concatenate([next(it)["label"] for _ in range(10)]).tolist()
    return flat[:20], flat[20:]

  (first, second), (other_first, _) = epochs(0), epochs(1)
  assert sorted(first) == sorted(second) == sorted(other_first) == list(range(20))
  assert (other_first == second) == (orders == "grain")


def test_independent_orders_reach_both_training_paths(digits_config, mesh):
  """`data.epoch_orders` through make_loader: another order than grain's rule at the same
  seed, the same batches from memory (`cache`) as from grain; a typo names the field."""
  digits_config.image_size = 16
  grains = _labels(_train(digits_config, mesh, seed=3), 4)
  digits_config.epoch_orders = "independent"
  independent = _labels(_train(digits_config, mesh, seed=3), 4)
  assert independent != grains
  digits_config.cache = True
  assert _labels(_train(digits_config, mesh, seed=3), 4) == independent
  digits_config.epoch_orders = "shuffled"
  with pytest.raises(ValueError, match="data.epoch_orders"):
    _train(digits_config, mesh)


def test_seeds_share_their_batch_sizes_and_keep_their_own_orders(digits_config, mesh):
  """`config.seeds` with data.train_sizes: every seed's batch i at the size the first seed
  draws (they stack into one vmapped step), each seed its own examples."""
  digits_config.image_size, digits_config.train_sizes = 16, (8, 16, 32)
  config = ml_collections.ConfigDict({"seed": 5, "seeds": 2, "batch_size": 8})
  config.data = digits_config
  loader = seeds.train_loader(pipeline.make_loader, config, pipeline.batch_sharding(mesh))
  batches = [next(loader) for _ in range(6)]
  sizes = [resolution.draw_size((8, 16, 32), 5, i) for i in range(6)]
  assert [b["image"].shape[:4] for b in batches] == [(2, 8, s, s) for s in sizes]
  assert len(set(sizes)) > 1
  labels = np.asarray(batches[0]["label"])
  assert not np.array_equal(labels[0], labels[1])  # seed 5's and seed 6's own orders


def test_a_loader_without_size_seed_keeps_the_documented_contract(digits_config, mesh):
  """A user's `make_loader(data_config, *, global_batch_size, seed, train, mesh)` is not
  given `size_seed` (the trainer's documented signature)."""
  seeds_seen = []

  def user_loader(data_config, *, global_batch_size, seed, train, mesh):
    seeds_seen.append(seed)
    return iter(())

  digits_config.train_sizes = (8, 16)
  config = ml_collections.ConfigDict({"seed": 5, "seeds": 2, "batch_size": 8})
  config.data = digits_config
  seeds.train_loader(user_loader, config, pipeline.batch_sharding(mesh))
  assert seeds_seen == [5, 6]


@pytest.mark.parametrize("sizes", [(0, 16), ("16",), ()])
def test_bad_train_sizes_name_the_field(digits_config, sizes):
  digits_config.train_sizes = sizes
  with pytest.raises(ValueError, match="data.train_sizes"):
    config.resolve(digits_config)
