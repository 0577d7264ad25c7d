"""Mixup and CutMix: against their formulas, and through the classification loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe.tasks import mixing
from lfpe.tasks.classification import Classification, cross_entropy

IMAGES = jax.random.uniform(jax.random.key(0), (6, 8, 10, 3))


@pytest.mark.parametrize("seed", range(5))
def test_mixup_is_the_convex_combination_with_the_reversed_batch(seed):
  mixed, lam = mixing.mix(IMAGES, jax.random.key(seed), mixup_alpha=0.8)
  assert 0.0 < float(lam) < 1.0
  np.testing.assert_allclose(mixed, lam * IMAGES + (1 - lam) * IMAGES[::-1], rtol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_cutmix_pastes_one_box_and_lambda_is_the_share_kept(seed):
  mixed, lam = mixing.mix(IMAGES, jax.random.key(seed), cutmix_alpha=1.0)
  own = np.all(np.asarray(mixed) == np.asarray(IMAGES), axis=-1)  # [B, H, W]
  theirs = np.all(np.asarray(mixed) == np.asarray(IMAGES[::-1]), axis=-1)
  assert (own | theirs).all()
  region = ~own[0]
  np.testing.assert_array_equal(~own, np.broadcast_to(region, own.shape))  # one box, every image
  assert float(lam) == pytest.approx(1 - region.mean())
  if region.any():  # a rectangle
    rows, cols = np.flatnonzero(region.any(1)), np.flatnonzero(region.any(0))
    assert region[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].all()


def test_the_box_side_is_sqrt_one_minus_lambda_before_clipping():
  """λ = 0.75 cuts a box of half the side (200 of 400 px), smaller only where clipped."""
  sides = []
  for seed in range(12):
    box = np.asarray(mixing.cutmix_box(jax.random.key(seed), jnp.float32(0.75), 400, 400))
    sides.append((box.any(1).sum(), box.any(0).sum()))
  assert max(sides) == (200, 200) and all(h <= 200 and w <= 200 for h, w in sides)


def test_prob_zero_leaves_the_batch_and_both_switch():
  same, lam = mixing.mix(IMAGES, jax.random.key(0), mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.0)
  np.testing.assert_array_equal(same, IMAGES)
  assert float(lam) == 1.0
  kinds = set()
  for seed in range(20):
    mixed, lam = mixing.mix(IMAGES, jax.random.key(seed), mixup_alpha=1.0, cutmix_alpha=1.0)
    exact = np.all(
      (np.asarray(mixed) == np.asarray(IMAGES)) | (np.asarray(mixed) == np.asarray(IMAGES[::-1]))
    )
    kinds.add("cutmix" if exact else "mixup")
  assert kinds == {"cutmix", "mixup"}


def test_the_loss_is_the_cross_entropy_of_the_mixed_target():
  """λ·CE(y) + (1 − λ)·CE(y') equals CE of the mixed one-hot target, with label smoothing."""
  task = Classification(label_smoothing=0.1, mixup_alpha=0.5)
  batch = {"image": IMAGES, "label": jnp.array([0, 1, 2, 3, 4, 0])}
  mixed = task.augment_batch(batch, jax.random.key(1))
  assert set(mixed) == {"image", "label", "mix_label", "mix_weight"}
  logits = jax.random.normal(jax.random.key(2), (6, 5))
  loss, _ = task.loss(logits, mixed)
  lam = mixed["mix_weight"]
  onehot = jax.nn.one_hot(batch["label"], 5)
  target = lam * onehot + (1 - lam) * onehot[::-1]
  np.testing.assert_allclose(loss, jnp.mean(cross_entropy(logits, target, 0.1)), rtol=1e-5)
  assert Classification().augment_batch(batch, jax.random.key(1)) is batch  # off: unchanged


@pytest.mark.parametrize(
  "fields,match",
  [
    (dict(mixup_alpha=-1.0), "mixup_alpha must be >= 0"),
    (dict(mix_prob=1.5), r"mix_prob must be in \[0, 1\]"),
  ],
)
def test_bad_mixing_fields_name_the_field(fields, match):
  with pytest.raises(ValueError, match=match):
    Classification(**fields).validate(None)
