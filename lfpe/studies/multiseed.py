"""Many seeds of one small model, trained as one vmapped program (003's 10-seed tables).

Every seed has its own initialisation, its own data order and its own optimizer state;
all of them live in pytrees with a leading seed axis `[S, ...]`. One epoch of one seed is
a pure function (a `lax.scan` of AdamW steps); `train` runs it over the seed axis in one
of three ways: `vmap` (one jitted, vmapped program: one compilation, batched matmuls),
`map` (one jitted program that loops over seeds with `lax.map`) or `loop` (seeds one
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

from lfpe.tasks.classification import cross_entropy
from lfpe.train.optim import make_optimizer

LOSSES = ("xent", "mse")
STRATEGIES = ("vmap", "map", "loop")
_DATA = 1  # folded into a seed's key for its data order (init uses the bare key)


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
) -> optax.GradientTransformation:
  """The optimizer of `lfpe.train.optim` for `spec`; parameters outside `trainable` frozen.

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
  tx, _ = make_optimizer(config)
  if trainable is None:
    return tx
  labels = lambda params: jax.tree_util.tree_map_with_path(
    lambda path, _: "train" if trainable(_names(path)) else "freeze", params
  )
  return optax.multi_transform({"train": tx, "freeze": optax.set_to_zero()}, labels)


def _names(path) -> tuple[str, ...]:
  return tuple(getattr(k, "key", getattr(k, "name", str(k))) for k in path)


def init_params(model: nn.Module, seeds: Sequence[int], image_shape: Sequence[int]) -> Any:
  """Parameters of `model` for every seed, `[S, ...]` leaves (unboxed)."""
  example = jnp.zeros((1, *image_shape), jnp.float32)
  init = lambda key: nn.meta.unbox(model.init(key, example, train=False)["params"])
  keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
  return jax.jit(jax.vmap(lambda k: init(jax.random.wrap_key_data(k))))(keys)


def loss_value(kind: str, outputs: jax.Array, targets: jax.Array) -> jax.Array:
  """Mean loss over a batch: cross-entropy of logits `[B, K]` or MSE of `[B, T]`."""
  if kind == "xent":
    return jnp.mean(cross_entropy(outputs, targets))
  return jnp.mean(jnp.square(outputs - targets))


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


def _seed_epoch(
  model: nn.Module, tx: optax.GradientTransformation, kind: str, steps: int, batch: int
) -> Callable:
  """`(params, opt_state, key, images, targets) -> (params, opt_state, losses [steps])`.

  One epoch of one seed: a fresh permutation of the data from `key`, then `steps`
  AdamW updates on batches of `batch` examples, as one `lax.scan`.
  """

  def epoch(params, opt_state, key, images, targets):
    def step(carry, xs):
      params, opt_state = carry
      idx, drop_key = xs  # [B], the dropout key of this step

      def loss_fn(p):
        out = model.apply({"params": p}, images[idx], train=True, rngs={"dropout": drop_key})
        return loss_value(kind, out, targets[idx])

      loss, grads = jax.value_and_grad(loss_fn)(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state), loss

    perm_key, drop_key = jax.random.split(key)
    perm = jax.random.permutation(perm_key, len(images))[: steps * batch].reshape(steps, batch)
    drops = jax.random.split(drop_key, steps)
    (params, opt_state), losses = jax.lax.scan(step, (params, opt_state), (perm, drops))
    return params, opt_state, losses

  return epoch


def _over_seeds(epoch: Callable, strategy: str) -> Callable:
  """The per-seed `epoch` run over the leading seed axis of params, opt_state and keys."""
  if strategy == "vmap":
    return jax.jit(jax.vmap(epoch, in_axes=(0, 0, 0, None, None)), donate_argnums=(0, 1))
  if strategy == "map":
    mapped = lambda p, o, k, x, y: jax.lax.map(lambda a: epoch(*a, x, y), (p, o, k))
    return jax.jit(mapped, donate_argnums=(0, 1))
  single = jax.jit(epoch)

  def loop(params, opt_state, keys, images, targets):  # seeds one after another
    outs = [
      single(*_index((params, opt_state, keys), i), images, targets) for i in range(len(keys))
    ]
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
  `loop` (one program per seed, run one after another: the baseline). The history holds
  the mean training loss per epoch `[E, S]`, the validation metric `(epoch, [S])` every
  `spec.eval_every` epochs and at the end, the wall time of each epoch (the first one
  includes compilation; validation is counted in the next) and the total in seconds.
  """
  if strategy not in STRATEGIES:
    raise ValueError(f"train: strategy={strategy!r}; use one of {STRATEGIES}.")
  steps = len(data.images) // spec.batch_size
  if steps < 1:
    raise ValueError(f"train: {len(data.images)} examples < batch_size={spec.batch_size}.")
  tx = make_tx(spec, steps, trainable)
  if jax.tree.leaves(params)[0].shape[0] != len(seeds):
    raise ValueError(
      f"train: params hold {jax.tree.leaves(params)[0].shape[0]} seeds, got "
      f"seeds={list(seeds)}; pass the seeds given to init_params."
    )
  params = jax.tree.map(jnp.array, params)  # a copy: the caller's params are not donated
  opt_state = jax.jit(jax.vmap(tx.init))(params)
  epoch = _over_seeds(_seed_epoch(model, tx, spec.loss, steps, spec.batch_size), strategy)
  images, targets = jnp.asarray(data.images), jnp.asarray(data.targets)
  seed_keys = jnp.stack([jax.random.fold_in(jax.random.key(int(s)), _DATA) for s in seeds])
  history, start = {"loss": [], "validation": [], "epoch_seconds": []}, time.perf_counter()
  for e in range(spec.epochs):
    keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(seed_keys, e)  # [S]
    params, opt_state, losses = epoch(params, opt_state, keys, images, targets)
    history["loss"].append(np.asarray(losses).mean(-1))  # [S]; waits for the epoch
    history["epoch_seconds"].append(time.perf_counter() - start - sum(history["epoch_seconds"]))
    last = e + 1 == spec.epochs
    if validation is not None and (last or (spec.eval_every and (e + 1) % spec.eval_every == 0)):
      history["validation"].append((e + 1, evaluate(model, params, validation, spec.loss)))
  history["seconds"] = time.perf_counter() - start
  return params, history
