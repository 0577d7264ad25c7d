"""`config.init_from`: a fresh run seeded by another run's parameters, tables resampled.

A source workdir is made without training (a ViT's initial state saved as a checkpoint,
with its config.json), so the test is about the wiring: which parameters are copied, which
are resampled and by whose policy, and which mistakes are refused, naming the parameter.
"""

import json
import logging
import re
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from configs import vit_digits
from lfpe.encodings.resample import resample
from lfpe.errors import ConfigError
from lfpe.nn.patches import resize_patch_kernel
from lfpe.train import init_from, optim, program, sharding, trainer, workdir

DEVICES = jax.devices()[:1]


def _config(posemb, *, image_size=16, patch_size=2, **fields):
  config = vit_digits.get_config(f"posemb={posemb},small=1")
  with config.unlocked():
    config.mesh.data = 1
    config.data.image_size = image_size
    config.model = {**config.model.to_dict(), "patch_size": patch_size}  # an int or a pair
    for key, value in fields.items():
      config[key] = value
  return config


def _state(config, seed=0):
  with config.unlocked():
    config.seed = seed
  prog = program.build(config, sharding.make_mesh(config.mesh, DEVICES))
  return prog.init_state()


def _source(tmp_path, config):
  """A workdir holding `config`'s initial state (seed 7) as its step-1 checkpoint."""
  path = tmp_path / "source"
  state = _state(config, seed=7)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(path / "checkpoints" / "1" / "state", state)
  checkpointer.wait_until_finished()  # the save is asynchronous: the folder appears when done
  workdir.write_record(config, str(path))
  return path, jax.device_get(state.params)


def _flat(tree):
  return {
    "/".join(str(k.key) for k in p): v for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]
  }


def test_the_same_model_starts_from_the_source_parameters_with_a_fresh_optimizer(tmp_path):
  path, source = _source(tmp_path, _config("fourier"))
  state = _state(_config("fourier", init_from=str(path)))
  for name, value in _flat(source).items():
    np.testing.assert_array_equal(_flat(state.params)[name], value, err_msg=name)
  assert int(state.step) == 0
  assert all(not np.any(x) for x in jax.tree.leaves(state.opt_state) if np.ndim(x))  # mu, nu


@pytest.mark.parametrize("seeds", [0, 2])
def test_the_moving_average_starts_from_the_loaded_parameters(tmp_path, seeds):
  """`optim.ema_decay`: evaluations score the average, which started from the random
  initialisation (after t steps d^t of it: a 300-step source scored 0.68, its 10-step
  continuation at decay 0.99 scored 0.10)."""
  path, source = _source(tmp_path, _config("fourier"))
  config = _config("fourier", init_from=str(path), seeds=seeds)
  with config.unlocked():
    config.optim.ema_decay = 0.99
  average = optim.ema_params(_state(config).opt_state)
  for name, value in _flat(source).items():
    got = _flat(average)[name]
    for seed_value in got if seeds else [got]:
      np.testing.assert_array_equal(seed_value, value, err_msg=name)


@pytest.mark.parametrize(
  "posemb, tables, sizes",
  [
    ("embed_1d", ["table"], [((8, 8), (16, 16))]),
    ("embed_2d", ["table_0", "table_1"], [((8,), (16,)), ((8,), (16,))]),
    ("rel_bias_2d", ["table"], [((15, 15), (31, 31))]),
  ],
)
def test_a_new_grid_resamples_each_table_by_its_encodings_policy(tmp_path, posemb, tables, sizes):
  """16 px (8x8 patches) to 32 px (16x16): every table is the source's, resampled from the
  source grid to the new one with the encoding's own method; everything else is copied."""
  path, source = _source(tmp_path, _config(posemb))
  state = _state(_config(posemb, image_size=32, init_from=str(path)))
  new, old = _flat(state.params), _flat(source)
  method = {"embed_1d": "bilinear", "embed_2d": "bilinear", "rel_bias_2d": "bicubic_pytorch"}[
    posemb
  ]
  resampled = [n for n in new if n.split("/")[-1] in tables and new[n].shape != old[n].shape]
  assert len(resampled) >= len(tables)
  for name in resampled:
    (before, after) = sizes[tables.index(name.split("/")[-1])]
    expected = resample(old[name], before, after, method)
    np.testing.assert_allclose(new[name], expected, rtol=1e-6, atol=1e-7, err_msg=name)
  for name in set(new) - set(resampled):
    np.testing.assert_array_equal(new[name], old[name], err_msg=name)


@pytest.mark.parametrize(
  "posemb, method, before, after",
  [("embed_1d", "bilinear", (8, 4), (4, 8)), ("rel_bias_2d", "bicubic_pytorch", (15, 7), (7, 15))],
)
def test_a_transposed_grid_resamples_a_table_whose_shape_it_keeps(
  tmp_path, posemb, method, before, after
):
  """Patches 2x4 to 4x2 at 16 px: an 8x4 grid becomes 4x8; Embed-1D's [32, D] table, the
  relative bias's [15 * 7, heads] and the patch kernel [2·4·C, D] keep their shapes but not
  their layouts: resampled (the kernel by FlexiViT's PI-resize), not copied row for row."""
  path, source = _source(tmp_path, _config(posemb, patch_size=(2, 4)))
  state = _state(_config(posemb, patch_size=(4, 2), init_from=str(path)))
  new, old = _flat(state.params), _flat(source)
  (name,) = [n for n in new if n.endswith("/table")]
  assert new[name].shape == old[name].shape
  np.testing.assert_allclose(
    new[name], resample(old[name], before, after, method), rtol=1e-6, atol=1e-7
  )
  kernel = "embedding/kernel"
  assert new[kernel].shape == old[kernel].shape
  np.testing.assert_allclose(
    new[kernel], resize_patch_kernel(old[kernel], (2, 4), (4, 2)), rtol=1e-6, atol=1e-7
  )


def test_a_new_patch_size_resamples_the_patch_kernel_and_the_grid(tmp_path):
  """Patches 2 to 4 at 16 px (FlexiViT): the kernel by PI-resize, so a patch enlarged 2x
  bilinearly gives the source's token; the 8x8 grid's table becomes 4x4; the rest copied."""
  path, source = _source(tmp_path, _config("embed_1d"))
  state = _state(_config("embed_1d", patch_size=4, init_from=str(path)))
  new, old = _flat(state.params), _flat(source)
  assert new["embedding/kernel"].shape == (16, old["embedding/kernel"].shape[1])  # 4·4·C, C = 1
  np.testing.assert_allclose(
    new["embedding/kernel"], resize_patch_kernel(old["embedding/kernel"], (2, 2), (4, 4))
  )
  patch = np.random.default_rng(0).normal(size=(2, 2))
  enlarged = np.asarray(jax.image.resize(patch, (4, 4), "bilinear", antialias=False))
  np.testing.assert_allclose(
    enlarged.reshape(-1) @ new["embedding/kernel"],
    patch.reshape(-1) @ old["embedding/kernel"],
    rtol=1e-4,
    atol=1e-5,
  )
  (table,) = [n for n in new if n.endswith("/table")]
  np.testing.assert_allclose(new[table], resample(old[table], (8, 8), (4, 4)), atol=1e-7)
  for name in set(new) - {table, "embedding/kernel"}:
    np.testing.assert_array_equal(new[name], old[name], err_msg=name)


def test_an_encoding_that_differs_beyond_its_grid_is_refused_naming_the_parameter(tmp_path):
  """rel_attn_2d's tables gain a head axis with per_head=True: its resampling policy cannot
  make them, and the run stops before training (it used to build a state of the wrong shape)."""
  path, _ = _source(tmp_path, _config("rel_attn_2d"))
  refused = (
    r"parameter params/.*/(row|col) is shape \(15, \d+\) in the source, .* resampled to this "
    r"run's grid or patch size, and \(15, \d+, \d+\) here"
  )
  with pytest.raises(ConfigError, match=refused):
    _state(_config("rel_attn_2d(per_head=True)", init_from=str(path)))


def test_a_parameter_that_cannot_be_resampled_is_named_and_can_be_skipped(tmp_path):
  path, source = _source(tmp_path, _config("fourier"))
  wider_mlp = _config("fourier", init_from=str(path))
  with wider_mlp.unlocked():
    wider_mlp.model.mlp_dim *= 2
  with pytest.raises(
    ConfigError,
    match=r"params/Transformer/encoderblock_0/mlp/fc1/bias is shape \(32,\) in the source and "
    r"shape \(64,\) here, and Dense cannot resample it; list it in config.init_skip",
  ):
    _state(wider_mlp)
  with wider_mlp.unlocked():
    wider_mlp.init_skip = ("/mlp/",)
  state = _state(wider_mlp)
  assert _flat(state.params)["head/kernel"].shape == source["head"]["kernel"].shape
  np.testing.assert_array_equal(_flat(state.params)["head/kernel"], source["head"]["kernel"])


def test_another_encoding_is_refused_naming_the_missing_parameter(tmp_path):
  path, _ = _source(tmp_path, _config("sine_2d"))
  with pytest.raises(ConfigError, match=r"parameter params/Transformer/pos/.* is absent"):
    _state(_config("embed_1d", init_from=str(path)))


@pytest.mark.parametrize("value", ["/nonexistent/run", "{tmp}"])
def test_init_from_must_name_a_checkpoint_before_anything_is_built(tmp_path, value):
  config = _config("fourier", init_from=value.format(tmp=tmp_path))
  with pytest.raises(ConfigError, match="is neither a workdir with checkpoints nor"):
    trainer.train_and_evaluate(config, str(tmp_path / "run"), devices=DEVICES)
  assert not (tmp_path / "run" / "config.json").exists()  # refused before the run's record


def test_a_damaged_source_config_is_refused_before_anything_is_built(tmp_path):
  """(json's own message, naming no field)"""
  path, _ = _source(tmp_path, _config("fourier"))
  (path / "config.json").write_text('{"a\x01')
  message = r"config.json cannot be read \(Invalid control character.*move it aside"
  with pytest.raises(ConfigError, match=rf"^config.init_from='{path}'.*{message}"):
    init_from.check_source(_config("fourier", init_from=str(path)))


def test_a_source_config_that_builds_no_model_here_loads_by_path_and_shape(tmp_path, caplog):
  """Another lfpe version's config.json (here an encoding this one lacks): same shapes load
  (a warning says so); a table that needs resampling is refused naming it (it was a
  traceback from inside the traced init)."""
  path, source = _source(tmp_path, _config("embed_1d"))
  record = path / "config.json"
  record.write_text(re.sub(r'"posemb": "[^"]*"', '"posemb": "mine"', record.read_text()))
  config = _config("embed_1d", init_from=str(path))
  with caplog.at_level(logging.WARNING):
    init_from.check_source(config)
  assert "no config.json that builds a model here (ValueError" in caplog.text
  np.testing.assert_array_equal(_state(config).params["head"]["kernel"], source["head"]["kernel"])
  with pytest.raises(ConfigError, match=r"params/Transformer/pos/.*table"):
    _state(_config("embed_1d", image_size=32, init_from=str(path)))


def test_a_source_checkpoint_folder_works_without_its_workdir(tmp_path, caplog):
  path, source = _source(tmp_path, _config("fourier"))
  (path / "config.json").unlink()  # a bare checkpoint: same shapes copy, nothing to resample
  config = _config("fourier", init_from=str(path / "checkpoints" / "1" / "state"))
  with caplog.at_level(logging.WARNING):
    init_from.check_source(config)
  assert "(it has none); parameters load by path and shape" in caplog.text
  assert "a transposed grid or patch (the same shapes) is copied row for row" in caplog.text
  state = _state(config)
  np.testing.assert_array_equal(state.params["head"]["kernel"], source["head"]["kernel"])
  assert json.loads(json.dumps(str(path)))  # the path round-trips as a config string


@pytest.mark.parametrize("source_seeds", [0, 2])
def test_seeded_runs_start_seed_by_seed_or_all_from_one_source(tmp_path, source_seeds):
  """With `config.seeds`, seed i starts from the source's seed i (a source with as many
  seeds) or every seed from the one source run; skipped parameters stay each seed's own."""
  path, source = _source(tmp_path, _config("embed_1d", seeds=source_seeds))
  state = _state(
    _config("embed_1d", seeds=2, init_from=str(path), init_skip=("^params/embedding/",)), seed=0
  )
  fresh = _state(_config("embed_1d", seeds=2), seed=0)
  got, want, own = _flat(state.params), _flat(source), _flat(fresh.params)
  assert "embedding/kernel" in got
  for name, value in got.items():
    assert value.shape[0] == 2, name
    if name.startswith("embedding/"):
      np.testing.assert_array_equal(value, own[name])
      assert name == "embedding/bias" or not np.array_equal(value[0], value[1])  # bias: zeros
    elif source_seeds:
      np.testing.assert_array_equal(value, want[name])
    else:
      np.testing.assert_array_equal(value, np.stack([want[name]] * 2))


def test_a_source_with_another_seed_count_is_refused(tmp_path):
  path, _ = _source(tmp_path, _config("embed_1d", seeds=2))
  with pytest.raises(ConfigError, match=r"trained with seeds=2, this run has config.seeds=3"):
    _state(_config("embed_1d", seeds=3, init_from=str(path)))
  # a plain run: the source's stacked arrays were reported as a LayerNorm it cannot resample
  with pytest.raises(ConfigError, match=r"trained with seeds=2, this run has config.seeds=0"):
    _state(_config("embed_1d", init_from=str(path)))


def test_a_run_that_resumes_never_reads_its_source_again(tmp_path):
  """Its source may be gone once the run holds checkpoints of its own (the check of the
  source on every start refused the resume, and `evaluate`, of a run it no longer touches)."""
  path, _ = _source(tmp_path, _config("fourier"))
  config = _config("fourier", init_from=str(path), total_steps=2)
  run = str(tmp_path / "run")
  trainer.train_and_evaluate(config, run, devices=DEVICES)
  shutil.rmtree(path)
  with config.unlocked():
    config.total_steps = 4  # trains on from its own step-2 checkpoint
  summary = trainer.train_and_evaluate(config, run, devices=DEVICES)
  assert summary["step"] == 4 and trainer.evaluate(config, run, devices=DEVICES)
