"""The captioning task: teacher forcing on every reference, eval sums, caption metrics."""

import dataclasses
import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lfpe import tasks
from lfpe.data import screens
from lfpe.tasks.captioning import Captioning, token_losses

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KEYS = {
  "loss",
  "token_accuracy",
  "count",
  "count_unseen",
  "BLEU-1",
  "BLEU-2",
  "ROUGE-L",
  "CIDEr",
  "CIDEr_seen",
  "CIDEr_unseen",
}


def _config(arg="posemb=fourier,small=1", name="layout_synthetic"):
  path = os.path.join(ROOT, "configs", f"{name}.py")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


@pytest.fixture(scope="module")
def batch():
  """Four test screens as the loader yields them, the last a padding row."""
  split = screens.generate(screens.ScreensConfig(name="t", num_train=4, num_test=4), "test")
  out = {k: jnp.asarray(v, jnp.int32) for k, v in split.items()}
  return {**out, "mask": jnp.asarray([True, True, True, False])}


@pytest.fixture(scope="module")
def setup(batch):
  config = _config()
  task = tasks.get(config.task)
  model = task.create_model(config)
  variables = jax.jit(lambda rng: task.init_variables(model, rng, batch))(jax.random.key(0))
  return task, model, variables


def test_training_loss_is_the_mean_over_real_tokens_of_every_reference(batch, setup):
  task, model, variables = setup
  forward = jax.jit(lambda v, b, rng: task.forward(model, v, b, train=True, rng=rng))
  outputs = forward(variables, batch, jax.random.key(1))
  logits = outputs["logits"]
  assert logits.shape == (4, screens.NUM_REFS, screens.CAPTION_LEN - 1, len(screens.CAPTION_VOCAB))
  loss, metrics = task.loss(outputs, batch)
  targets = np.asarray(batch["captions"][:, :, 1:])
  logp = np.asarray(jax.nn.log_softmax(logits))
  nll = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
  real = targets != 0
  assert float(loss) == pytest.approx(nll[real].mean(), rel=1e-5)
  hits = np.argmax(logp, -1) == targets
  assert float(metrics["token_accuracy"]) == pytest.approx(hits[real].mean())


@pytest.mark.parametrize("beam_size", [1, 3])
def test_eval_round_trip_produces_the_metrics(batch, setup, beam_size):
  task, model, variables = setup
  task = dataclasses.replace(task, beam_size=beam_size)
  step = jax.jit(lambda v, b: task.eval_sums(task.forward(model, v, b, train=False, rng=None), b))
  sums = jax.device_get(step(variables, batch))
  assert sums["predictions"].shape == (4, screens.CAPTION_LEN - 1)
  assert sums["references"].shape == (4, screens.NUM_REFS, screens.CAPTION_LEN)
  for k in ("nll", "hits", "tokens", "count"):
    sums[k] = float(sums[k])  # the trainer adds scalars up over batches
  metrics = task.finalize(sums)
  assert set(metrics) == KEYS
  assert metrics["count"] == 3
  assert metrics["count_unseen"] == float(np.asarray(batch["unseen"])[:3].sum())
  assert all(np.isfinite(metrics[k]) or k.startswith("CIDEr_") for k in KEYS)


def test_perfect_captions_score_full_bleu(batch):
  task = Captioning()
  captions = batch["captions"]
  tokens = captions[:, 0, 1:]  # the first reference: words, eos, padding
  logits = jnp.zeros((*captions[:, :, 1:].shape, len(screens.CAPTION_VOCAB)))
  sums = jax.device_get(task.eval_sums({"logits": logits, "tokens": tokens}, batch))
  metrics = task.finalize(sums)
  assert metrics["BLEU-1"] == pytest.approx(100.0)
  assert metrics["ROUGE-L"] == pytest.approx(100.0)
  assert metrics["loss"] == pytest.approx(np.log(len(screens.CAPTION_VOCAB)), rel=1e-5)
  assert metrics["CIDEr"] > 100.0


def test_token_losses_mask_padding():
  logits = jnp.log(jnp.asarray([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
  nll, hit, real = token_losses(logits, jnp.asarray([0, 1]))
  np.testing.assert_allclose(nll, [np.log(2), -np.log(0.8)], rtol=1e-6)
  np.testing.assert_array_equal(hit, [1.0, 1.0])
  np.testing.assert_array_equal(real, [0.0, 1.0])


def test_widget_config_enlarges_the_caption_vocabulary():
  config = _config("posemb=embed_nd,small=1", "widget_caption")
  model = tasks.get(config.task).create_model(config)
  assert (model.caption_vocab, model.text_vocab, model.bins) == (10_000, 75, 100)


@pytest.mark.parametrize(
  ("edit", "field"),
  [
    (lambda c: c.task.update(beam_size=0), "config.task.beam_size"),
    (lambda c: c.task.update(length_penalty=-1.0), "config.task.length_penalty"),
    (lambda c: setattr(c, "model_name", "detr"), "config.model_name"),
    (lambda c: c.model.update(caption_vocab=50), "config.model.caption_vocab"),
    (lambda c: c.data.update(name="digits"), "config.data.name"),
  ],
)
def test_validate_names_the_bad_field(edit, field):
  config = _config()
  config.unlock()
  edit(config)
  with pytest.raises(ValueError, match=field):
    tasks.get(config.task).validate(config)
