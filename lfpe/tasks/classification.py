"""Image classification: softmax cross-entropy (optional label smoothing), accuracy.

Batches hold 'image' [B, H, W, C] float and 'label' [B] int (or [B, K] target
distributions); eval batches also 'mask' [B] (true for real examples, false for
the padding that fills the last batches). The model (config.model_name='vit')
maps images to logits [B, K]; the number of classes and the image shape come from
the dataset's spec (lfpe.data) and config.data.image_size.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe import encodings, resolution
from lfpe.data import config as data_config
from lfpe.data import get_spec
from lfpe.models import vit
from lfpe.tasks import mixing
from lfpe.tasks.base import model_family


def cross_entropy(logits: jax.Array, labels: jax.Array, label_smoothing: float = 0.0) -> jax.Array:
  """Per-example softmax cross-entropy [B] of logits [B, K] against labels [B] or [B, K].

  Label smoothing (Szegedy et al. 2016) mixes the target with the uniform
  distribution: `(1 - eps) * onehot + eps / K`.
  """
  logits = logits.astype(jnp.float32)
  num_classes = logits.shape[-1]
  targets = labels if labels.ndim == logits.ndim else jax.nn.one_hot(labels, num_classes)
  targets = (1.0 - label_smoothing) * targets + label_smoothing / num_classes
  return -jnp.sum(targets * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def correct(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-example top-1 hit [B] (float 0/1); soft labels count their argmax."""
  labels = labels if labels.ndim < logits.ndim else jnp.argmax(labels, axis=-1)
  return (jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class Classification:
  """The classification task (see lfpe/tasks/base.py for the interface).

  Training loss: mean cross-entropy with `label_smoothing`; eval loss: plain
  cross-entropy, summed over real examples only. `mixup_alpha`, `cutmix_alpha`, `mix_prob`
  and `switch_prob` mix training batches (lfpe/tasks/mixing.py; 0: off).
  """

  HEADLINE: ClassVar[str] = "accuracy"  # the eval metric a run reports last
  label_smoothing: float = 0.0
  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  mix_prob: float = 1.0
  switch_prob: float = 0.5

  def data_info(self, config: Any) -> tuple[int, tuple[int, int], int]:
    """(num_classes, (H, W) seen by the model, channels) of `config.data`."""
    spec = get_spec(config.data.name)
    size = config.data.image_size or (spec.image_shape[0] if spec.image_shape else None)
    if size is None:
      raise ValueError(f"config.data.image_size must be set: {spec.name} images vary in size.")
    return spec.num_classes, (size, size), spec.image_shape[-1] if spec.image_shape else 3

  def validate(self, config: Any) -> None:
    """The task's fields; the model checks `config.model` itself when it is created."""
    if not 0.0 <= self.label_smoothing < 1.0:
      raise ValueError(
        f"config.task.label_smoothing must be in [0, 1), got {self.label_smoothing!r}."
      )
    for name in ("mixup_alpha", "cutmix_alpha"):
      if getattr(self, name) < 0:
        raise ValueError(f"config.task.{name} must be >= 0 (0: off), got {getattr(self, name)!r}.")
    for name in ("mix_prob", "switch_prob"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f"config.task.{name} must be in [0, 1], got {getattr(self, name)!r}.")
    model_family(config, "classification")
    if config.data.get("naflex") is not None:
      if self.mixup_alpha or self.cutmix_alpha:
        raise ValueError(
          "config.task.mixup_alpha / cutmix_alpha mix whole images, which packed batches "
          "(config.data.naflex) do not hold; set them to 0."
        )
      if config.model.get("coord_augment"):
        raise ValueError(
          "config.model.coord_augment is not applied to packed batches (config.data.naflex);"
          " set it to None."
        )
    _check_packed(config)
    _check_mixed_size_policies(config, self.data_info(config)[1][0])
    for size in config.data.get("train_sizes") or ():  # mixed resolution: each size must fit
      try:
        self._model(config, (size, size))
      except ValueError as e:
        raise ValueError(f"config.data.train_sizes has {size} px: {e}") from None

  def create_model(self, config: Any) -> nn.Module:
    """`Model(num_classes, **config.model)`, computing in config.compute_dtype (one hop)."""
    return self._model(config, self.data_info(config)[1])

  def _model(self, config: Any, image_hw: tuple[int, int]) -> nn.Module:
    num_classes = self.data_info(config)[0]
    model_config = {**config.model.to_dict(), "dtype": config.compute_dtype}
    return model_family(config, "classification")(num_classes, image_size=image_hw, **model_config)

  def example_batch(self, config: Any) -> dict[str, np.ndarray]:
    _, (height, width), channels = self.data_info(config)
    return {
      "image": np.zeros((1, height, width, channels), np.float32),
      "label": np.zeros((1,), np.int32),
    }

  def init_variables(
    self, model: nn.Module, rng: jax.Array, batch: dict[str, Any]
  ) -> dict[str, Any]:
    return model.init({"params": rng, "dropout": rng}, batch["image"], train=False)

  def augment_batch(self, batch: dict[str, jax.Array], rng: jax.Array) -> dict[str, jax.Array]:
    """A training batch with Mixup / CutMix applied: the mixed images, the partners' labels
    (`mix_label`) and the weight λ of the own label (`mix_weight`); the batch itself when
    both are off."""
    if not (self.mixup_alpha or self.cutmix_alpha):
      return batch
    images, lam = mixing.mix(
      batch["image"],
      rng,
      mixup_alpha=self.mixup_alpha,
      cutmix_alpha=self.cutmix_alpha,
      prob=self.mix_prob,
      switch_prob=self.switch_prob,
    )
    return {**batch, "image": images, "mix_label": batch["label"][::-1], "mix_weight": lam}

  def forward(
    self,
    model: nn.Module,
    variables: dict[str, Any],
    batch: dict[str, jax.Array],
    *,
    train: bool,
    rng: jax.Array | None,
  ) -> jax.Array:
    rngs = {"dropout": rng} if train else {}
    return model.apply(variables, batch["image"], train=train, rngs=rngs)

  def loss(
    self, logits: jax.Array, batch: dict[str, jax.Array]
  ) -> tuple[jax.Array, dict[str, jax.Array]]:
    loss = cross_entropy(logits, batch["label"], self.label_smoothing)
    if "mix_weight" in batch:  # Mixup / CutMix: the loss of the mixed target (linear in it)
      partner = cross_entropy(logits, batch["mix_label"], self.label_smoothing)
      loss = batch["mix_weight"] * loss + (1.0 - batch["mix_weight"]) * partner
    return jnp.mean(loss), {"accuracy": jnp.mean(correct(logits, batch["label"]))}

  def eval_sums(self, logits: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
    mask = batch.get("mask", jnp.ones(logits.shape[:1], jnp.float32)).astype(jnp.float32)
    return {
      "loss": jnp.sum(mask * cross_entropy(logits, batch["label"])),
      "correct": jnp.sum(mask * correct(logits, batch["label"])),
      "count": jnp.sum(mask),
    }

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]:
    count = max(float(sums["count"]), 1.0)
    return {
      "loss": float(sums["loss"]) / count,
      "accuracy": float(sums["correct"]) / count,
      "count": float(sums["count"]),
    }


def _encodings(config: Any) -> list[tuple[str, Any, str, Any, str, Any]]:
  """(posemb field, spec, naflex field, naflex, model field, patch) of the training run and of
  each evaluation (`config.evals.NAME`): its encoding, its packing (its own `data.naflex`
  where it sets one, e.g. None to evaluate unpacked), each its own fields over the training
  run's where both are mappings, as lfpe.train.evaluation merges them, and its model's patch."""
  base, trained = config.model.posemb, config.data.get("naflex")
  patch = vit.config_patch(config.model)
  out = [("config.model.posemb", base, "config.data.naflex", trained, "config.model", patch)]
  for name, entry in (config.get("evals") or {}).items():
    model = entry.get("model") or {}
    where, posemb = f"config.evals.{name}", model.get("posemb")
    changed = "patch_size" in model or "variant" in model
    own_patch = vit.config_patch({**_plain(config.model), **_plain(model)}) if changed else patch
    if hasattr(posemb, "items") and hasattr(base, "items"):
      posemb = {**_plain(base), **_plain(posemb)}
    field = "config.model.posemb" if posemb is None else f"{where}.model.posemb"
    data = entry.get("data") or {}
    if "naflex" in data:
      own = data["naflex"]
      if hasattr(own, "items") and hasattr(trained, "items"):
        own = {**_plain(trained), **_plain(own)}
      packing = (f"{where}.data.naflex", own)
    else:
      packing = ("config.data.naflex", trained)
    model_field = f"{where}.model" if changed else "config.model"
    out.append((field, base if posemb is None else posemb, *packing, model_field, own_patch))
  return out


def _check_packed(config: Any) -> None:
  """Where batches are packed (`data.naflex`: training, or an evaluation's own), the patch is
  the model's and the encoding takes packed batches (`encodings.packed_refusal`)."""
  for field, spec, where, naflex, model_field, patch in _encodings(config):
    if naflex is None:
      continue
    packing = data_config.naflex(naflex, where.removeprefix("config."))
    if (packing.patch,) * 2 != patch:
      raise ValueError(
        f"{where}.patch={packing.patch!r} must be the model's square patch side "
        f"({model_field}: {patch!r}, from patch_size or variant): the pipeline cuts the "
        "patches."
      )
    refusal = encodings.packed_refusal(spec)
    if refusal:
      raise ValueError(f"{field}={spec!r} cannot take packed batches ({where}): {refusal}.")


def _check_mixed_size_policies(config: Any, nominal: int) -> None:
  """After training at grids above the model's own (`nominal` px; `data.train_sizes`, or the
  packed grids of `data.naflex`), a RoPE scaling policy in the model or an evaluation must say
  its training length (`trained_grid`): the nominal grid would compress even grids the model
  trained at (`encodings.mixed_size_problem`)."""
  patch = vit.config_patch(config.model)
  trained = _largest_trained_grid(config.data, patch)
  source = "config.data.naflex" if config.data.get("naflex") else "config.data.train_sizes"
  flexi = [vit.config_patch({"patch_size": p}) for p in config.get("train_patch_sizes") or ()]
  if patch is not None and flexi and None not in flexi:  # FlexiViT: grids of smaller patches
    trained = (nominal // min(p[0] for p in flexi), nominal // min(p[1] for p in flexi))
    source = "config.train_patch_sizes"
  if trained is None or (trained[0] <= nominal // patch[0] and trained[1] <= nominal // patch[1]):
    return
  for field, spec in {field: spec for field, spec, *_ in _encodings(config)}.items():
    problem = encodings.mixed_size_problem(spec)
    if problem:
      raise ValueError(
        f"{field}={spec!r}: {problem} ({source} trains grids up to {trained}); add "
        f"trained_grid={trained}, the largest grid trained at, or the nominal grid to keep it."
      )


def _largest_trained_grid(data: Any, patch: tuple[int, int] | None) -> tuple[int, int] | None:
  """The largest (rows, columns) patch grid training sees, per axis: the largest of
  `data.train_sizes`, or of the grids `resolution.pack` gives `data.naflex.sizes`; None for
  one-size training (or no patch to cut by)."""
  if patch is None:
    return None
  naflex, sizes = data.get("naflex"), data.get("train_sizes")
  if naflex is not None:
    try:
      tokens = naflex["max_tokens"]
      grids = [resolution.packed_grid(hw, patch, tokens) for hw in naflex["sizes"]]
      return tuple(map(max, zip(*grids, strict=True))) or None
    except (KeyError, TypeError, ValueError):
      return None  # malformed: `lfpe.data.config` names the field (`check_data`)
  if sizes:
    return (max(sizes) // patch[0], max(sizes) // patch[1])
  return None


def _plain(mapping: Any) -> dict:
  return mapping.to_dict() if hasattr(mapping, "to_dict") else dict(mapping)
