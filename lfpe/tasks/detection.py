"""Object detection with DETR-lite: the set loss over every decoder layer, COCO evaluation.

Batches hold `image [B, H, W, 3]` (padded to the largest size), `mask [B, H, W]` (True =
padding, DETR's convention), `boxes [B, T, 4]` (normalised cx, cy, w, h of the unpadded
image), `labels [B, T]`, `target_valid [B, T]`, `image_size [B, 2]` (h, w unpadded) and
`image_id [B]`; eval batches also `valid [B]` marking real examples (the loader pads the
last batch). The model (`config.model_name='detr'`) returns `logits [L, B, Q, K+1]` and
`boxes [L, B, Q, 4]`, one entry per decoder layer.

Training loss (DETR): `set_loss` of every decoder layer, each matched again, summed
(`aux_loss=False`: the last layer only); losses are normalised by the number of target
boxes in the global batch (the batch is one global array under jit, so the plain sum is
already the count across all devices). A model with `query_groups=G > 1` (Group DETR)
returns G groups of queries in training: `forward` moves them to the batch axis
(`split_groups`), so each group is matched one-to-one to its image's targets on its own,
and the loss is the mean over groups (targets counted G times, as Group DETR's code).
Evaluation: COCO AP of the last layer's scored boxes in pixels (`lfpe.tasks.coco_eval`),
with COCO's small / medium / large area ranges scaled from 640-pixel images to each image's
own longer side. A target's area is its box's (COCO's official evaluation reads the
segmentation's, usually smaller), so AP_small / medium / large are not comparable with
published COCO figures; AP, AP50 and AP75 do not read areas. The eval losses are the last
layer's over the whole split, normalised as DETR normalises one batch (box terms by the
split's boxes, loss_ce by its query weights), so they do not depend on how it is batched.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe.data import detection_info
from lfpe.extras import require_extra
from lfpe.tasks.base import model_family
from lfpe.tasks.detection_ops import (
  METHODS,
  box_cxcywh_to_xyxy,
  box_iou,
  generalized_box_iou,
  hungarian_match,
  matching_cost,
  postprocess,
  set_loss,
)

LOSS_KEYS = ("loss_ce", "loss_bbox", "loss_giou")
TARGETS = ("labels", "boxes", "target_valid")


def split_groups(outputs: dict[str, jax.Array], groups: int) -> dict[str, jax.Array]:
  """`[L, B, G·Q, ...]` -> `[L, G·B, Q, ...]`, group-major: row g·B + b is group g of image b."""
  if groups == 1:
    return outputs

  def split(x):
    layers, batch, queries, *rest = x.shape
    x = x.reshape(layers, batch, groups, queries // groups, *rest)
    return jnp.swapaxes(x, 1, 2).reshape(layers, groups * batch, queries // groups, *rest)

  return {k: split(v) for k, v in outputs.items()}


@dataclasses.dataclass(frozen=True)
class Detection:
  """The detection task (see lfpe/tasks/base.py for the interface)."""

  HEADLINE: ClassVar[str] = "AP"
  eos_coef: float = 0.1
  class_weight: float = 1.0
  bbox_weight: float = 5.0
  giou_weight: float = 2.0
  matcher: str = "scipy"
  aux_loss: bool = True

  def data_info(self, config: Any) -> tuple[int, tuple[int, int], int]:
    """(num_classes, padded (H, W), max targets T) of `config.data`."""
    return detection_info(config.data)

  def validate(self, config: Any) -> None:
    """The task's fields, and pycocotools (its evaluation's, needed at the first evaluation:
    missing, it is said now, not after training); the model checks `config.model` when it is
    created."""
    require_extra("detection", "COCO evaluation")
    for name in ("eos_coef", "class_weight", "bbox_weight", "giou_weight"):
      value = getattr(self, name)
      if not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"config.task.{name} must be a number >= 0, got {value!r}.")
    if self.matcher not in METHODS:  # auto: scipy on a GPU, else optax
      raise ValueError(f"config.task.matcher={self.matcher!r} is unknown; use one of {METHODS}.")
    model_family(config, "detection")

  def create_model(self, config: Any) -> nn.Module:
    """`Model(num_classes, **config.model)`, computing in config.compute_dtype (one hop)."""
    num_classes, size, _ = self.data_info(config)
    model_config = {**config.model.to_dict(), "dtype": config.compute_dtype}
    return model_family(config, "detection")(num_classes, image_size=size, **model_config)

  def example_batch(self, config: Any) -> dict[str, np.ndarray]:
    _, (h, w), t = self.data_info(config)
    return {
      "image": np.zeros((1, h, w, 3), np.float32),
      "mask": np.zeros((1, h, w), np.bool_),
      "boxes": np.full((1, t, 4), 0.5, np.float32),
      "labels": np.zeros((1, t), np.int32),
      "target_valid": np.zeros((1, t), np.bool_),
      "target_crowd": np.zeros((1, t), np.bool_),
      "image_size": np.array([[h, w]], np.int32),
      "image_id": np.zeros((1,), np.int32),
    }

  def init_variables(self, model: nn.Module, rng: jax.Array, batch: dict[str, Any]) -> Any:
    return model.init({"params": rng, "dropout": rng}, batch["image"], batch["mask"], train=False)

  def forward(self, model, variables, batch, *, train: bool, rng: jax.Array | None) -> Any:
    """The model's outputs; in training, query groups moved to the batch axis (G·B)."""
    rngs = {"dropout": rng} if train else {}
    outputs = model.apply(variables, batch["image"], batch["mask"], train=train, rngs=rngs)
    return split_groups(outputs, model.query_groups) if train else outputs

  def layer_losses(self, outputs: dict[str, jax.Array], batch: dict[str, jax.Array]) -> dict:
    """`set_loss` of each decoder layer (the last one only without `aux_loss`): `[L]` per key.

    Vmapped over the layers, so every layer is matched in one call: with the scipy matcher
    one host callback per step instead of one per layer (on a GPU each is a round trip).
    """
    logits, boxes = outputs["logits"], outputs["boxes"]
    if not self.aux_loss:
      logits, boxes = logits[-1:], boxes[-1:]
    groups = logits.shape[1] // batch["labels"].shape[0]  # G·B rows: `split_groups`
    targets = {k: jnp.tile(batch[k], (groups,) + (1,) * (batch[k].ndim - 1)) for k in TARGETS}
    num_boxes = jnp.maximum(jnp.sum(targets["target_valid"]), 1)
    valid = batch.get("valid")  # padding examples of a partial eval batch: out of loss_ce
    valid = None if valid is None else jnp.tile(valid, (groups,))
    weights = dict(
      eos_coef=self.eos_coef,
      class_weight=self.class_weight,
      bbox_weight=self.bbox_weight,
      giou_weight=self.giou_weight,
      method=self.matcher,
      num_boxes=num_boxes,
    )
    one_layer = lambda lg, bx: set_loss(
      lg.astype(jnp.float32),
      bx.astype(jnp.float32),
      targets["labels"],
      targets["boxes"],
      targets["target_valid"],
      example_valid=valid,
      **weights,
    )
    return jax.vmap(one_layer)(logits, boxes)

  def loss(self, outputs, batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    losses = self.layer_losses(outputs, batch)
    return jnp.sum(losses["loss"]), {k: losses[k][-1] for k in LOSS_KEYS}

  def eval_sums(self, outputs, batch) -> dict[str, jax.Array]:
    """The last layer's loss numerators and denominators, added up over batches (`finalize`
    divides once: the loss of the whole split, as one batch of it would give, whatever the
    batches' box counts), and its detections (per example, for COCO evaluation)."""
    valid = batch.get("valid", jnp.ones(batch["image"].shape[:1], jnp.bool_))
    last = {"logits": outputs["logits"][-1:], "boxes": outputs["boxes"][-1:]}
    losses = {k: v[-1] for k, v in self.layer_losses(last, batch).items()}
    num_boxes = jnp.sum(batch["target_valid"])  # the box terms' divisor, max(num_boxes, 1)
    box_sum = lambda key: losses[key] * jnp.maximum(num_boxes, 1)  # 0 when there are none
    scores, labels, boxes = postprocess(
      outputs["logits"][-1].astype(jnp.float32),
      outputs["boxes"][-1].astype(jnp.float32),
      batch["image_size"],
    )
    return {
      "loss_ce": losses["loss_ce"] * losses["ce_weight"],
      "ce_weight": losses["ce_weight"],
      "loss_bbox": box_sum("loss_bbox"),
      "loss_giou": box_sum("loss_giou"),
      "num_boxes": num_boxes,
      "count": jnp.sum(valid),
      "valid": valid,
      "scores": scores,
      "pred_labels": labels,
      "pred_boxes": boxes,
      "boxes": batch["boxes"],
      "labels": batch["labels"],
      "target_valid": batch["target_valid"],
      "target_crowd": batch.get("target_crowd", jnp.zeros_like(batch["target_valid"])),
      "image_size": batch["image_size"],
    }

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]:
    """The split's losses (DETR's normalisation over all its images at once) and COCO AP of
    the real (non-padding) examples."""
    keep = np.asarray(sums["valid"], bool)
    pick = lambda k: np.asarray(sums[k])[keep]
    divisor = {
      "loss_ce": max(float(sums["ce_weight"]), 1e-12),
      "loss_bbox": max(float(sums["num_boxes"]), 1.0),
      "loss_giou": max(float(sums["num_boxes"]), 1.0),
    }
    size = pick("image_size")
    targets_xyxy = np.asarray(box_cxcywh_to_xyxy(jnp.asarray(pick("boxes"))))
    scale = np.concatenate([size[:, ::-1], size[:, ::-1]], axis=-1)[:, None, :]  # (w, h, w, h)
    require_extra("detection", "COCO evaluation")
    from lfpe.tasks import coco_eval  # noqa: PLC0415 (pycocotools: lfpe[detection])

    metrics = coco_eval.coco_evaluate(
      pick("scores"),
      pick("pred_labels"),
      pick("pred_boxes"),
      pick("labels"),
      targets_xyxy * scale,
      pick("target_valid"),
      target_crowd=pick("target_crowd"),
      image_size=size.max(axis=1).astype(float),  # each image bucketed at its own size
    )
    losses = {k: float(sums[k]) / divisor[k] for k in LOSS_KEYS}
    return {**losses, **metrics, "count": max(float(sums["count"]), 1.0)}


__all__ = [
  "Detection",
  "box_cxcywh_to_xyxy",
  "box_iou",
  "generalized_box_iou",
  "hungarian_match",
  "matching_cost",
  "postprocess",
  "set_loss",
]
