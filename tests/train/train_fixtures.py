"""A tiny model, task and in-memory data for trainer tests (no lfpe.models / lfpe.data).

Imported by the tests of this folder (`from train_fixtures import ...`); importing it
registers the task "tiny_classification".

TinyModel is an MLP over flattened pixels whose kernels carry the same logical axis
names as the ViT ('patch', 'embed', 'mlp', 'classes'), so sharding rules apply to it.
It also holds a fixed random offset in a "constants" collection (as fixed_fourier_mlp
does), so the trainer's handling of non-trainable variables is exercised.
The data are Gaussian blobs: class c has mean image `means[c]`, plus noise.
"""

import importlib.util
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from lfpe import tasks
from lfpe.tasks.classification import Classification
from lfpe.train.config_lib import base_config


def _dense(features: int, names: tuple[str, str], name: str) -> nn.Dense:
  return nn.Dense(
    features,
    name=name,
    kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), names),
    bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), names[1:]),
  )


class TinyModel(nn.Module):
  num_classes: int
  width: int = 8
  dropout: float = 0.1
  dtype: str = "float32"

  @nn.compact
  def __call__(self, images, *, train: bool):
    x = images.reshape(images.shape[0], -1).astype(self.dtype)  # [B, H*W*C]
    x = _dense(self.width, ("patch", "embed"), "embed")(x)
    # A fixed random offset: a non-trainable collection, like fixed_fourier_mlp's W_r.
    init = lambda: 0.1 * jax.random.normal(self.make_rng("params"), (self.width,))
    x = x + self.variable("constants", "offset", init).value.astype(x.dtype)
    h = nn.gelu(_dense(2 * self.width, ("embed", "mlp"), "mlp_in")(x))  # [B, 2*width]
    h = nn.Dropout(self.dropout, deterministic=not train)(h)
    x = x + _dense(self.width, ("mlp", "embed"), "mlp_out")(h)
    return _dense(self.num_classes, ("embed", "classes"), "head")(x)  # [B, K]


class TinyClassification(Classification):
  """Classification with TinyModel instead of the ViT."""

  def data_info(self, config):
    size = config.data.image_size
    return config.data.num_classes, (size, size), config.data.channels

  def validate(self, config):
    if config.model.width % 2:
      raise ValueError(f"config.model.width must be even, got {config.model.width}.")

  def create_model(self, config):
    return TinyModel(
      num_classes=config.data.num_classes, width=config.model.width, dtype=config.compute_dtype
    )


tasks.register("tiny_classification", TinyClassification)


class NanGradClassification(TinyClassification):
  """Its loss is always finite, its gradient NaN on a batch of all-zero images (sqrt's
  gradient at 0, times 0): the update a finite loss cannot reveal."""

  def loss(self, outputs, batch):
    loss, metrics = super().loss(outputs, batch)
    trap = jnp.sqrt(jnp.sum(jnp.abs(batch["image"])) * jnp.sum(outputs.astype(jnp.float32) ** 2))
    return loss + 0.0 * trap, metrics


tasks.register("tiny_nan_grad", NanGradClassification)


def blobs(num: int, num_classes: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """`num` images [num, size, size, 1] and labels: class means plus N(0, 0.5) noise."""
  means = np.random.default_rng(123).normal(size=(num_classes, size, size, 1))
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, num_classes, num)
  images = means[labels] + 0.5 * rng.normal(size=(num, size, size, 1))
  return images.astype(np.float32), labels.astype(np.int32)


class Interrupted(Exception):
  pass


class ArrayLoader:
  """Global batches of in-memory arrays as sharded jax.Arrays, with get/set_state.

  Training: endless, reshuffled every epoch from (seed, epoch). Eval: one pass per
  `iter()`, the last batch padded and marked by 'mask'. `nan_after` puts NaN images
  into every batch from that batch index on, `zero_at` all-zero images into that batch
  alone; `stop_after` raises Interrupted when
  asked for that batch index (a run killed mid-way, in-process).
  """

  def __init__(
    self,
    images,
    labels,
    *,
    global_batch_size,
    seed,
    train,
    sharding,
    nan_after=None,
    zero_at=None,
    stop_after=None,
  ):
    self.images, self.labels, self.batch = images, labels, global_batch_size
    self.seed, self.train, self.sharding, self.nan_after = seed, train, sharding, nan_after
    self.stop_after, self.zero_at = stop_after, zero_at
    self.position = 0  # batches taken so far

  def get_state(self):
    return {"position": self.position}

  def set_state(self, state):
    self.position = state["position"]

  def __iter__(self):
    if not self.train:
      self.position = 0
    return self

  def __next__(self):
    if self.stop_after is not None and self.position >= self.stop_after:
      raise Interrupted(f"stopped before batch {self.position}")
    n = len(self.labels)
    if self.train:
      starts = self.position * self.batch + np.arange(self.batch)
      epochs, offsets = starts // n, starts % n
      rows = np.array(
        [
          np.random.default_rng([self.seed, e]).permutation(n)[o]
          for e, o in zip(epochs, offsets, strict=True)
        ]
      )
      mask = np.ones(self.batch, np.float32)
    else:
      if self.position * self.batch >= n:
        raise StopIteration
      rows = self.position * self.batch + np.arange(self.batch)
      mask = (rows < n).astype(np.float32)
      rows = np.minimum(rows, n - 1)
    batch = {"image": self.images[rows].copy(), "label": self.labels[rows]}
    if not self.train:
      batch["mask"] = mask
    if self.nan_after is not None and self.position >= self.nan_after:
      batch["image"][:] = np.nan
    if self.position == self.zero_at:
      batch["image"][:] = 0
    self.position += 1
    return {k: jax.device_put(v, self.sharding) for k, v in batch.items()}


def make_array_loader(data_config, *, global_batch_size, seed, train, mesh, stop_after=None):
  """The trainer's `make_loader` for `data_config` (num_train, num_test, image_size, ...);
  `stop_after` (not a config field: a kill is no part of the experiment) interrupts training."""
  num = data_config.num_train if train else data_config.num_test
  images, labels = blobs(
    num, data_config.num_classes, data_config.image_size, seed=0 if train else 1
  )
  return ArrayLoader(
    images,
    labels,
    global_batch_size=global_batch_size,
    seed=seed,
    train=train,
    sharding=mesh,
    nan_after=data_config.get("nan_after") if train else None,
    zero_at=data_config.get("zero_at") if train else None,
    stop_after=stop_after if train else None,
  )


def tiny_config(**overrides) -> ml_collections.ConfigDict:
  """A complete training config for TinyModel on blobs; `overrides` use dotted keys."""
  config = base_config()
  config.update(
    dict(total_steps=20, batch_size=16, eval_batch_size=16, checkpoint_every=10, eval_every=10)
  )
  config.update(dict(log_every=1, progress=False))
  config.task.name = "tiny_classification"
  config.optim.lr = 1e-2
  config.schedule.warmup_steps = 4
  config.data = dict(
    name="blobs",
    num_classes=4,
    image_size=4,
    channels=1,
    num_train=96,
    num_test=40,
    nan_after=None,
    zero_at=None,
  )
  config.model_name = "tiny"
  config.model = dict(posemb="none", width=8)
  for key, value in overrides.items():
    node = config
    *parents, leaf = key.split(".")
    for p in parents:
      node = node[p]
    node[leaf] = value
  return config


def digits_small() -> ml_collections.ConfigDict:
  """configs/vit_digits.py:small=1, unlocked (the real ViT on the real digits pipeline)."""
  path = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "vit_digits.py")
  spec = importlib.util.spec_from_file_location("vit_digits", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return ml_collections.ConfigDict(module.get_config("small=1").to_dict())
