"""DETR set prediction (Carion et al. 2020): boxes, GIoU, Hungarian matching, set loss.

Shapes: Q queries, T (padded) targets per image, K classes plus the no-object class K.
Boxes are `[..., 4]`, `cxcywh` normalised to [0, 1] unless a name says `xyxy`. Targets
come padded to a static T with `target_valid [B, T]` marking the real ones, so every
function here runs under `jax.jit` (and `jax.vmap`) with static shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lfpe.extras import require

EPS = 1e-7  # floor of the denominators of IoU and GIoU: zero-area boxes give 0, not NaN
METHODS = ("auto", "scipy", "optax")


def box_cxcywh_to_xyxy(boxes: jax.Array) -> jax.Array:
  """`[..., 4]` (center x, center y, width, height) -> (x0, y0, x1, y1)."""
  cx, cy, w, h = jnp.moveaxis(boxes, -1, 0)
  return jnp.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], axis=-1)


def box_xyxy_to_cxcywh(boxes: jax.Array) -> jax.Array:
  """`[..., 4]` (x0, y0, x1, y1) -> (center x, center y, width, height)."""
  x0, y0, x1, y1 = jnp.moveaxis(boxes, -1, 0)
  return jnp.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], axis=-1)


def _area(boxes: jax.Array) -> jax.Array:
  """Area `[...]` of xyxy boxes `[..., 4]`; inverted sides count as zero."""
  wh = jnp.maximum(boxes[..., 2:] - boxes[..., :2], 0.0)
  return wh[..., 0] * wh[..., 1]


def _iou_parts(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(IoU, union, enclosing area) of broadcastable xyxy boxes `a`, `b` `[..., 4]`."""
  inter = _area(
    jnp.concatenate([jnp.maximum(a[..., :2], b[..., :2]), jnp.minimum(a[..., 2:], b[..., 2:])], -1)
  )
  union = _area(a) + _area(b) - inter
  hull = _area(
    jnp.concatenate([jnp.minimum(a[..., :2], b[..., :2]), jnp.maximum(a[..., 2:], b[..., 2:])], -1)
  )
  return inter / jnp.maximum(union, EPS), union, hull


def paired_generalized_box_iou(a: jax.Array, b: jax.Array) -> jax.Array:
  """GIoU `[...]` of corresponding (broadcast) xyxy boxes `a`, `b` `[..., 4]`, in [-1, 1].

  GIoU = IoU - (C - U) / C with C the smallest enclosing box and U the union (Rezatofighi
  et al. 2019). Denominators are floored at EPS, so zero-area boxes give finite values.
  """
  iou, union, hull = _iou_parts(a, b)
  return iou - (hull - union) / jnp.maximum(hull, EPS)


def box_iou(boxes1: jax.Array, boxes2: jax.Array) -> jax.Array:
  """Pairwise IoU `[..., N, M]` of xyxy boxes `[..., N, 4]` and `[..., M, 4]`."""
  return _iou_parts(boxes1[..., :, None, :], boxes2[..., None, :, :])[0]


def generalized_box_iou(boxes1: jax.Array, boxes2: jax.Array) -> jax.Array:
  """Pairwise GIoU `[..., N, M]` of xyxy boxes `[..., N, 4]` and `[..., M, 4]` (symmetric)."""
  return paired_generalized_box_iou(boxes1[..., :, None, :], boxes2[..., None, :, :])


def matching_cost(
  logits: jax.Array,
  boxes: jax.Array,
  labels: jax.Array,
  target_boxes: jax.Array,
  *,
  class_weight: float = 1.0,
  bbox_weight: float = 5.0,
  giou_weight: float = 2.0,
) -> jax.Array:
  """DETR's matching cost `[B, Q, T]` of predictions against (padded) targets.

  logits `[B, Q, K+1]` (last = no-object), boxes `[B, Q, 4]`, labels `[B, T]`, target_boxes
  `[B, T, 4]`. Cost = class_weight * (-p(target class)) + bbox_weight * L1(cxcywh)
  + giou_weight * (-GIoU(xyxy)). Out-of-range (padding) labels are clipped: padded
  targets are masked by `hungarian_match`, not here.
  """
  probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)  # [B, Q, K+1]
  index = jnp.clip(labels, 0, probs.shape[-1] - 1)[:, None, :]  # [B, 1, T]
  index = jnp.broadcast_to(index, (*probs.shape[:2], labels.shape[-1]))
  cost_class = -jnp.take_along_axis(probs, index, axis=-1)  # [B, Q, T]
  boxes, target_boxes = boxes.astype(jnp.float32), target_boxes.astype(jnp.float32)
  cost_bbox = jnp.sum(jnp.abs(boxes[:, :, None, :] - target_boxes[:, None, :, :]), axis=-1)
  giou = generalized_box_iou(box_cxcywh_to_xyxy(boxes), box_cxcywh_to_xyxy(target_boxes))
  return class_weight * cost_class + bbox_weight * cost_bbox - giou_weight * giou


def _sanitize(cost: jax.Array, target_valid: jax.Array) -> jax.Array:
  """NaN and ±inf entries -> 1 + the largest finite entry of a real target, per example.

  A non-finite cost comes from a broken prediction; the matching should avoid it, not
  chase it, so -inf is treated like +inf.
  """
  finite = jnp.isfinite(cost)
  usable = finite & target_valid[..., None, :]
  top = jnp.max(cost, axis=(-2, -1), where=usable, initial=-jnp.inf, keepdims=True)
  return jnp.where(finite, cost, jnp.where(jnp.isfinite(top), top, 0.0) + 1.0)


def _scipy_match_host(cost: np.ndarray, valid: np.ndarray) -> np.ndarray:
  """`linear_sum_assignment` per example of `[..., Q, T]` over real targets -> `[..., Q]`."""
  *lead, q, t = cost.shape
  n = int(np.prod(lead))
  cost, valid = np.asarray(cost).reshape(n, q, t), np.asarray(valid).reshape(n, t)
  match = np.full((n, q), -1, np.int32)
  assign = require("scipy.optimize", "detection", "the scipy matcher").linear_sum_assignment
  for b in range(n):
    cols = np.flatnonzero(valid[b])
    rows, picked = assign(cost[b][:, cols])
    match[b, rows] = cols[picked]
  return match.reshape(*lead, q)


def _scipy_match(cost: jax.Array, target_valid: jax.Array) -> jax.Array:
  """`_scipy_match_host` as a callback; under vmap it receives all batch dimensions at once."""
  out = jax.ShapeDtypeStruct(cost.shape[:-1], jnp.int32)
  return jax.pure_callback(_scipy_match_host, out, cost, target_valid, vmap_method="broadcast_all")


def _optax_match_one(cost: jax.Array, valid: jax.Array) -> jax.Array:
  """One image: `[Q, T]` finite costs, `[T]` mask -> `[Q]` target index or -1.

  optax's Hungarian assigns min(Q, T) pairs (it transposes tall matrices itself). Padded
  columns get one constant cost. With Q >= T every column is assigned, so any constant
  leaves the choice among real targets unchanged. With Q < T the constant must lose to
  every real target: lo + Q * (hi - lo + 1) exceeds the cost of any Q real pairs, so a
  solution with one more real pair is always cheaper.
  """
  q, t = cost.shape
  if q == 0 or t == 0:
    return jnp.full((q,), -1, jnp.int32)
  fill = 0.0
  if q < t:
    lo = jnp.min(cost, where=valid[None, :], initial=jnp.inf)
    hi = jnp.max(cost, where=valid[None, :], initial=-jnp.inf)
    fill = jnp.where(jnp.any(valid), lo + q * (hi - lo + 1.0), 0.0)
  rows, cols = optax.assignment.hungarian_algorithm(jnp.where(valid[None, :], cost, fill))
  match = jnp.full((q,), -1, jnp.int32).at[rows].set(cols.astype(jnp.int32))
  return jnp.where(valid[jnp.maximum(match, 0)] & (match >= 0), match, -1)


def resolve_method(method: str, backend: str | None = None) -> str:
  """ "auto" -> "scipy" on a GPU, else "optax"; other methods unchanged.

  Why: optax's solver is a `while_loop` of small steps. On a GPU each iteration waits on
  the host for its predicate, and the loop dominates a DETR-R50 step (H100, 2026-11-27:
  871 ms with optax, 88 ms with scipy, PyTorch DETR 84 ms; benchmarks/README.md). On a
  CPU the in-graph solver ties scipy on a quiet host and wins on a loaded one, and on a
  TPU it avoids a host round trip (gathering every shard's costs to one host).
  """
  if method != "auto":
    return method
  return "scipy" if (backend or jax.default_backend()) == "gpu" else "optax"


def hungarian_match(cost: jax.Array, target_valid: jax.Array, method: str = "scipy") -> jax.Array:
  """Optimal one-to-one matching `[B, Q]` int32: the target of each query, -1 for none.

  cost `[B, Q, T]`, target_valid `[B, T]` bool; min(Q, number of real targets) queries
  get a target. Non-finite costs first become a finite upper bound (see `_sanitize`);
  padded targets never match. `method`: "scipy" runs `linear_sum_assignment` per image on
  the host through `jax.pure_callback` (on a sharded batch XLA gathers the costs to one
  device for it); "optax" runs `optax.assignment.hungarian_algorithm` inside the compiled
  program (float32 potentials); "auto" picks by the backend (`resolve_method`). Both work
  under jit and vmap and reach the optimal total cost (up to float32 rounding for optax).
  """
  if method not in METHODS:
    raise ValueError(f"hungarian_match: method={method!r} is not one of {METHODS}.")
  method = resolve_method(method)
  target_valid = jnp.asarray(target_valid, bool)
  cost = _sanitize(jnp.asarray(cost, jnp.float32), target_valid)
  if method == "scipy":
    return _scipy_match(cost, target_valid)
  return jax.vmap(_optax_match_one)(cost, target_valid)


def set_loss(
  logits: jax.Array,
  boxes: jax.Array,
  labels: jax.Array,
  target_boxes: jax.Array,
  target_valid: jax.Array,
  *,
  eos_coef: float = 0.1,
  class_weight: float = 1.0,
  bbox_weight: float = 5.0,
  giou_weight: float = 2.0,
  method: str = "scipy",
  num_boxes: float | jax.Array | None = None,
  example_valid: jax.Array | None = None,
) -> dict[str, jax.Array]:
  """DETR's SetCriterion for one decoder layer: {'loss', 'loss_ce', 'loss_bbox', 'loss_giou'},
  and 'ce_weight', loss_ce's denominator (the sum of its query weights below), with which an
  evaluation adds up Σ w·ce over batches and divides once (`Detection.eval_sums`).

  logits `[B, Q, K+1]`, boxes `[B, Q, 4]`, labels `[B, T]`, target_boxes `[B, T, 4]`,
  target_valid `[B, T]`. Queries are matched with `hungarian_match` on `matching_cost`
  (same weights) under stop_gradient. loss_ce: cross-entropy with unmatched queries
  labelled no-object (K), a weighted mean over all queries with weight `eos_coef` for
  no-object; loss_bbox (L1) and loss_giou (1 - GIoU) are sums over matched pairs divided
  by `num_boxes`. DETR divides by the number of target boxes on all devices, at least 1;
  the default counts `target_valid`, which under jit on a sharded global batch is already
  that global count. loss = class_weight * ce + bbox_weight * bbox + giou_weight * giou.
  `example_valid` `[B]`: False for a padding example of a partial evaluation batch, whose
  queries then leave loss_ce out (it has no targets, so nothing else of it counts).
  """
  weights = dict(class_weight=class_weight, bbox_weight=bbox_weight, giou_weight=giou_weight)
  cost = matching_cost(*jax.lax.stop_gradient((logits, boxes)), labels, target_boxes, **weights)
  match = jax.lax.stop_gradient(hungarian_match(cost, target_valid, method))  # [B, Q]
  matched = match >= 0
  index = jnp.maximum(match, 0)
  no_object = logits.shape[-1] - 1
  classes = jnp.where(matched, jnp.take_along_axis(labels, index, axis=1), no_object)
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  ce = -jnp.take_along_axis(log_p, classes[..., None], axis=-1)[..., 0]  # [B, Q]
  w = jnp.where(matched, 1.0, eos_coef)
  if example_valid is not None:
    w = w * jnp.asarray(example_valid, w.dtype)[:, None]
  ce_weight = jnp.sum(w)
  loss_ce = jnp.sum(w * ce) / jnp.maximum(ce_weight, 1e-12)

  if num_boxes is None:
    num_boxes = jnp.sum(jnp.asarray(target_valid, jnp.float32))
  num_boxes = jnp.maximum(jnp.asarray(num_boxes, jnp.float32), 1.0)
  boxes = boxes.astype(jnp.float32)
  picked = jnp.take_along_axis(target_boxes.astype(jnp.float32), index[..., None], axis=1)
  l1 = jnp.sum(jnp.abs(boxes - picked), axis=-1)  # [B, Q]
  giou = paired_generalized_box_iou(box_cxcywh_to_xyxy(boxes), box_cxcywh_to_xyxy(picked))
  loss_bbox = jnp.sum(jnp.where(matched, l1, 0.0)) / num_boxes
  loss_giou = jnp.sum(jnp.where(matched, 1.0 - giou, 0.0)) / num_boxes
  loss = class_weight * loss_ce + bbox_weight * loss_bbox + giou_weight * loss_giou
  losses = {"loss": loss, "loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou}
  return {**losses, "ce_weight": ce_weight}


def postprocess(
  logits: jax.Array, boxes: jax.Array, image_sizes: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """DETR's PostProcess: (scores `[B, Q]`, labels `[B, Q]` int32, boxes `[B, Q, 4]`).

  Softmax over K+1 classes, the no-object class dropped, the best remaining class and its
  probability per query; boxes become xyxy pixels of the image_sizes `[B, 2]` (h, w).
  """
  probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)[..., :-1]
  scores, classes = jnp.max(probs, axis=-1), jnp.argmax(probs, axis=-1).astype(jnp.int32)
  h, w = jnp.moveaxis(jnp.asarray(image_sizes, jnp.float32), -1, 0)
  scale = jnp.stack([w, h, w, h], axis=-1)[:, None, :]  # [B, 1, 4]
  return scores, classes, box_cxcywh_to_xyxy(boxes.astype(jnp.float32)) * scale
