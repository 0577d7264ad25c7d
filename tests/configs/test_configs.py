"""Every config in configs/ builds, validates, and initialises its model (shapes only)."""

import glob
import importlib.util
import math
import os

import jax
import pytest

from lfpe import tasks
from lfpe.data import config as data_config
from lfpe.train import optim, sharding, steps, validate
from lfpe.train.optim import make_optimizer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FILES = sorted(glob.glob(os.path.join(ROOT, "configs", "[!_]*.py")))
NAMES = [os.path.basename(f)[:-3] for f in FILES]
REQUIRED = ("seed", "total_steps", "batch_size", "checkpoint_every", "eval_every")


def _module(name):
  spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "configs", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _abstract_params(config):
  """Validates `config` and returns its parameters' shapes (jax.eval_shape: no compute)."""
  validate.validate_config(config, num_devices=8)
  task = tasks.get(config.task)
  model, (tx, _) = task.create_model(config), make_optimizer(config)
  state = jax.eval_shape(
    lambda rng: steps.init_state(rng, task.example_batch(config), task=task, model=model, tx=tx),
    jax.random.key(0),
  )
  return sharding.unbox(state.params)


def _count(params):
  return sum(math.prod(x.shape) for x in jax.tree.leaves(params))


def test_all_expected_configs_exist():
  assert {"vit_digits", "vit_cifar10", "vit_b16_imagenet"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("arg", ["small=1", ""])
def test_config_builds_and_initialises(name, arg):
  config = _module(name).get_config(arg)
  for field in REQUIRED:
    assert isinstance(config[field], int), field
  assert isinstance(config.model.posemb, str)
  with pytest.raises(AttributeError):
    config.not_a_field = 1  # locked
  assert _count(_abstract_params(config)) > 0


@pytest.mark.parametrize("name", NAMES)
def test_docstring_has_command_runtime_and_result(name):
  doc = _module(name).__doc__
  assert f"python -m lfpe.main --config=configs/{name}.py" in doc
  assert "Expected" in doc and "small=1" in doc


@pytest.mark.parametrize("name", NAMES)
def test_arguments_are_parsed(name):
  module = _module(name)
  assert module.get_config("posemb=sine_nd,small=1").model.posemb == "sine_nd"
  assert module.get_config("small=1").total_steps < module.get_config().total_steps
  with pytest.raises(ValueError, match="unknown config argument 'posenc'"):
    module.get_config("posenc=fourier")


def test_imagenet_is_the_papers_vit_b16():
  # 002 Sec. 4.3: ViT-B/16 (width 768, MLP 3072, 12 heads, 12 blocks), 14x14 grid, 90 epochs.
  config = _module("vit_b16_imagenet").get_config("posemb=embed_1d")
  params = _abstract_params(config)
  assert 86.0e6 < _count(params) < 87.0e6  # ViT-B/16 with a 1000-way head: 86.6M
  assert config.data.image_size // 16 == 14
  assert config.total_steps * config.batch_size / 1_281_167 == pytest.approx(90, abs=0.01)
  # The standard evaluation (not a resize of the whole image): shorter side 256, central 224.
  assert config.data.eval_preprocess == "resize_small(256)|central_crop(224)"
  ops = data_config.resolve(config.data).ops(train=False)
  assert [type(op).__name__ for op in ops][1:3] == ["ResizeSmall", "CentralCrop"]
  fourier = _abstract_params(_module("vit_b16_imagenet").get_config("posemb=fourier"))
  assert _count(fourier) < _count(params)  # no 197x768 table


def test_detr_coco_sets_detrs_own_settings():
  """ReLU, no input dropout, ImageNet's mean and std before the padding, and the ResNet's stem
  and layer1 frozen: DETR's 222,400 parameters it does not train (its printed count)."""
  config = _module("detr_coco").get_config()
  assert (config.model.activation, config.model.input_dropout) == ("relu", False)
  ops = data_config.resolve(config.data).preprocess
  normalize = [op for op in ops if type(op).__name__ == "Normalize"]
  assert [(list(op.mean), list(op.std)) for op in normalize] == [
    ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
  ]
  trains = optim.trains_fn(config.optim.trainable, config.optim.freeze)
  frozen = {
    optim.param_name(path): leaf
    for path, leaf in jax.tree_util.tree_flatten_with_path(_abstract_params(config))[0]
    if not trains(optim.param_name(path))
  }
  assert all("/backbone/" in name for name in frozen)
  assert _count(frozen) == 222_400


@pytest.mark.parametrize("protocol", ["all", "heldout"])
def test_detr_coco_pads_to_its_largest_scale_not_1333(protocol):
  """lfpe resizes the longer side to DETR's scale, so the canvas is the largest scale (800):
  a 1333 px canvas was 2.8x the pixels, all padding."""
  config = _module("detr_coco").get_config(f"protocol={protocol}")
  detection = data_config.resolve(config.data).detection
  assert detection.max_size == 800 == max(detection.train_sizes + detection.test_sizes)
