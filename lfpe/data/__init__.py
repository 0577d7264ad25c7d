"""Datasets and the input pipeline: TFDS builders read as array_record with grain, no TensorFlow.

`prepare(name, data_dir)` builds a local dataset (e.g. `digits`) offline;
`make_loader(config.data, ...)` yields global batches for training or evaluation.
Needs the `train` extra: `pip install "lfpe[train]"`.
"""

from lfpe.extras import require_extra

require_extra("train", "lfpe.data")

from lfpe.data.base import ArrayBuilder, DatasetSpec
from lfpe.data.builders import DATASETS, data_source, get_spec, prepare
from lfpe.data.config import (
  default_config,
  detection_config,
  detection_info,
  validate_data_config,
)
from lfpe.data.pipeline import EvalLoader, TrainIterator, make_loader

__all__ = [
  "DATASETS",
  "ArrayBuilder",
  "DatasetSpec",
  "EvalLoader",
  "TrainIterator",
  "data_source",
  "default_config",
  "detection_config",
  "detection_info",
  "get_spec",
  "make_loader",
  "prepare",
  "validate_data_config",
]
