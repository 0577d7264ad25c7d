"""`data.naflex`: training batches mix sizes and aspect ratios per example, packed; the
trainer trains and evaluates on them."""

import jax
import ml_collections
import numpy as np
import pytest

from configs import vit_digits
from lfpe import resolution
from lfpe.data import config, pipeline
from lfpe.train import trainer

SIZES = ((16, 16), (8, 24), (24, 8), (12, 12))
NAFLEX = dict(patch=2, max_tokens=64, sizes=SIZES)


def _train(cfg, mesh, seed=5):
  return pipeline.make_loader(cfg, global_batch_size=8, seed=seed, train=True, mesh=mesh)


def test_each_row_draws_its_size_and_a_restored_iterator_repeats_the_draws(digits_config, mesh):
  digits_config.image_size, digits_config.naflex = 16, NAFLEX
  it = _train(digits_config, mesh)
  first = jax.tree.map(np.asarray, next(it))
  image = first["image"]
  assert set(image) == {"patches", "index", "shape", "valid"}
  assert image["patches"].shape == (8, 64, 2 * 2 * 1)
  want = [resolution.draw_size(SIZES, 5, (0, row)) for row in range(8)]
  assert [tuple(s) for s in image["shape"] * 2] == want  # cells x patch = the drawn size
  assert len(set(want)) > 1  # one batch, several sizes
  np.testing.assert_array_equal(image["valid"].sum(1), [h * w // 4 for h, w in want])
  state = it.get_state()
  expected = jax.tree.map(np.asarray, next(it))
  restored = _train(digits_config, mesh)
  restored.set_state(state)
  got = jax.tree.map(np.asarray, next(restored))
  jax.tree.map(np.testing.assert_array_equal, got, expected)


@pytest.mark.parametrize(
  ("image_size", "max_tokens", "grid"),
  [(16, 64, (8, 8)), (24, 64, (12, 12)), (5, 64, (8, 8)), (None, 4, (4, 4))],
)
def test_evaluation_packs_each_image_at_its_own_size(
  digits_config, mesh, image_size, max_tokens, grid
):
  """An evaluation past the training budget (64 tokens of 2 px: 16 px) is scored at its own
  size (24 px: 144 tokens; digits' native 8 px past a budget of 4 tokens), not shrunk to the
  budget; an image that is not whole patches (5 px) is resized to fill the budget, NaFlex's
  rule."""
  digits_config.image_size = image_size
  digits_config.naflex = {**NAFLEX, "max_tokens": max_tokens}
  loader = pipeline.make_loader(digits_config, global_batch_size=8, seed=0, train=False, mesh=mesh)
  image = jax.tree.map(np.asarray, next(iter(loader)))["image"]
  assert image["patches"].shape[1] == max(max_tokens, grid[0] * grid[1])
  np.testing.assert_array_equal(image["shape"], np.tile(grid, (8, 1)))


def test_each_evaluations_own_packing_is_what_is_checked():
  """An evaluation that sets `data.naflex=None` runs unpacked, so NTK scaling is fine there;
  one that packs while training does not is checked as training would be."""
  cfg = vit_digits.get_config("small=1")
  with cfg.unlocked():
    cfg.data.naflex = ml_collections.ConfigDict(NAFLEX)
    ntk = {"posemb": "rope_axial(scaling='ntk', trained_grid=(12, 12))"}
    cfg.model.posemb = "rope_axial"
    cfg.evals = {"big": {"data": {"naflex": None, "image_size": 32}, "model": ntk}}
  trainer.checked_task_and_model(cfg, num_devices=1, check_data=False)
  with cfg.unlocked():
    cfg.data.naflex = None
    cfg.evals = {"packed": {"data": {"naflex": {**NAFLEX, "patch": 4}}}}
  with pytest.raises(ValueError, match=r"config.evals.packed.data.naflex.patch=4 must be"):
    trainer.checked_task_and_model(cfg, num_devices=1, check_data=False)
  # Part of the training packing, merged over it as the evaluation merges it: it passes.
  with cfg.unlocked():
    cfg.data.naflex = ml_collections.ConfigDict(NAFLEX)
    cfg.evals = {"big": {"data": {"naflex": {"max_tokens": 144}}}}
  trainer.checked_task_and_model(cfg, num_devices=1, check_data=False)


@pytest.mark.parametrize(
  ("naflex", "match"),
  [
    (dict(patch=0, max_tokens=8, sizes=((8, 8),)), "positive ints"),
    (dict(patch=2, max_tokens=8, sizes=((8,),)), r"\(h, w\) pairs"),
    (dict(patch=2, max_tokens=8, sizes=(8, 8)), r"\(h, w\) pairs, sizes=\(\(32, 32\),\) for one"),
    (dict(patch=2, max_tokens=8, sizes=8), r"\(h, w\) pairs"),  # were TypeErrors
    (dict(patch=2, max_tokens=8), r"missing \['sizes'\]"),
    (dict(patch=2, max_tokens=8, size=((8, 8),)), r"unknown \['size'\]"),
  ],
)
def test_bad_naflex_fields_are_named(digits_config, naflex, match):
  digits_config.naflex = naflex
  with pytest.raises(ValueError, match=match):
    config.resolve(digits_config)


def test_the_trainer_trains_and_evaluates_on_packed_batches(tmp_path, digits_dir):
  cfg = vit_digits.get_config("small=1")
  with cfg.unlocked():
    cfg.data.data_dir = digits_dir
    cfg.data.naflex = ml_collections.ConfigDict(NAFLEX)
    cfg.total_steps, cfg.eval_every, cfg.mesh.data = 6, 6, 1
    cfg.task.label_smoothing = 0.0
    cfg.evals = {"odd": {"data": {"image_size": 15}}}  # not whole patches: resized, as packed
  result = trainer.train_and_evaluate(cfg, str(tmp_path), devices=jax.devices()[:1])
  assert np.isfinite(result["eval"]["loss"]) and 0 <= result["eval"]["accuracy"] <= 1
  assert np.isfinite(result["eval/odd"]["loss"])  # refused as unpacked 15 px before
  with cfg.unlocked():
    cfg.evals = {}
  # The metrics ignore padding: packed into rows twice as long (more padding tokens per
  # example), the trained run scores the same loss and accuracy.
  with cfg.unlocked():
    cfg.data.naflex.max_tokens = 128
  padded = trainer.evaluate_all(cfg, str(tmp_path), devices=jax.devices()[:1])["eval"]
  assert padded["accuracy"] == result["eval"]["accuracy"]
  np.testing.assert_allclose(padded["loss"], result["eval"]["loss"], rtol=1e-5)
  with cfg.unlocked():
    cfg.data.naflex.max_tokens = 64
  with cfg.unlocked():
    cfg.model.patch_size = 4
  with pytest.raises(ValueError, match="naflex.patch"):
    trainer.train_and_evaluate(cfg, str(tmp_path / "bad"), devices=jax.devices()[:1])


@pytest.mark.parametrize(
  ("field", "value", "match"),
  [
    ("model.posemb", "embed_2d(align_corners=True)", "half-pixel centres"),
    ("model.posemb", "rope_axial(scaling='ntk', trained_grid=(8, 8))", "config.model.posemb="),
    ("evals", {"x": {"model": {"posemb": "embed_1d(align_corners=True)"}}}, "config.evals.x."),
    ("model.coord_augment", {"shift": 0.1}, "coord_augment"),
    ("task.mixup_alpha", 0.2, "mixup_alpha"),
    ("data.naflex", "patch=2", r"must be a dict, e\.g\."),  # was dict()'s own message
  ],
)
def test_what_packed_batches_cannot_take_is_refused_before_training(field, value, match):
  cfg = vit_digits.get_config("small=1")
  with cfg.unlocked():
    cfg.data.naflex = value if field == "data.naflex" else ml_collections.ConfigDict(NAFLEX)
    if field == "evals":
      cfg.evals = value
    elif field != "data.naflex":
      section, name = field.split(".")
      cfg[section][name] = value
  with pytest.raises(ValueError, match=match):  # the config's own check: before anything runs
    trainer.checked_task_and_model(cfg, num_devices=1, check_data=False)


def test_the_patch_a_variant_names_is_the_one_packing_is_checked_against():
  """A config whose patch comes from `model.variant` alone (configs/vit_b16_imagenet.py's way):
  packing at that patch passes, at another is refused, and after training at grids above the
  nominal one a RoPE scaling policy still needs its `trained_grid` (the check used to read
  `model.patch_size` only: it refused the right patch and skipped this one)."""
  cfg = vit_digits.get_config("small=1")
  with cfg.unlocked():
    del cfg.model["patch_size"]
    cfg.model.variant = f"mu/{NAFLEX['patch']}"
    cfg.data.naflex = ml_collections.ConfigDict(NAFLEX)
  check = lambda: trainer.checked_task_and_model(cfg, num_devices=1, check_data=False)
  check()
  with cfg.unlocked():
    cfg.data.naflex.patch = 2 * NAFLEX["patch"]
  with pytest.raises(ValueError, match="naflex.patch"):
    check()
  with cfg.unlocked():
    cfg.data.naflex.patch = NAFLEX["patch"]
    cfg.model.posemb = "rope_axial(scaling='pi')"
  with pytest.raises(ValueError, match="trained_grid"):
    check()
