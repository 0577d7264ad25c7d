"""The detection task end to end: a DETR-lite overfits one batch (AP >= 0.95, AP50 1.0)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lfpe.models import detr
from lfpe.tasks import coco_eval
from lfpe.tasks.detection import Detection, box_cxcywh_to_xyxy, postprocess, split_groups

SIZE, CLASSES, T = 32, 3, 4


def _batch():
  """Two 32x32 images with 2 and 3 coloured rectangles, as the detection loader yields."""
  boxes = np.array(
    [
      [[0.25, 0.25, 0.3, 0.3], [0.7, 0.65, 0.35, 0.4], [0, 0, 0, 0], [0, 0, 0, 0]],
      [[0.3, 0.7, 0.4, 0.3], [0.75, 0.3, 0.3, 0.4], [0.5, 0.5, 0.2, 0.2], [0, 0, 0, 0]],
    ],
    np.float32,
  )
  labels = np.array([[0, 1, 0, 0], [2, 1, 0, 0]], np.int32)
  valid = np.array([[1, 1, 0, 0], [1, 1, 1, 0]], bool)
  images = np.zeros((2, SIZE, SIZE, 3), np.float32)
  for b, t in zip(*np.nonzero(valid), strict=True):
    x0, y0, x1, y1 = (np.asarray(box_cxcywh_to_xyxy(boxes[b, t])) * SIZE).round().astype(int)
    images[b, y0:y1, x0:x1, labels[b, t]] = 1.0
  return {
    "image": images,
    "mask": np.zeros((2, SIZE, SIZE), bool),
    "boxes": boxes,
    "labels": labels,
    "target_valid": valid,
    "image_size": np.full((2, 2), SIZE, np.int32),
  }


@pytest.mark.slow
def test_detr_lite_overfits_one_batch_to_ap_1():
  task = Detection()
  model = detr.Model(CLASSES, variant="tiny", image_size=SIZE, posemb="fourier", dropout=0.0)
  model = model.clone(attention_dropout=0.0, num_queries=10)
  batch = jax.tree.map(jnp.asarray, _batch())
  variables = task.init_variables(model, jax.random.key(0), batch)
  tx = optax.adamw(1e-3, weight_decay=1e-4)
  params, opt_state = variables["params"], tx.init(variables["params"])
  constants = {k: v for k, v in variables.items() if k != "params"}

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state):
    def loss_fn(p):
      outputs = task.forward(model, {"params": p, **constants}, batch, train=False, rng=None)
      return task.loss(outputs, batch)[0]

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  # The last box's last pixel depends on the CPU's rounding: 1,500 steps end at AP 1.0 on one
  # AMD EPYC and 0.967 on another (2026-11-27, also at the commit before this session's), so
  # the test asks for a fitted batch (AP >= 0.95 and AP50 = 1), not for the exact 1.0.
  for _ in range(1500):
    params, opt_state, loss = step(params, opt_state)
  outputs = task.forward(model, {"params": params, **constants}, batch, train=False, rng=None)
  scores, labels, boxes = postprocess(
    outputs["logits"][-1], outputs["boxes"][-1], batch["image_size"]
  )
  gt = np.asarray(box_cxcywh_to_xyxy(batch["boxes"])) * SIZE
  metrics = coco_eval.coco_evaluate(
    np.asarray(scores),
    np.asarray(labels),
    np.asarray(boxes),
    _batch()["labels"],
    gt,
    _batch()["target_valid"],
    image_size=SIZE,
  )
  fitted = metrics["AP"] >= 0.95 and metrics["AP50"] == pytest.approx(1.0, abs=1e-6)
  assert float(loss) < 1.0 and fitted, (loss, metrics)
  # Distinct queries predict distinct boxes: no two confident predictions coincide.
  confident = np.asarray(boxes)[0][np.asarray(scores)[0] > 0.5]
  distance = np.abs(confident[:, None] - confident[None]).sum(-1) + np.eye(len(confident)) * 99
  assert len(confident) >= 2 and distance.min() > 1.0


def test_split_groups_is_group_major():
  """[L, B, G·Q, ...] -> [L, G·B, Q, ...]: row g·B + b holds queries g·Q.. of image b."""
  layers, b, groups, q = 2, 3, 4, 5
  x = jnp.arange(layers * b * groups * q * 4.0).reshape(layers, b, groups * q, 4)
  out = split_groups({"boxes": x}, groups)["boxes"]
  assert out.shape == (layers, groups * b, q, 4)
  for g in range(groups):
    np.testing.assert_array_equal(out[:, g * b : (g + 1) * b], x[:, :, g * q : (g + 1) * q])
  assert split_groups({"boxes": x}, 1)["boxes"] is x


def _outputs(*, layers, seed):
  """Random decoder outputs for `_batch`'s 2 images: `layers` layers of 6 queries."""
  rng = np.random.default_rng(seed)
  return {
    "logits": jnp.asarray(rng.normal(size=(layers, 2, 6, CLASSES + 1)), jnp.float32),
    "boxes": jnp.asarray(rng.uniform(0.2, 0.8, size=(layers, 2, 6, 4)), jnp.float32),
  }


def test_group_loss_is_the_mean_over_groups_each_matched_to_its_image():
  """G identical groups give the one-group loss (mean over groups, targets counted G times);
  a group with other predictions changes the loss by its own share only."""
  task = Detection(matcher="optax")
  batch = jax.tree.map(jnp.asarray, _batch())
  one = _outputs(layers=2, seed=0)
  other = jax.tree.map(lambda x: x[:, ::-1], one)  # the images swapped: a different group
  grouped = lambda *groups: {k: jnp.concatenate([g[k] for g in groups], axis=1) for k in one}
  loss = lambda outputs: float(task.loss(outputs, batch)[0])
  assert loss(grouped(one, one, one)) == pytest.approx(loss(one), rel=1e-5)
  expected = (2 * loss(one) + loss(other)) / 3
  assert loss(grouped(one, other, one)) == pytest.approx(expected, rel=1e-5)


def test_the_eval_loss_is_the_whole_splits_whatever_its_batches():
  """Batches of one image (2 and 3 boxes; the second padded, as the loader pads a last
  batch, with a zero example marked invalid) add up to the loss of one batch of both: DETR's
  normalisation (box terms by the boxes, loss_ce by its query weights) over the split, not a
  mean of per-batch losses (l1 / 2 and l1 / 3 averaged is not their sum over 5)."""
  batch = jax.tree.map(jnp.asarray, _batch())
  outputs = _outputs(layers=1, seed=2)
  task = Detection(matcher="scipy")
  first = {k: v[:1] for k, v in batch.items()}
  padded = {k: jnp.concatenate([v[1:], jnp.zeros_like(v[1:])]) for k, v in batch.items()}
  padded["valid"] = jnp.array([True, False])
  noise = _outputs(layers=1, seed=3)  # the padding example's outputs: must not count
  parts = [
    task.eval_sums({k: v[:, :1] for k, v in outputs.items()}, first),
    task.eval_sums(
      {k: jnp.stack([v[:, 1], noise[k][:, 0]], 1) for k, v in outputs.items()}, padded
    ),
  ]
  sums = {
    k: np.concatenate([p[k] for p in parts]) if np.ndim(parts[0][k]) else sum(p[k] for p in parts)
    for k in parts[0]
  }
  metrics = task.finalize(sums)
  whole = task.loss(outputs, batch)[1]
  for key, value in whole.items():
    assert metrics[key] == pytest.approx(float(value), rel=1e-6), key
  assert metrics["count"] == 2


def test_every_layer_is_matched_in_one_call_and_summed():
  """Auxiliary losses: the layers' set losses, vmapped, equal set_loss of each layer alone
  (summed for the loss, the last one's terms reported), and the scipy matcher is one host
  callback per step, not one per layer."""
  batch = jax.tree.map(jnp.asarray, _batch())
  outputs = _outputs(layers=3, seed=1)
  task = Detection(matcher="scipy")
  loss, terms = task.loss(outputs, batch)
  alone = [
    Detection(matcher="scipy", aux_loss=False).loss(
      {k: v[: i + 1] for k, v in outputs.items()}, batch
    )
    for i in range(3)
  ]
  assert float(loss) == pytest.approx(sum(float(a[0]) for a in alone), rel=1e-6)
  for k, v in terms.items():
    assert float(v) == pytest.approx(float(alone[-1][1][k]), rel=1e-6)
  jaxpr = str(jax.make_jaxpr(lambda o: task.loss(o, batch))(outputs))
  assert jaxpr.count("pure_callback") == 1
