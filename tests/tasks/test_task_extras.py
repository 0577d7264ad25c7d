"""A task whose evaluation needs an extra (COCO AP: pycocotools; caption scores:
pycocoevalcap) says it is missing with the config, before a dataset is built or a step runs
(it used to be said at the first evaluation, after training)."""

import importlib

import pytest

from configs import detr_shapes, widget_caption
from lfpe.errors import UserError
from lfpe.train import trainer


@pytest.mark.parametrize(
  "config, module", [(detr_shapes, "pycocotools"), (widget_caption, "pycocoevalcap")]
)
def test_a_missing_evaluation_extra_is_said_with_the_config(config, module, monkeypatch):
  real = importlib.import_module

  def without(name, *args):
    if name.startswith(module):
      raise ImportError(name)
    return real(name, *args)

  monkeypatch.setattr(importlib, "import_module", without)
  with pytest.raises(UserError, match=f"needs '{module}'.*pip install"):
    trainer.checked_task_and_model(config.get_config("small=1"), 1, check_data=False)
