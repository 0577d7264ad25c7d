"""Many seeds of one small model, trained as one vmapped program (003's 10-seed tables).

Every seed has its own initialisation, its own data order and its own optimizer state;
all of them live in a `lfpe.train.steps.TrainState` with a leading seed axis `[S, ...]`.
Each update is the trainer's own step (`steps.train_step` with the `lfpe.tasks`
classification or regression task and the optimizer of `lfpe.train.optim`), so a seed
here trains exactly as one run of the trainer would on the same batches; only the driver
differs: the data sit in memory, and one epoch of one seed is a `lax.scan` of that step
over a fresh permutation. `train` runs the epoch over the seed axis in one of three ways:
`vmap` (one jitted, vmapped program: one compilation, batched matmuls), `map` (one jitted
program that loops over seeds with `lax.map`) or `loop` (seeds one
after another, the baseline). `experiments/position_study` measures the speed-ups.

Loss kinds: `xent` (classification, integer labels) and `mse` (regression; targets are
standardised with the training mean and std, which leaves R^2 unchanged).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from lfpe.tasks.classification import Classification
from lfpe.tasks.regression import Regression
from lfpe.train import steps
from lfpe.train.optim import make_optimizer

LOSSES = ("xent", "mse")
STRATEGIES = ("vmap", "map", "loop")
_DATA = 1  # folded into a seed's key for its data order (init uses the bare key)
TARGET = {"xent": "label", "mse": "target"}  # the batch key of the targets


@dataclasses.dataclass(frozen=True)
class TrainSpec:
  """How long and how to train every seed (AdamW, linear warmup, cosine decay)."""

  epochs: int = 30
  batch_size: int = 100
  lr: float = 1e-3
  weight_decay: float = 1e-4
  warmup_epochs: int = 2
  loss: str = "xent"
  eval_every: int = 0  # epochs between validation passes (0: only at the end)

  def __post_init__(self):
    if self.loss not in LOSSES:
      raise ValueError(f"TrainSpec: loss={self.loss!r}; use one of {LOSSES}.")
    if self.epochs < 1 or self.batch_size < 1:
      raise ValueError("TrainSpec: epochs and batch_size must be positive.")


def make_tx(
  spec: TrainSpec, steps_per_epoch: int, trainable: Callable[[tuple[str, ...]], bool] | None = None
) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """The optimizer of `lfpe.train.optim` for `spec` and its schedule; parameters outside
  `trainable` frozen.

  `trainable(path)` gets a parameter's key path (tuple of names) and says whether it trains.
  """
  config = ml_collections.ConfigDict(
    {
      "optim": {"name": "adamw", "lr": spec.lr, "weight_decay": spec.weight_decay},
      "schedule": {
        "name": "warmup_cosine",
        "warmup_steps": min(spec.warmup_epochs, spec.epochs - 1) * steps_per_epoch,
      },
      "total_steps": spec.epochs * steps_per_epoch,
    }
  )
  tx, schedule = make_optimizer(config)
  if trainable is None:
    return tx, schedule
  labels = lambda params: jax.tree_util.tree_map_with_path(
    lambda path, _: "train" if trainable(_names(path)) else "freeze", params
  )
  return optax.multi_transform({"train": tx, "freeze": optax.set_to_zero()}, labels), schedule


def task_for(kind: str) -> Classification:
  """The `lfpe.tasks` task of a loss kind: classification, or regression on standardised
  targets (`Data` standardises them already) under the batch key `target`."""
  if kind == "xent":
    return Classification()
  return Regression(target=TARGET["mse"])


def _names(path) -> tuple[str, ...]:
  return tuple(getattr(k, "key", getattr(k, "name", str(k))) for k in path)


def init_params(model: nn.Module, seeds: Sequence[int], image_shape: Sequence[int]) -> Any:
  """Parameters of `model` for every seed, `[S, ...]` leaves (unboxed)."""
  example = jnp.zeros((1, *image_shape), jnp.float32)
  init = lambda key: nn.meta.unbox(model.init(key, example, train=False)["params"])
  keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
  return jax.jit(jax.vmap(lambda k: init(jax.random.wrap_key_data(k))))(keys)


def metric(kind: str, outputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
  """Per-seed accuracy (`xent`) or R^2 averaged over targets (`mse`, 003 Eq. 5): `[S]`.

  `outputs` `[S, N, K]`, `targets` `[N]` (labels) or `[N, T]` (regression).
  """
  outputs, targets = np.asarray(outputs, np.float64), np.asarray(targets)
  if kind == "xent":
    return np.mean(outputs.argmax(-1) == targets[None], axis=1)
  sse = np.sum(np.square(outputs - targets[None]), axis=1)  # [S, T]
  sst = np.sum(np.square(targets - targets.mean(0)), axis=0)  # [T]
  return np.mean(1.0 - sse / sst, axis=-1)


@dataclasses.dataclass
class Data:
  """One split in memory: float images `[N, H, W, C]` in [0, 1] and targets `[N(, T)]`."""

  images: np.ndarray
  targets: np.ndarray

  @classmethod
  def from_arrays(
    cls,
    arrays: dict[str, np.ndarray],
    kind: str,
    stats: tuple[np.ndarray, np.ndarray] | None = None,
  ) -> Data:
    """From `lfpe.data.redgreen.load` output; `stats` (mean, std) standardise `mse` targets."""
    images = arrays["image"].astype(np.float32) / 255.0
    if kind == "xent":
      return cls(images, arrays["label"].astype(np.int32))
    mean, std = stats if stats is not None else target_stats(arrays)
    return cls(images, ((arrays["distance"] - mean) / std).astype(np.float32))

  def take(self, n: int) -> Data:
    return Data(self.images[:n], self.targets[:n])


def target_stats(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
  """Mean and std of the regression targets of a (training) split."""
  return arrays["distance"].mean(0), arrays["distance"].std(0)


def predict(model: nn.Module, params: Any, images: np.ndarray, chunk: int = 500) -> np.ndarray:
  """Outputs of every seed on `images`: `[S, N, K]` (numpy)."""
  apply = jax.jit(
    jax.vmap(lambda p, x: model.apply({"params": p}, x, train=False), in_axes=(0, None))
  )
  return np.concatenate(
    [np.asarray(apply(params, images[i : i + chunk])) for i in range(0, len(images), chunk)], axis=1
  )


def evaluate(model: nn.Module, params: Any, data: Data, kind: str) -> np.ndarray:
  """Per-seed accuracy or R^2 on `data`, `[S]`."""
  return metric(kind, predict(model, params, data.images), data.targets)


def _seed_epoch(model: nn.Module, tx, schedule, kind: str, updates: int, batch: int) -> Callable:
  """`(state, key, images, targets) -> (state, losses [steps])`.

  One epoch of one seed: a fresh permutation of the data from `key`, then `updates` updates
  of the trainer's `steps.train_step` on batches of `batch` examples, as one `lax.scan`.
  """
  task = task_for(kind)

  def epoch(state, key, images, targets):
    def step(state, idx):  # idx [B]
      batch = {"image": images[idx], TARGET[kind]: targets[idx]}
      state, metrics = steps.train_step(
        state, batch, task=task, model=model, tx=tx, schedule=schedule, dropout_rng=drop_key
      )
      return state, metrics["loss"]

    perm_key, drop_key = jax.random.split(key)  # the step folds its number into drop_key
    perm = jax.random.permutation(perm_key, len(images))[: updates * batch].reshape(updates, batch)
    return jax.lax.scan(step, state, perm)

  return epoch


def _over_seeds(epoch: Callable, strategy: str) -> Callable:
  """The per-seed `epoch` run over the leading seed axis of params, opt_state and keys."""
  if strategy == "vmap":
    return jax.jit(jax.vmap(epoch, in_axes=(0, 0, None, None)), donate_argnums=0)
  if strategy == "map":
    mapped = lambda state, keys, x, y: jax.lax.map(lambda a: epoch(*a, x, y), (state, keys))
    return jax.jit(mapped, donate_argnums=0)
  single = jax.jit(epoch)

  def loop(state, keys, images, targets):  # seeds one after another
    outs = [single(*_index((state, keys), i), images, targets) for i in range(len(keys))]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *outs)

  return loop


def _index(tree: Any, i: int) -> Any:
  return jax.tree.map(lambda a: a[i], tree)


def train(
  model: nn.Module,
  params: Any,
  data: Data,
  spec: TrainSpec,
  seeds: Sequence[int],
  *,
  trainable: Callable[[tuple[str, ...]], bool] | None = None,
  validation: Data | None = None,
  strategy: str = "vmap",
) -> tuple[Any, dict[str, Any]]:
  """Trains all seeds of `params` (`[S, ...]`) on `data`; returns params and a history.

  Seed `s` (one per row of `params`) draws its data order from `key(s)` alone, so a seed
  trains the same whatever else trains beside it, and every `strategy` gives the same
  result: `vmap` (one vmapped program), `map` (one program, `lax.map` over seeds) or
  `loop` (one program per seed, run one after another: the baseline). Every update is
  `lfpe.train.steps.train_step`. The history holds
  the mean training loss per epoch `[E, S]`, the validation metric `(epoch, [S])` every
  `spec.eval_every` epochs and at the end, the wall time of each epoch (the first one
  includes compilation; validation is counted in the next) and the total in seconds.
  """
  if strategy not in STRATEGIES:
    raise ValueError(f"train: strategy={strategy!r}; use one of {STRATEGIES}.")
  per_epoch = len(data.images) // spec.batch_size
  if per_epoch < 1:
    raise ValueError(f"train: {len(data.images)} examples < batch_size={spec.batch_size}.")
  tx, schedule = make_tx(spec, per_epoch, trainable)
  if jax.tree.leaves(params)[0].shape[0] != len(seeds):
    raise ValueError(
      f"train: params hold {jax.tree.leaves(params)[0].shape[0]} seeds, got "
      f"seeds={list(seeds)}; pass the seeds given to init_params."
    )
  params = jax.tree.map(jnp.array, params)  # a copy: the caller's params are not donated
  new_state = lambda p: steps.TrainState(
    step=jnp.zeros((), jnp.int32), params=p, opt_state=tx.init(p), constants={}
  )
  state = jax.jit(jax.vmap(new_state))(params)
  epoch = _seed_epoch(model, tx, schedule, spec.loss, per_epoch, spec.batch_size)
  epoch = _over_seeds(epoch, strategy)
  images, targets = jnp.asarray(data.images), jnp.asarray(data.targets)
  seed_keys = jnp.stack([jax.random.fold_in(jax.random.key(int(s)), _DATA) for s in seeds])
  history, start = {"loss": [], "validation": [], "epoch_seconds": []}, time.perf_counter()
  for e in range(spec.epochs):
    keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(seed_keys, e)  # [S]
    state, losses = epoch(state, keys, images, targets)
    history["loss"].append(np.asarray(losses).mean(-1))  # [S]; waits for the epoch
    history["epoch_seconds"].append(time.perf_counter() - start - sum(history["epoch_seconds"]))
    last = e + 1 == spec.epochs
    if validation is not None and (last or (spec.eval_every and (e + 1) % spec.eval_every == 0)):
      history["validation"].append((e + 1, evaluate(model, state.params, validation, spec.loss)))
  history["seconds"] = time.perf_counter() - start
  return state.params, history
