"""DETR set prediction: box ops, GIoU, Hungarian matching (both methods), set loss."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from lfpe.tasks.detection_ops import (
  box_cxcywh_to_xyxy,
  box_iou,
  box_xyxy_to_cxcywh,
  generalized_box_iou,
  hungarian_match,
  matching_cost,
  postprocess,
  resolve_method,
  set_loss,
)

METHODS = ("scipy", "optax")
giou_fn, iou_fn = jax.jit(generalized_box_iou), jax.jit(box_iou)  # eager op-by-op is slow


def test_box_conversions_round_trip():
  cxcywh = np.array([[0.5, 0.5, 0.2, 0.4], [0.1, 0.9, 0.0, 0.2]], np.float32)
  xyxy = box_cxcywh_to_xyxy(jnp.asarray(cxcywh))
  np.testing.assert_allclose(xyxy[0], [0.4, 0.3, 0.6, 0.7], atol=1e-7)
  np.testing.assert_allclose(box_xyxy_to_cxcywh(xyxy), cxcywh, atol=1e-7)


@pytest.mark.parametrize(
  "a, b, iou, giou",
  [
    ([0, 0, 2, 2], [0, 0, 2, 2], 1.0, 1.0),  # identical
    ([0, 0, 1, 1], [2, 2, 3, 3], 0.0, -7 / 9),  # disjoint: hull 9, union 2
    ([0, 0, 4, 4], [1, 1, 2, 2], 1 / 16, 1 / 16),  # nested: hull = union
    ([0, 0, 2, 2], [1, 1, 3, 3], 1 / 7, 1 / 7 - 2 / 9),  # overlap 1, union 7, hull 9
    ([0, 0, 1, 1], [1, 0, 2, 1], 0.0, 0.0),  # touching: hull = union
  ],
)
def test_giou_hand_values_and_symmetry(a, b, iou, giou):
  a, b = jnp.array([a], jnp.float32), jnp.array([b], jnp.float32)
  assert float(iou_fn(a, b)[0, 0]) == pytest.approx(iou, abs=1e-6)
  assert float(giou_fn(a, b)[0, 0]) == pytest.approx(giou, abs=1e-6)
  assert float(giou_fn(b, a)[0, 0]) == pytest.approx(giou, abs=1e-6)


def test_giou_pairwise_shape_symmetry_range_and_degenerate_boxes():
  rng = np.random.default_rng(0)
  b1 = box_cxcywh_to_xyxy(jnp.asarray(rng.uniform(0, 1, (5, 4)), jnp.float32))
  b2 = box_cxcywh_to_xyxy(jnp.asarray(rng.uniform(0, 1, (3, 4)), jnp.float32))
  g = giou_fn(b1, b2)
  assert g.shape == (5, 3)
  np.testing.assert_allclose(g, giou_fn(b2, b1).T, atol=1e-6)
  assert np.all((g >= -1) & (g <= 1))
  point = jnp.array([[0.5, 0.5, 0.5, 0.5]])  # zero area: finite, no NaN, also in gradients
  assert float(giou_fn(point, point)[0, 0]) == 0.0
  grad = jax.jit(jax.grad(lambda x: giou_fn(x, point).sum()))(point)
  assert np.all(np.isfinite(grad)) and np.all(np.isfinite(iou_fn(point, b1)))


# --- Hungarian matching -----------------------------------------------------------------


def _reference_cost(cost, valid):
  """The rule the matcher documents: non-finite -> 1 + max finite real entry (else 1)."""
  finite = np.isfinite(cost)
  usable = cost[finite & valid[None, :]]
  top = usable.max() if usable.size else 0.0
  return np.where(finite, cost, top + 1.0)


def _random_problem(rng, q, t):
  """One cost [Q, T] and mask [T]: floats, integer ties, NaN / ±inf entries, padding."""
  kind = rng.integers(4)
  if kind == 0:
    cost = rng.normal(size=(q, t)) * 3
  elif kind == 1:
    cost = rng.integers(0, 3, size=(q, t)).astype(float)  # many ties
  else:
    cost = rng.uniform(-2, 2, size=(q, t))
  if kind >= 2:
    bad = rng.uniform(size=(q, t)) < 0.2
    cost[bad] = rng.choice([np.nan, np.inf, -np.inf], size=bad.sum())
  valid = rng.uniform(size=t) < rng.uniform(0.2, 1.0)
  return cost.astype(np.float32), valid


@functools.lru_cache
def _jitted(method):
  return jax.jit(functools.partial(hungarian_match, method=method))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("q, t", [(7, 3), (3, 7), (5, 5), (10, 8), (1, 4), (4, 1), (6, 0)])
def test_hungarian_reaches_scipy_optimum(method, q, t):
  rng = np.random.default_rng(q * 100 + t)
  problems = [_random_problem(rng, q, t) for _ in range(48)]
  cost = np.stack([c for c, _ in problems])
  valid = np.stack([v for _, v in problems]).reshape(len(problems), t)
  match = np.asarray(_jitted(method)(cost, valid))
  assert match.shape == (len(problems), q) and match.dtype == np.int32
  for c, v, m in zip(cost, valid, match, strict=True):
    c = _reference_cost(c.astype(np.float64), v)
    cols = np.flatnonzero(v)
    rows, picked = linear_sum_assignment(c[:, cols])
    best = c[rows, cols[picked]].sum()
    got = m[m >= 0]
    assert np.all(v[got]), "a padded target was matched"
    assert len(set(got.tolist())) == len(got), "a target was matched twice"
    assert len(got) == min(q, len(cols))  # every real target matched when Q >= T_valid
    total = c[np.flatnonzero(m >= 0), got].sum()
    assert total == pytest.approx(best, rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("method", METHODS)
def test_hungarian_under_vmap_and_all_padding(method):
  rng = np.random.default_rng(1)
  cost = rng.normal(size=(3, 2, 6, 4)).astype(np.float32)
  valid = rng.uniform(size=(3, 2, 4)) < 0.6
  valid[0, 0] = False
  batched = jax.jit(jax.vmap(functools.partial(hungarian_match, method=method)))(cost, valid)
  for i in range(3):
    np.testing.assert_array_equal(batched[i], hungarian_match(cost[i], valid[i], "scipy"))
  assert np.all(np.asarray(batched[0, 0]) == -1)


@pytest.mark.parametrize(
  "backend, method", [("gpu", "scipy"), ("cpu", "optax"), ("tpu", "optax"), (None, "optax")]
)
def test_auto_method_is_scipy_on_a_gpu_only(backend, method):
  """`auto`: the host solver on a GPU (the in-graph loop syncs per iteration there), else
  optax; on this CPU the compiled program has optax's while loop and no host callback."""
  assert resolve_method("auto", backend) == method
  assert resolve_method("scipy", "tpu") == "scipy" and resolve_method("optax", "gpu") == "optax"
  cost, valid = jnp.zeros((2, 4, 3)), jnp.ones((2, 3), bool)
  jaxpr = str(jax.make_jaxpr(functools.partial(hungarian_match, method="auto"))(cost, valid))
  assert "while" in jaxpr and "pure_callback" not in jaxpr


def test_hungarian_rejects_unknown_method():
  with pytest.raises(ValueError, match="method"):
    hungarian_match(jnp.zeros((1, 2, 2)), jnp.ones((1, 2), bool), method="greedy")


# --- Set loss ---------------------------------------------------------------------------


def _problem(seed, b=2, q=6, t=4, k=3):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(b, q, k + 1)).astype(np.float32)
  boxes = rng.uniform(0.2, 0.8, (b, q, 4)).astype(np.float32) * [1, 1, 0.4, 0.4]
  labels = rng.integers(0, k, (b, t)).astype(np.int32)
  target_boxes = rng.uniform(0.2, 0.8, (b, t, 4)).astype(np.float32) * [1, 1, 0.4, 0.4]
  valid = np.ones((b, t), bool)
  valid[0, t - 2 :] = False  # image 0 has two padded targets
  labels[~valid] = -1
  return logits, boxes.astype(np.float32), labels, target_boxes.astype(np.float32), valid


def _np_giou(a, b):
  """GIoU of corresponding cxcywh boxes in float64 (DETR's formula, no eps)."""
  a = np.concatenate([a[..., :2] - a[..., 2:] / 2, a[..., :2] + a[..., 2:] / 2], -1)
  b = np.concatenate([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], -1)
  area = lambda x: np.prod(np.clip(x[..., 2:] - x[..., :2], 0, None), -1)
  inter = area(
    np.concatenate([np.maximum(a[..., :2], b[..., :2]), np.minimum(a[..., 2:], b[..., 2:])], -1)
  )
  hull = area(
    np.concatenate([np.minimum(a[..., :2], b[..., :2]), np.maximum(a[..., 2:], b[..., 2:])], -1)
  )
  union = area(a) + area(b) - inter
  return inter / union - (hull - union) / hull


def _np_set_loss(logits, boxes, labels, target_boxes, valid, eos=0.1, wc=1.0, wb=5.0, wg=2.0):
  """DETR's HungarianMatcher + SetCriterion (loss_labels, loss_boxes) in float64 numpy."""
  b, q, k1 = logits.shape
  z = logits.astype(np.float64)
  log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
  classes, l1, giou = np.full((b, q), k1 - 1), 0.0, 0.0
  for i in range(b):
    cols = np.flatnonzero(valid[i])
    tb = target_boxes[i, cols].astype(np.float64)
    cost = (
      -wc * np.exp(log_p[i][:, labels[i, cols]])
      + wb * np.abs(boxes[i][:, None] - tb[None]).sum(-1)
      - wg * _np_giou(boxes[i][:, None].astype(np.float64), tb[None])
    )
    rows, picked = linear_sum_assignment(cost)
    classes[i, rows] = labels[i, cols[picked]]
    l1 += np.abs(boxes[i, rows] - tb[picked]).sum()
    giou += (1 - _np_giou(boxes[i, rows].astype(np.float64), tb[picked])).sum()
  w = np.where(classes == k1 - 1, eos, 1.0)
  ce = -np.take_along_axis(log_p, classes[..., None], -1)[..., 0]
  n = max(valid.sum(), 1)
  out = {"loss_ce": (w * ce).sum() / w.sum(), "loss_bbox": l1 / n, "loss_giou": giou / n}
  out["loss"] = wc * out["loss_ce"] + wb * out["loss_bbox"] + wg * out["loss_giou"]
  return out


@functools.lru_cache
def _jitted_loss(method):
  return jax.jit(functools.partial(set_loss, method=method))


@pytest.mark.parametrize("method", METHODS)
def test_set_loss_matches_numpy_detr(method):
  args = _problem(0)
  got = _jitted_loss(method)(*args)
  want = _np_set_loss(*args)
  for name, value in want.items():
    assert float(got[name]) == pytest.approx(value, rel=1e-5), name


def test_set_loss_invariant_to_query_and_target_permutations():
  logits, boxes, labels, target_boxes, valid = _problem(1)
  base = set_loss(logits, boxes, labels, target_boxes, valid)
  perm_q = np.random.default_rng(2).permutation(logits.shape[1])
  perm_t = np.array([2, 0, 3, 1])  # mixes image 0's padded targets among the real ones
  variants = [
    (logits[:, perm_q], boxes[:, perm_q], labels, target_boxes, valid),
    (logits, boxes, labels[:, perm_t], target_boxes[:, perm_t], valid[:, perm_t]),
  ]
  for variant in variants:
    for method in METHODS:
      got = _jitted_loss(method)(*variant)
      for name in base:
        assert float(got[name]) == pytest.approx(float(base[name]), rel=1e-5), name


def test_set_loss_perfect_predictions_and_no_targets():
  logits, boxes, labels, target_boxes, valid = _problem(3)
  boxes[:, : target_boxes.shape[1]] = target_boxes  # the first T queries hit the targets
  out = set_loss(logits, boxes, labels, target_boxes, valid)
  assert float(out["loss_bbox"]) < 1e-6 and float(out["loss_giou"]) < 1e-6
  empty = set_loss(logits, boxes, labels, target_boxes, np.zeros_like(valid))
  assert float(empty["loss_bbox"]) == 0.0 and float(empty["loss_giou"]) == 0.0
  ce_no_object = -jax.nn.log_softmax(jnp.asarray(logits))[..., -1].mean()
  assert float(empty["loss_ce"]) == pytest.approx(float(ce_no_object), rel=1e-6)


def test_set_loss_num_boxes_divides_box_terms():
  args = _problem(4)
  base = set_loss(*args)
  scaled = set_loss(*args, num_boxes=3 * args[4].sum())
  assert float(scaled["loss_bbox"]) == pytest.approx(float(base["loss_bbox"]) / 3, rel=1e-6)
  assert float(scaled["loss_ce"]) == float(base["loss_ce"])


def test_padding_examples_leave_every_loss_as_without_them():
  """A partial eval batch's padding examples (no targets) add no-object queries to loss_ce
  unless `example_valid` leaves them out: then every term is the real examples' alone."""
  logits, boxes, labels, target_boxes, valid = _problem(5, b=3)
  labels[2], valid[2] = -1, False  # example 2: padding, no targets
  real = set_loss(logits[:2], boxes[:2], labels[:2], target_boxes[:2], valid[:2])
  padded = set_loss(logits, boxes, labels, target_boxes, valid, example_valid=np.array([1, 1, 0]))
  for name in ("loss", "loss_ce", "loss_bbox", "loss_giou"):
    assert float(padded[name]) == pytest.approx(float(real[name]), rel=1e-6), name
  counted = set_loss(logits, boxes, labels, target_boxes, valid)
  assert float(counted["loss_ce"]) != pytest.approx(float(real["loss_ce"]), rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_set_loss_on_a_sharded_batch_uses_the_global_box_count(method):
  devices = jax.devices()[:4]
  if len(devices) < 4:
    pytest.skip("needs 4 devices (tests/conftest.py fakes 8 CPU devices)")
  axis_types = (jax.sharding.AxisType.Auto,)  # as lfpe.train.sharding.make_mesh
  mesh = jax.make_mesh((4,), ("data",), axis_types=axis_types, devices=devices)
  spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  args = _problem(7, b=4)
  sharded = _jitted_loss(method)(*(jax.device_put(a, spec) for a in args))
  for name, value in _np_set_loss(*args).items():
    assert float(sharded[name]) == pytest.approx(value, rel=1e-5), name


@pytest.mark.parametrize("method", METHODS)
def test_set_loss_gradients_finite_under_jit(method):
  logits, boxes, labels, target_boxes, valid = _problem(5)
  loss_fn = lambda lg, bx: set_loss(lg, bx, labels, target_boxes, valid, method=method)["loss"]
  g_logits, g_boxes = jax.jit(jax.grad(loss_fn, argnums=(0, 1)))(logits, boxes)
  assert np.all(np.isfinite(g_logits)) and np.all(np.isfinite(g_boxes))
  assert np.any(g_boxes != 0)


def test_matching_cost_weights():
  logits, boxes, labels, target_boxes, _ = _problem(6)
  full = matching_cost(logits, boxes, labels, target_boxes)
  parts = [
    matching_cost(logits, boxes, labels, target_boxes, class_weight=c, bbox_weight=b, giou_weight=g)
    for c, b, g in [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
  ]
  np.testing.assert_allclose(full, parts[0] + 5 * parts[1] + 2 * parts[2], rtol=1e-5, atol=1e-6)
  probs = jax.nn.softmax(jnp.asarray(logits))
  np.testing.assert_allclose(parts[0][1, :, 0], -probs[1, :, labels[1, 0]], rtol=1e-6)


def test_postprocess_scores_labels_and_pixel_boxes():
  logits = jnp.log(jnp.array([[[0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]]))  # K = 2
  boxes = jnp.array([[[0.5, 0.5, 0.2, 0.4], [0.25, 0.25, 0.5, 0.5]]])
  scores, labels, xyxy = postprocess(logits, boxes, jnp.array([[100, 200]]))  # h=100, w=200
  np.testing.assert_allclose(scores, [[0.7, 0.1]], rtol=1e-6)
  np.testing.assert_array_equal(labels, [[1, 0]])
  np.testing.assert_allclose(xyxy[0, 0], [80, 30, 120, 70], rtol=1e-6)
  np.testing.assert_allclose(xyxy[0, 1], [0, 0, 100, 50], atol=1e-5)
