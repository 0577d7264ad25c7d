"""Command-line overrides: each field keeps its type; spec options change one option."""

import os

import ml_collections
import pytest

from lfpe.errors import ConfigError
from lfpe.main import split_overrides
from lfpe.train import config_cli
from lfpe.train.metrics import final_line, format_seconds, report_interval

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DIGITS = os.path.join(ROOT, "configs", "vit_digits.py")


def _config():
  return ml_collections.ConfigDict(
    dict(
      steps=10,
      lr=1e-3,
      flag=False,
      name="a",
      sizes=(1, 2),
      extra=None,
      shape=ml_collections.config_dict.placeholder(tuple),
      rate=ml_collections.config_dict.placeholder(float),
      label=ml_collections.config_dict.placeholder(str),
      on=ml_collections.config_dict.placeholder(bool),
      model=dict(posemb="fourier(gamma=0.25)", label="fourier"),
    )
  )


@pytest.mark.parametrize(
  "path, text, value",
  [
    ("steps", "20", 20),
    ("lr", "2", 2.0),
    ("flag", "yes", True),
    ("flag", "0", False),
    ("name", "b", "b"),
    ("sizes", "(3, 4, 5)", (3, 4, 5)),
    ("sizes", "[6]", (6,)),
    ("extra", "0.5", 0.5),
    ("extra", "word", "word"),
    ("extra", "dict(a=1, b=dict(c=(2, 3)))", {"a": 1, "b": {"c": (2, 3)}}),
    ("shape", "(16, 32)", (16, 32)),  # a placeholder takes its declared type
    ("shape", "[16]", (16,)),
    ("shape", "None", None),
    ("rate", "1", 1.0),
    ("rate", "nan", float("nan")),
    ("label", "None", None),  # a text placeholder unset again (it stored 'None')
    ("label", "word", "word"),
    ("on", "1", True),
    ("extra", "{'k': dict(a=1), 'l': [dict(b=2)]}", {"k": {"a": 1}, "l": [{"b": 2}]}),
    ("model.posemb", "sine_2d", "sine_2d"),
    ("model.posemb.gamma", "0.5", "fourier(gamma=0.5)"),
    ("model.posemb.hidden_dim", "8", "fourier(gamma=0.25, hidden_dim=8)"),
    ("model.posemb.coords_mode", "index", "fourier(coords_mode='index', gamma=0.25)"),
  ],
)
def test_override_keeps_the_field_type(path, text, value):
  config = _config()
  config_cli.set_field(config, path, text)
  got = config
  for key in path.split(".")[:2]:
    got = got[key] if not isinstance(got, str) else got
  got = got.to_dict() if isinstance(got, ml_collections.ConfigDict) else got
  same = got == value or (got != got and value != value)  # nan
  assert same and type(got) is type(value)


def test_a_string_that_is_no_spec_has_no_options():
  with pytest.raises(ConfigError, match="config.name is a value"):
    config_cli.set_field(_config(), "name.x", "1")
  config = _config()
  config.model.label = "not a spec!"
  with pytest.raises(ConfigError, match="config.model.label is a value"):
    config_cli.set_field(config, "model.label.x", "1")


@pytest.mark.parametrize(
  "path, text, message",
  [
    ("steps", "2.5", "must be an integer"),
    ("lr", "x", "must be a number"),
    ("sizes", "3", "must be a tuple"),
    ("sizes", "((", "must be a Python literal"),
    ("model", "x", "a group of fields"),
    ("shape", "32", r"must be a tuple, e.g. \(32,\)"),  # was a TypeError traceback
    ("shape", "abc", r"must be a tuple, e.g. \(16, 32\)"),
    ("rate", "fast", "must be of type float: it must be a number"),
    ("extra.x", "1", "set it whole, --config.extra=VALUE"),
    ("modle.posemb", "x", "did you mean 'model'"),
  ],
)
def test_bad_overrides_name_the_flag(path, text, message):
  with pytest.raises(ConfigError, match=message) as e:
    config_cli.set_field(_config(), path, text)
  assert f"--config.{path}" in str(e.value)


def test_load_reads_a_config_file_with_its_argument_and_overrides():
  config = config_cli.load(f"{DIGITS}:posemb=sine_2d,small=1", [("total_steps", "7")])
  assert config.model.posemb == "sine_2d" and config.total_steps == 7 and config.model.depth == 1


def test_a_named_evaluation_can_be_added_then_changed_from_the_command_line():
  config = config_cli.load(
    f"{DIGITS}:small=1",
    [("evals.at_32", "{'data': {'image_size': 32}, 'every': 5}"), ("evals.at_32.every", "7")],
  )
  assert config.evals.at_32.to_dict() == {"data": {"image_size": 32}, "every": 7}
  assert config.is_locked  # the rest of the config stays closed to new fields
  with pytest.raises(ConfigError, match=r"--config.evals.x='big': a new named evaluation"):
    config_cli.load(f"{DIGITS}:small=1", [("evals.x", "big")])
  with pytest.raises(ConfigError, match="config.data has no field 'x'"):
    config_cli.load(f"{DIGITS}:small=1", [("data.x", "{'a': 1}")])
  named = config_cli.load(f"{DIGITS}:small=1", [("evals.big", "dict(data=dict(image_size=24))")])
  assert named.evals.big.to_dict() == {"data": {"image_size": 24}}  # evaluation.py's form
  with pytest.raises(ConfigError, match=r"set one at a time, --config.evals.NAME="):
    config_cli.load(f"{DIGITS}:small=1", [("evals", "dict(big=dict(data=dict(image_size=32)))")])


def test_a_model_field_the_config_file_left_out_can_be_set_and_reaches_the_model():
  """FlexiViT's layout from the command line: vit_digits.py names neither field."""
  from lfpe import tasks

  config = config_cli.load(
    f"{DIGITS}:small=1", [("model.posemb_grid", "(4, 4)"), ("model.trained_patch_size", "4")]
  )
  assert "posemb_grid" not in config_cli.load(f"{DIGITS}:small=1").model
  model = tasks.get(config.task).create_model(config)
  assert (model.posemb_grid, model.trained_patch_size, model.patch_size) == ((4, 4), 4, 2)
  assert config.is_locked and config.model.is_locked
  with pytest.raises(ConfigError, match=r"no field 'posemb_gird' \(did you mean 'posemb_grid'"):
    config_cli.load(f"{DIGITS}:small=1", [("model.posemb_gird", "7")])
  with pytest.raises(ConfigError, match=r"sets the model's dtype from config.compute_dtype"):
    config_cli.load(f"{DIGITS}:small=1", [("model.dtype", "'bfloat16'")])


def test_a_task_option_the_config_file_left_out_can_be_set_and_reaches_the_task():
  from lfpe import tasks

  shapes = os.path.join(ROOT, "configs", "detr_shapes.py")
  config = config_cli.load(f"{shapes}:small=1", [("task.bbox_weight", "2")])
  assert "bbox_weight" not in config_cli.load(f"{shapes}:small=1").task
  assert tasks.get(config.task).bbox_weight == 2.0
  with pytest.raises(
    ConfigError, match=r"has no option 'bbox_wieght' \(did you mean 'bbox_weight'"
  ):
    config_cli.load(f"{shapes}:small=1", [("task.bbox_wieght", "2")])


def test_an_evaluation_sets_a_model_field_the_config_file_leaves_out():
  """FlexiViT's evaluation at patch 8 on a config whose patch size is its variant's (B/16)."""
  from lfpe.train import evaluation

  imagenet = os.path.join(ROOT, "configs", "vit_b16_imagenet.py")
  p8 = ("evals.p8", "{'model': {'patch_size': 8}}")
  variants = evaluation.configs(config_cli.load(imagenet, [p8]))
  assert variants["p8"].model.patch_size == 8 and "patch_size" not in variants[""].model
  typo = ("evals.p8", "{'model': {'patch_sise': 8}}")
  with pytest.raises(ConfigError, match=r"p8.model.patch_sise: the vit model has no field"):
    evaluation.configs(config_cli.load(imagenet, [typo]))


def test_naflex_is_set_whole_as_the_docs_write_it():
  """`dict(...)` as README writes it (it was kept as text and failed in `dict(given)`)."""
  text = "dict(patch=2, max_tokens=64, sizes=((16, 16),))"
  config = config_cli.load(f"{DIGITS}:small=1", [("data.naflex", text)])
  assert config.data.naflex.to_dict() == {"patch": 2, "max_tokens": 64, "sizes": ((16, 16),)}


def test_split_overrides_takes_both_forms_in_order():
  argv = ["p", "--config=c.py", "--config.a=1", "--workdir=w", "--config.b.c", "x=y"]
  assert split_overrides(argv) == (
    ["p", "--config=c.py", "--workdir=w"],
    [("a", "1"), ("b.c", "x=y")],
  )


def test_report_interval_is_about_twenty_lines_on_logged_steps():
  assert report_interval(0, 1000, 50) == 50  # 20 lines
  assert report_interval(0, 10_000, 50) == 500
  assert report_interval(0, 60, 50) == 50  # at least one logged step apart
  assert report_interval(30, 1000, 20) == 40  # rounded up to a multiple of log_every
  assert report_interval(0, 6, 2) == 2


def test_format_seconds():
  assert [format_seconds(s) for s in (4.6, 185, 3725)] == ["5s", "3m05s", "1h02m"]


def test_final_line_prefers_the_headline_metric():
  summary = {"step": 9, "eval": {"loss": 1.0, "accuracy": 0.51234}}
  assert final_line(summary, "accuracy", "w") == (
    "lfpe: done at step 9: eval accuracy 0.5123; summary in w/summary.json"
  )
  assert "eval loss 1" in final_line(summary, "AP", "w")  # no such metric: the first one
  assert final_line({"step": 1}, "AP", "w") == "lfpe: done at step 1; summary in w/summary.json"
