"""Classification task: cross-entropy, label smoothing, accuracy, masked eval sums."""

import re

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from lfpe import tasks
from lfpe.tasks.classification import Classification, correct, cross_entropy

LOGITS = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0], [1.0, 4.0, 1.0]], np.float32)
LABELS = np.array([0, 1, 1], np.int32)


def _np_cross_entropy(logits, labels, eps=0.0):
  """-sum_k t_k log softmax(z)_k with t = (1 - eps) onehot + eps / K, in float64."""
  z = logits.astype(np.float64)
  log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
  t = (1 - eps) * np.eye(z.shape[-1])[labels] + eps / z.shape[-1]
  return -(t * log_p).sum(-1)


def test_cross_entropy_matches_numpy():
  np.testing.assert_allclose(
    cross_entropy(jnp.asarray(LOGITS), jnp.asarray(LABELS)),
    _np_cross_entropy(LOGITS, LABELS),
    rtol=1e-6,
  )


def test_cross_entropy_hand_value():
  # logits [0, 0] against label 0: -log(1/2).
  assert float(cross_entropy(jnp.zeros((1, 2)), jnp.array([0]))[0]) == pytest.approx(np.log(2))


def test_label_smoothing_matches_numpy_and_soft_labels():
  eps = 0.1
  np.testing.assert_allclose(
    cross_entropy(jnp.asarray(LOGITS), jnp.asarray(LABELS), eps),
    _np_cross_entropy(LOGITS, LABELS, eps),
    rtol=1e-6,
  )
  onehot = jnp.asarray(np.eye(3, dtype=np.float32)[LABELS])
  np.testing.assert_allclose(
    cross_entropy(jnp.asarray(LOGITS), onehot, eps),
    cross_entropy(jnp.asarray(LOGITS), jnp.asarray(LABELS), eps),
    rtol=1e-6,
  )


def test_correct_is_top1():
  np.testing.assert_array_equal(correct(jnp.asarray(LOGITS), jnp.asarray(LABELS)), [1, 0, 1])


def test_loss_is_mean_and_reports_accuracy():
  task = Classification(label_smoothing=0.0)
  batch = {"image": None, "label": jnp.asarray(LABELS)}
  loss, metrics = task.loss(jnp.asarray(LOGITS), batch)
  assert float(loss) == pytest.approx(_np_cross_entropy(LOGITS, LABELS).mean(), rel=1e-6)
  assert float(metrics["accuracy"]) == pytest.approx(2 / 3)


def test_eval_sums_ignore_padding_and_finalize_divides_by_count():
  task = Classification(label_smoothing=0.3)  # eval loss is plain cross-entropy
  batch = {"label": jnp.asarray(LABELS), "mask": jnp.array([True, True, False])}
  sums = task.eval_sums(jnp.asarray(LOGITS), batch)
  expected = _np_cross_entropy(LOGITS, LABELS)[:2].sum()
  assert float(sums["loss"]) == pytest.approx(expected, rel=1e-6)
  assert float(sums["correct"]) == 1.0 and float(sums["count"]) == 2.0
  # Two batches summed on the host: the mean is over real examples only.
  both = {k: 2 * float(v) for k, v in sums.items()}
  final = task.finalize(both)
  assert final["accuracy"] == pytest.approx(0.5)
  assert final["loss"] == pytest.approx(expected / 2, rel=1e-6)


def test_registry_builds_with_options_and_rejects_unknown():
  task = tasks.get({"name": "classification", "label_smoothing": 0.2})
  assert isinstance(task, Classification) and task.label_smoothing == 0.2
  with pytest.raises(ValueError, match="task.name"):
    tasks.get({"name": "segmentation"})
  with pytest.raises(ValueError, match="task"):
    tasks.get({"name": "classification", "smoothing": 0.1})


@pytest.mark.parametrize(
  ("sizes", "posemb", "refused"),
  [
    ((8, 16, 32), "rope_axial(scaling='pi')", True),  # trained up to 16x16, nominal 8x8
    ((8, 16, 32), "rope_axial(scaling='pi', trained_grid=(16, 16))", False),
    ((8, 16, 32), "rope_axial(scaling='ntk', ntk_factor=2.0)", False),  # its s is fixed
    ((8, 16, 32), "rope_axial(scaling='yarn', ntk_factor=2.0)", True),  # YaRN's ramp reads L
    ((8, 16), "rope_axial(scaling='yarn')", False),  # nothing trained above the nominal size
    (None, "rope_axial(scaling='pi')", False),
  ],
)
def test_a_scaling_policy_after_mixed_sizes_must_say_its_training_length(sizes, posemb, refused):
  """With `data.train_sizes` above the model's own size, RoPE's pi / ntk / yarn in the model
  or in an evaluation must set `trained_grid`: the nominal grid compresses trained sizes."""
  from configs import vit_digits  # noqa: PLC0415

  config = vit_digits.get_config("posemb=rope_axial")
  with config.unlocked():
    config.data.train_sizes = sizes
    config.evals = {"at_64": {"data": {"image_size": 64}, "model": {"posemb": posemb}}}
  if refused:
    with pytest.raises(
      ValueError, match=r"config.evals.at_64.model.posemb.*trained_grid=\(16, 16\)"
    ):
      Classification().validate(config)
  else:
    Classification().validate(config)


@pytest.mark.parametrize(
  ("sizes", "max_tokens", "refused"),
  [
    (((16, 16), (16, 32)), 128, "(8, 16)"),  # (16, 32) packs as its own 8x16 grid
    (((16, 16), (16, 32)), 64, "(8, 10)"),  # resized to fit 64 tokens: 5x10 (naflex_size)
    (((16, 16), (8, 16)), 64, None),  # nothing packed above the nominal 8x8
  ],
)
def test_naflex_grids_above_the_model_size_need_a_training_length(sizes, max_tokens, refused):
  """NaFlex training (`data.naflex`) is mixed-size training too: the largest packed grid per
  axis, as `resolution.pack` makes it, is the length a scaling policy must be told."""
  from configs import vit_digits  # noqa: PLC0415

  config = vit_digits.get_config("posemb=rope_axial")
  with config.unlocked():
    config.model.posemb = "rope_axial(scaling='pi')"
    config.data.naflex = {"patch": config.model.patch_size, "max_tokens": max_tokens}
    config.data.naflex.sizes = sizes
  assert config.data.image_size // config.model.patch_size == 8
  if refused:
    with pytest.raises(ValueError, match=rf"naflex.*trained_grid={re.escape(refused)}"):
      Classification().validate(config)
  else:
    Classification().validate(config)


def test_the_model_spec_and_merged_mapping_overrides_are_checked_too():
  """The model's own spec is checked, and a mapping override of a mapping spec is read as the
  trainer merges it (its fields over the model's)."""
  from configs import vit_digits  # noqa: PLC0415

  config = vit_digits.get_config("posemb=rope_axial")
  with config.unlocked():
    config.data.train_sizes = (16, 32)
    config.model.posemb = "rope_axial(scaling='pi')"
  with pytest.raises(ValueError, match=r"config.model.posemb=.*trained_grid=\(16, 16\)"):
    Classification().validate(config)
  mapping = {"name": "rope_axial", "scaling": "none"}
  with config.unlocked():
    config.model = ml_collections.ConfigDict({**config.model.to_dict(), "posemb": mapping})
    config.evals = {"pi": {"model": {"posemb": {"scaling": "pi", "trained_grid": (16, 16)}}}}
  Classification().validate(config)
  with config.unlocked():
    config.evals.pi.model.posemb = {"scaling": "pi"}
  with pytest.raises(ValueError, match=r"config.evals.pi.model.posemb="):
    Classification().validate(config)
