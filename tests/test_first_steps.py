"""scripts/first_steps.py: ViT-B/16's full-scale config trains at its real size on JPEGs in
imagenet2012's TFDS format (the loop alone shrunk), crop decoding included."""

import importlib.util
import math
import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _script():
  spec = importlib.util.spec_from_file_location("first_steps", f"{ROOT}/scripts/first_steps.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules["first_steps"] = module  # its builders' classes need a findable module (TFDS)
  spec.loader.exec_module(module)
  return module


def test_only_the_loop_of_a_full_scale_config_changes(tmp_path):
  script = _script()
  config = script.config_of("detr_coco", str(tmp_path), steps=2, batch=2)
  assert (config.total_steps, config.batch_size, config.mesh.data) == (2, 2, 1)
  assert config.model.variant == "R50" and config.data.name == "coco/2017"
  assert config.data.data_dir == str(tmp_path)
  config = script.config_of("reformer_imagenet64", str(tmp_path), steps=2, batch=2)
  assert config.data.eval_split == "validation"  # not the real split's first 10,000


@pytest.mark.slow
def test_vit_b16_imagenet_trains_its_first_steps_at_full_size(tmp_path):
  result = _script().first_steps("vit_b16_imagenet", str(tmp_path), steps=1, batch=2)
  assert result["summary"]["step"] == 1 and math.isfinite(result["summary"]["train"]["loss"])
  assert 86e6 < result["params"] < 87e6  # ViT-B/16 with a 1000-way head
