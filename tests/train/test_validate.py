"""Config validation: each bad field fails before anything compiles, naming the field."""

import importlib

import ml_collections
import pytest
from train_fixtures import digits_small

from lfpe import tasks
from lfpe.train import validate


def _with(path: str, value) -> ml_collections.ConfigDict:
  """The small digits config with `path` set to `value` (types unchecked, as from a file)."""
  config = digits_small().to_dict()
  node = config
  *parents, leaf = path.split(".")
  for key in parents:
    node = node[key]
  if value is _DELETE:
    del node[leaf]
  else:
    node[leaf] = value
  return ml_collections.ConfigDict(config)


class _Delete:
  def __repr__(self):
    return "<deleted>"  # a stable test id (pytest-xdist compares them across workers)


_DELETE = _Delete()

BAD = [  # (field, bad value, what the message must name)
  ("seed", "zero", "config.seed"),
  ("seed", -1, "config.seed"),
  ("total_steps", -5, "config.total_steps"),
  ("total_steps", _DELETE, "config.total_steps is missing"),
  ("batch_size", 0, "config.batch_size"),
  ("batch_size", 30, r"config.batch_size.*data axis"),  # 8 devices: data = 8
  ("eval_batch_size", 12, r"config.eval_batch_size.*data axis"),
  ("eval_every", 0, "config.eval_every"),
  ("checkpoint_every", -1, "config.checkpoint_every"),
  ("log_every", 1.5, "config.log_every"),
  ("keep_checkpoints", 0, "config.keep_checkpoints"),
  ("compute_dtype", "float16", "config.compute_dtype"),
  ("mesh.model", 16, r"config.mesh .*data\*model=16 devices but only 8"),
  ("mesh.model", 0, "config.mesh.model"),
  ("mesh.data", "four", "config.mesh.data"),
  ("mesh.data", 0, r"config.mesh.data must be an integer >= 1, or -1 \(every device"),
  ("mesh.fsdp", "yes", "config.mesh.fsdp"),
  ("optim.name", "lamb", "config.optim.name"),
  ("optim.lr", -1e-3, "config.optim.lr"),
  ("optim.b2", 1.5, "config.optim.b2"),
  ("optim.grad_clip_norm", -1.0, "config.optim.grad_clip_norm"),
  ("schedule.name", "step", "config.schedule.name"),
  ("schedule.warmup_steps", -1, "config.schedule.warmup_steps"),
  ("report_every", -1, "config.report_every"),
  ("dropout_prng", "unsafe_rbg", "config.dropout_prng"),
  ("task.name", "segmentation", "config.task.name"),
  ("task.label_smoothing", 1.5, "config.task.label_smoothing"),
  ("model.patch_size", 3, "model.patch_size"),
  ("model.num_heads", 3, "model.num_heads"),
  ("model.posemb", "fourierr", "posemb"),
  ("model.posemb", "fourier(gama=1.0)", "'gama' is not an option of encoding 'fourier'"),
  ("model.widht", 8, "model.widht is not a ViT field"),
  ("model_name", _DELETE, "config.model_name is missing"),
  ("model_name", "resnet", "config.model_name"),
  ("data.name", "mnist", "data.name"),
  ("data.image_size", -1, "data.image_size"),
  ("evals", {"x": 3}, r"config.evals.x must be a dict of data, model, every, got 3"),
  ("evals", {"x": {"data": 3}}, r"config.evals.x.data must be a dict of config.data's fields"),
  ("evals", {"x": {"model": [1]}}, r"config.evals.x.model must be a dict of config.model's"),
  ("evals", {"x": {"data": {"image_size": "big"}}}, r"x.data.image_size='big' \(str\) cannot "
   r"replace 16: give a value of type int"),
  ("evals", {"x": {"model": {"posemb": 5}}}, r"x.model.posemb=5 \(int\) cannot replace"),
]  # fmt: skip


@pytest.mark.parametrize("path, value, message", BAD, ids=[f"{p}={v!r}" for p, v, _ in BAD])
def test_bad_config_names_the_field(path, value, message):
  """As the trainer checks a config: its fields, then `config.model` as the model is built."""
  config = _with(path, value)
  with pytest.raises(ValueError, match=message):
    validate.validate_config(config, num_devices=8)
    tasks.get(config.task).create_model(config)


def test_mesh_larger_than_devices():
  config = _with("mesh.data", 4)
  config.mesh.model = 4
  with pytest.raises(ValueError, match=r"config.mesh .*16 devices but only 8"):
    validate.validate_config(config, num_devices=8)


def test_good_configs_pass():
  validate.validate_config(digits_small(), num_devices=8)
  config = _with("mesh.data", 4)
  config.mesh.model = 2
  validate.validate_config(config, num_devices=8)


@pytest.mark.parametrize(
  "name", ["vit_digits", "detr_shapes", "reformer_digits", "layout_synthetic"]
)
def test_a_model_dtype_other_than_compute_dtype_is_refused_for_every_task(name):
  """Every task builds its model in config.compute_dtype: a different model.dtype would be
  silently ignored, so validation refuses it once, for all tasks."""
  config = importlib.import_module(f"configs.{name}").get_config("small=1")
  with config.unlocked():
    config.model.dtype = "bfloat16"
  with pytest.raises(ValueError, match=r"config.model.dtype differs from config.compute_dtype"):
    validate.validate_config(config, num_devices=8, check_data=False)
