"""Image regression: mean squared error, R² (003 Eq. 5) averaged over the targets.

Batches hold 'image' [B, H, W, C] float and the targets `batch[target]` [B, T] float (e.g.
red-green `distance`, the (dx, dy) offset); eval batches also 'mask' [B]. The model is a
classification-family model (a ViT) with T outputs. Targets are standardised as
`(y - target_mean) / target_std` before the loss, which leaves R² unchanged and keeps the
loss at the scale the optimizer's learning rate expects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from lfpe.tasks.classification import Classification


@dataclasses.dataclass(frozen=True)
class Regression(Classification):
  """The regression task; model, data and forward pass as classification's."""

  HEADLINE: ClassVar[str] = "r2"
  target: str = "distance"
  num_outputs: int = 2
  target_mean: Sequence[float] | float = 0.0
  target_std: Sequence[float] | float = 1.0

  def validate(self, config: Any) -> None:
    if self.num_outputs < 1:
      raise ValueError(f"config.task.num_outputs must be positive, got {self.num_outputs!r}.")
    if np.any(np.asarray(self.target_std, np.float64) <= 0):
      raise ValueError(f"config.task.target_std must be positive, got {self.target_std!r}.")
    if self.mixup_alpha or self.cutmix_alpha:
      raise ValueError(
        "config.task.mixup_alpha / cutmix_alpha mix class labels; regression has none."
      )
    super().validate(config)

  def data_info(self, config: Any) -> tuple[int, tuple[int, int], int]:
    """(outputs, (H, W), channels): classification's, with `num_outputs` outputs."""
    _, image_hw, channels = super().data_info(config)
    return self.num_outputs, image_hw, channels

  def example_batch(self, config: Any) -> dict[str, np.ndarray]:
    _, (height, width), channels = self.data_info(config)
    return {
      "image": np.zeros((1, height, width, channels), np.float32),
      self.target: np.zeros((1, self.num_outputs), np.float32),
    }

  def standardised(self, batch: dict[str, jax.Array]) -> jax.Array:
    mean = jnp.asarray(self.target_mean, jnp.float32)
    return (batch[self.target].astype(jnp.float32) - mean) / jnp.asarray(self.target_std)

  def loss(
    self, outputs: jax.Array, batch: dict[str, jax.Array]
  ) -> tuple[jax.Array, dict[str, jax.Array]]:
    return jnp.mean(jnp.square(outputs.astype(jnp.float32) - self.standardised(batch))), {}

  def eval_sums(self, outputs: jax.Array, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Per target t, scalar sums of squared errors, targets and squared targets (`sse{t}`,
    `y{t}`, `yy{t}`): the trainer adds scalars up over batches, and R² needs these sums."""
    mask = batch.get("mask", jnp.ones(outputs.shape[:1], jnp.float32)).astype(jnp.float32)
    y = self.standardised(batch)
    error = jnp.square(outputs.astype(jnp.float32) - y)
    sums = {"count": jnp.sum(mask)}
    for t in range(self.num_outputs):
      sums[f"sse{t}"] = jnp.sum(mask * error[:, t])
      sums[f"y{t}"] = jnp.sum(mask * y[:, t])
      sums[f"yy{t}"] = jnp.sum(mask * y[:, t] ** 2)
    return sums

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]:
    """Mean squared error and R² = 1 - SSE / SST per target, averaged over targets."""
    count = max(float(sums["count"]), 1.0)
    take = lambda name: np.array([float(sums[f"{name}{t}"]) for t in range(self.num_outputs)])
    sse, sst = take("sse"), take("yy") - np.square(take("y")) / count
    return {
      "loss": float(sse.sum() / (count * self.num_outputs)),
      "r2": float(np.mean(1.0 - sse / sst)),
      "count": float(sums["count"]),
    }
