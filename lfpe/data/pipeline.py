"""The grain input pipeline: per-process slices of a TFDS source, batched into global arrays.

Training (`train=True`): grain's `DataLoader` shuffles this process's slice with `seed` (a
new permutation each epoch), runs `augment` then `preprocess` (random ops get a generator
seeded by `seed` and the record's position), and batches with `drop_remainder`. Its state
(a few integers, JSON bytes) is what a checkpoint saves: `TrainIterator` has the
`get_state` / `set_state` that `grain.checkpoint.CheckpointHandler` calls, so with orbax:
`ocp.CheckpointManager(dir, item_handlers={'data': grain.checkpoint.CheckpointHandler(), ...})`
and `args=ocp.args.Composite(data=grain.checkpoint.CheckpointSave(it), ...)` to save,
`data=grain.checkpoint.CheckpointRestore(it)` to restore (one JSON file per process).

Evaluation (`train=False`): one ordered pass over the split. Every process yields the same
number of batches; the last ones are padded with zeros and `mask` (bool `[B]`) marks real
examples, so metrics summed with the mask are exact over the whole split.

Slicing: a process reads the rows of the global batch its devices hold (`process_shard`),
i.e. slice `shard_index` of `shard_count` contiguous, even slices of the split
(`process_slice`). Batches are `{'image': [B, H, W, C] float32, 'label': [B] int32, ...}`
as `jax.Array`s sharded over the mesh's `data` axis.

Mixed resolution (`data.train_sizes`): each training batch is resized to one size drawn from
them by (seed, batch index), the same on every process; `TrainIterator` keeps the index.

NaFlex (`data.naflex`): each training example is resized to an (h, w) drawn per example,
and every batch's images are packed (`lfpe.resolution.pack`) into `image = {patches, index,
shape, valid}` (`lfpe.data.packing`); evaluation packs its images at their own size.

Detection (`data.detection` set): examples are DETR's inputs (`detection_ops.OUTPUT`, with
the pixel `mask`), each training example at a size drawn from `train_sizes`; evaluation
passes over the split once per size of `test_sizes`, and marks real examples `valid`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence

import grain
import jax
import ml_collections
import numpy as np
from absl import flags
from jax.experimental import multihost_utils

from lfpe import resolution
from lfpe.data import builders, config, detection_ops, image_ops, memory, ops, packing

Batch = dict[str, np.ndarray]


class NamedSource:
  """A random-access source with a short, stable repr (grain checks it when restoring)."""

  def __init__(self, source: Sequence, name: str):
    self._source, self._name = source, name

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index: int):
    return self._source[index]

  def __repr__(self) -> str:
    return f"NamedSource({self._name!r}, {len(self)} records)"


def batch_sharding(mesh: jax.sharding.Mesh | jax.sharding.Sharding) -> jax.sharding.Sharding:
  """Batches are sharded along the mesh's `data` axis (replicated over the others)."""
  if isinstance(mesh, jax.sharding.Mesh):
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  return mesh


def process_shard(sharding: jax.sharding.Sharding, global_batch_size: int) -> tuple[int, int]:
  """`(shard_index, shard_count)`: which block of each global batch this process loads.

  Processes whose devices hold the same rows (a `model` axis across hosts) get the same
  shard, so they read the same examples.
  """
  index_map = sharding.devices_indices_map((global_batch_size,))
  rows = {
    idx[0].indices(global_batch_size)[:2]
    for d, idx in index_map.items()
    if d.process_index == jax.process_index()
  }
  start, stop = min(r[0] for r in rows), max(r[1] for r in rows)
  local = stop - start
  if sum(b - a for a, b in rows) != local or global_batch_size % local or start % local:
    raise ValueError(
      f"This process's devices hold rows {sorted(rows)} of the batch, not one even block; "
      "order the mesh devices so that each process holds a contiguous part of `data`."
    )
  return start // local, global_batch_size // local


def process_slice(num_records: int, shard_index: int, shard_count: int) -> tuple[int, int]:
  """`[start, stop)` of slice `shard_index`: even, contiguous; the first `n % count` get +1."""
  size, extra = divmod(num_records, shard_count)
  start = shard_index * size + min(shard_index, extra)
  return start, start + size + (shard_index < extra)


def train_batches(
  source: Sequence,
  transforms: list,
  *,
  batch_size: int,
  seed: int,
  shard_index: int = 0,
  shard_count: int = 1,
  num_epochs: int | None = None,
  worker_count: int = 0,
) -> grain.DataLoaderIterator:
  """Shuffled, repeated (`num_epochs=None`: forever) local batches of `batch_size`."""
  if worker_count and not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()  # grain's workers read absl flags; scripts may not parse them.
  shard, sampler = memory.train_sampler(
    len(source),
    seed=seed,
    shard_index=shard_index,
    shard_count=shard_count,
    num_epochs=num_epochs,
  )
  loader = grain.DataLoader(
    data_source=source,
    sampler=sampler,
    shard_options=shard,
    worker_count=worker_count,
    operations=[*transforms, grain.transforms.Batch(batch_size, drop_remainder=True)],
  )
  return iter(loader)


class EvalBatches:
  """One ordered pass over this process's slice, padded to `len(self)` full batches.

  `valid_key` names the bool `[B]` that marks real examples (`mask`; detection: `valid`).
  """

  def __init__(
    self,
    source: Sequence,
    transforms: list,
    *,
    batch_size: int,
    shard_index: int = 0,
    shard_count: int = 1,
    valid_key: str = "mask",
  ):
    start, stop = process_slice(len(source), shard_index, shard_count)
    largest = -(-len(source) // shard_count)  # Every process yields as many batches.
    self._num_batches = -(-largest // batch_size)
    self._batch_size, self._valid_key = batch_size, valid_key
    self._template = ops.apply(transforms, source[0])
    dataset = grain.MapDataset.source(source)[start:stop]
    for op in transforms:
      dataset = dataset.map(op)
    self._dataset = dataset

  def __len__(self) -> int:
    return self._num_batches

  def __iter__(self) -> Iterator[Batch]:
    batches = self._dataset.to_iter_dataset().batch(self._batch_size)
    it = iter(batches) if len(self._dataset) else iter(())
    for _ in range(self._num_batches):
      yield self._pad(next(it, None))

  def _pad(self, batch: Batch | None) -> Batch:
    n = 0 if batch is None else len(next(iter(batch.values())))
    out = {}
    for k, v in self._template.items():
      out[k] = np.zeros((self._batch_size, *np.shape(v)), np.asarray(v).dtype)
      if n:
        out[k][:n] = batch[k]
    out[self._valid_key] = np.arange(self._batch_size) < n
    return out


def to_global(batch: Batch, sharding: jax.sharding.Sharding, global_batch_size: int):
  """This process's numpy batch -> one global `jax.Array` per field (nested: per leaf)."""
  return jax.tree.map(
    lambda v: jax.make_array_from_process_local_data(
      sharding, v, (global_batch_size, *v.shape[1:])
    ),
    batch,
  )


class TrainIterator:
  """Global training batches; `get_state` / `set_state` make it checkpointable.

  With `sizes` (mixed resolution, `data.train_sizes`), batch i is resized (nearest) to
  `lfpe.resolution.draw_size(sizes, seed, i)`, or drawn natively at that size by `redraw`
  (`MemoryBatches.drawn`, for a dataset with `DatasetSpec.draw`); with `naflex`
  (`data.naflex`), row r of batch i to `draw_size(naflex.sizes, seed, (i, r))` (r: the row in
  the global batch, from `first_row`), then packed. The state then also holds i.
  """

  def __init__(
    self,
    local: grain.DataLoaderIterator | memory.MemoryBatches,
    sharding,
    global_batch_size: int,
    sizes: Sequence[int] | None = None,
    seed: int = 0,
    naflex: config.NaFlex | None = None,
    first_row: int = 0,
    redraw: Callable[[int], dict] | None = None,
    size_seed: int | None = None,
  ):
    self._local, self._sharding, self._batch = local, sharding, global_batch_size
    self._sizes, self._seed, self._index = sizes, seed, 0
    self._size_seed = seed if size_seed is None else size_seed
    self._naflex, self._first_row, self._redraw = naflex, first_row, redraw

  def __iter__(self) -> TrainIterator:
    return self

  def __next__(self) -> dict[str, jax.Array]:
    batch = next(self._local)
    if self._sizes:
      size = resolution.draw_size(self._sizes, self._size_seed, self._index)
      self._index += 1
      if batch["image"].shape[1:3] != (size, size) and self._redraw:
        batch = self._redraw(size)
      elif batch["image"].shape[1:3] != (size, size):
        resize = lambda x: image_ops.resize_image(x, size, "nearest")
        batch = {**batch, "image": np.stack([resize(x) for x in batch["image"]])}
    if self._naflex:
      rows = range(self._first_row, self._first_row + len(batch["image"]))
      draw = lambda r: resolution.draw_size(self._naflex.sizes, self._seed, (self._index, r))
      batch = packing.pack_batch(batch, self._naflex, [draw(r) for r in rows])
      self._index += 1
    return to_global(batch, self._sharding, self._batch)

  def get_state(self) -> bytes:
    """Where this process is (JSON bytes): the next batch after a restore is the next one."""
    state = self._local.get_state()
    if not (self._sizes or self._naflex):
      return state
    return json.dumps({"grain": state.decode(), "batch_index": self._index}).encode()

  def set_state(self, state: bytes) -> None:
    if self._sizes or self._naflex:
      saved = json.loads(state)
      state, self._index = saved["grain"].encode(), saved["batch_index"]
    self._local.set_state(state)

  def start_prefetch(self) -> None:
    self._local.start_prefetch()

  def close(self) -> None:
    """Stops grain's worker processes (`data.worker_count` > 0) and drops the pipeline, whose
    queues' semaphores `os._exit` (a user error's exit) would leave for the resource tracker
    to warn about. The trainer calls it on the way out, a crash or Ctrl-C included; the
    iterator is done then. grain 0.2's `DataLoaderIterator` has no `close`: its dataset
    iterator has."""
    workers = getattr(self._local, "_iterator", None)  # None: `MemoryBatches`, no workers
    if workers is not None:
      workers.close()
      self._local = None


class EvalLoader:
  """Global eval batches with `mask`; iterate it once per evaluation, `len` batches each
  (with `naflex`, packed: `packing.eval_naflex`)."""

  def __init__(
    self,
    local: EvalBatches,
    sharding,
    global_batch_size: int,
    naflex: config.NaFlex | None = None,
  ):
    self._local, self._sharding, self._batch = local, sharding, global_batch_size
    self._naflex = naflex

  def __len__(self) -> int:
    return len(self._local)

  def __iter__(self) -> Iterator[dict[str, jax.Array]]:
    for batch in self._local:
      batch = packing.pack_batch(batch, self._naflex) if self._naflex else batch
      yield to_global(batch, self._sharding, self._batch)


def _data_source(name: str, split: str, data_dir: str, encoded_images: bool):
  """`builders.data_source`; with several processes, process 0 builds a local dataset first.

  The others wait for it: building at the same time, they would collide in `data_dir`.
  """
  if jax.process_count() > 1 and builders.get_spec(name).builder is not None:
    if jax.process_index() == 0:
      builders.prepare(name, data_dir)
    multihost_utils.sync_global_devices(f"lfpe.data: {name} is prepared")
  return builders.data_source(name, split, data_dir, encoded_images)


def make_loader(
  data: ml_collections.ConfigDict,
  *,
  global_batch_size: int,
  seed: int,
  train: bool,
  mesh: jax.sharding.Mesh | jax.sharding.Sharding,
  split: str | None = None,
  num_epochs: int | None = None,
  size_seed: int | None = None,
) -> TrainIterator | EvalLoader:
  """The input pipeline of `config.data` for training (`TrainIterator`) or eval (`EvalLoader`).

  `split` overrides `data.train_split` / `data.eval_split`; `num_epochs` (training) stops
  after that many passes (None: forever); `size_seed` (default `seed`) draws each batch's
  size of `data.train_sizes` (`config.seeds` gives every seed's loader the first seed's, so
  that their batches stack). Raises ValueError for a bad config and
  FileNotFoundError, with the preparation commands, for a missing catalog dataset.
  """
  resolved = config.resolve(data)
  sharding = batch_sharding(mesh)
  config.check_batch(global_batch_size, sharding.mesh if hasattr(sharding, "mesh") else None)
  split = split or resolved.split(train)
  transforms = resolved.ops(train)
  encoded = ops.takes_encoded(transforms)  # inception_crop first: decode its window only
  source = _data_source(resolved.spec.name, split, resolved.data_dir, encoded)
  shard_index, shard_count = process_shard(sharding, global_batch_size)
  rows = range(len(source))
  if resolved.cache:  # Decode once; later reads are lookups. Training: this process's rows.
    rows = memory.shard_rows(len(source), shard_index, shard_count) if train else rows
    source = memory.CachedRows(source, rows)
  if resolved.detection and not train:
    source = detection_ops.AtSizes(source, resolved.detection.test_sizes)
  source = NamedSource(source, f"{resolved.spec.name}:{split}")
  example = ops.apply(transforms, source[rows.start], np.random.default_rng(seed))
  check_image_size(resolved, example)
  kwargs = dict(
    batch_size=global_batch_size // shard_count, shard_index=shard_index, shard_count=shard_count
  )
  if train:
    order = memory.sampler_seed(seed, resolved.epoch_orders)  # grain's: orders, augmentation
    in_memory = memory.applies(transforms, resolved.cache, resolved.worker_count)
    draws = resolved.spec.draw if resolved.train_sizes else None
    if draws and not in_memory:
      raise ValueError(
        f"`data.train_sizes` on {resolved.spec.name} draws each example natively at its "
        "batch's size, from the records held in memory: set `data.cache=True`, with "
        "deterministic `data.augment` and `data.worker_count=0`."
      )
    if in_memory:
      local = memory.MemoryBatches(
        source, transforms, seed=order, num_epochs=num_epochs, draw=draws, **kwargs
      )
    else:
      local = train_batches(
        source,
        transforms,
        seed=order,
        num_epochs=num_epochs,
        worker_count=resolved.worker_count,
        **kwargs,
      )
    return TrainIterator(
      local,
      sharding,
      global_batch_size,
      resolved.train_sizes,
      seed,
      naflex=resolved.naflex,
      first_row=shard_index * kwargs["batch_size"],
      redraw=local.drawn if draws else None,
      size_seed=size_seed,
    )
  valid_key = "valid" if resolved.detection else "mask"  # Detection: `mask` is the pixels'.
  local = EvalBatches(source, transforms, valid_key=valid_key, **kwargs)
  return EvalLoader(local, sharding, global_batch_size, packing.eval_naflex(resolved, example))


def check_image_size(resolved: config.Resolved, example: dict) -> None:
  """The ops must give `data.image_size` images (checked on one example, before training)."""
  size = resolved.image_size
  if size and "image" in example and example["image"].shape[:2] != (size, size):
    raise ValueError(
      f"`data.preprocess` / `data.augment` give images of shape {example['image'].shape}, "
      f"but `data.image_size`={size}; end the ops with resize({size}) or a {size} crop."
    )
