"""What every dataset shares: its `DatasetSpec`, and a TFDS builder base that needs no TensorFlow.

A local dataset is one small file: subclass `ArrayBuilder`, return its splits as numpy
arrays from `_load_arrays`, and export a `SPEC` that `builders.DATASETS` lists. The base
class writes `array_record` files (read back with `tfds.data_source` and grain) and hands
images to TFDS as PIL images: TFDS encodes numpy images with TensorFlow, PIL images with PIL.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from collections.abc import Callable, Mapping

import numpy as np
import PIL.Image
import tensorflow_datasets as tfds
from etils import epath


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """What the pipeline needs to know about one dataset.

  Attributes:
    name: TFDS name, with its config where it has one (`imagenet_resized/64x64`).
    num_classes: number of classes of `label` (detection: of the box labels).
    image_shape: native `(H, W, C)`; None when the images vary in size.
    fields: the raw features read from each record; all others are dropped first.
    train_split, eval_split: default TFDS splits (any TFDS split string works).
    preprocess: the default preprocessing ops (see `ops.py`); `{size}` stands for
      `data.image_size`.
    builder: the local `ArrayBuilder` class that `prepare` builds offline; None for
      a TFDS catalog dataset, which must be prepared beforehand.
    instructions: catalog only, how to prepare it; `{data_dir}` is filled in.
    sizes: other sizes a model needs from the data (vocabularies, coordinate bins, object
      types), `{model field: size}`; the task passes them to the model.
    draw: None, or `draw(record, size)`: the record's image drawn natively at `size` px
      from the fields it stores (procedural scenes); mixed-resolution training
      (`data.train_sizes`) then draws each example at its batch's size instead of resizing.
  """

  name: str
  num_classes: int
  image_shape: tuple[int, int, int] | None
  fields: tuple[str, ...] = ("image", "label")
  train_split: str = "train"
  eval_split: str = "test"
  preprocess: str = "resize({size})|value_range(0, 1)"
  builder: type[ArrayBuilder] | None = None
  instructions: str = ""
  sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)
  draw: Callable[[Mapping, int], np.ndarray] | None = None


class ArrayBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A TFDS builder over in-memory numpy arrays, written as `array_record` without TF.

  Subclasses set `VERSION`, `RELEASE_NOTES`, `DESCRIPTION` (and optionally `HOMEPAGE`,
  `CITATION`) and implement `_features` and `_load_arrays`. Builds are deterministic:
  record keys are the row numbers, and TFDS orders records by a hash of the key.
  """

  DESCRIPTION = ""
  HOMEPAGE = ""
  CITATION = ""

  def __init__(self, **kwargs):
    kwargs.setdefault("file_format", "array_record")
    super().__init__(**kwargs)

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    """The builder's file (TFDS's own lookup needs `importlib_resources`, not installed)."""
    return epath.Path(inspect.getfile(cls))

  @abc.abstractmethod
  def _features(self) -> dict[str, tfds.features.FeatureConnector]:
    """The features of one example, e.g. `{'image': Image(...), 'label': ClassLabel(...)}`."""

  @abc.abstractmethod
  def _load_arrays(self) -> dict[str, dict[str, np.ndarray]]:
    """`{split: {feature: [N, ...] array}}`; images as uint8 `[N, H, W, C]`."""

  def _info(self) -> tfds.core.DatasetInfo:
    features = self._features()
    supervised = ("image", "label") if {"image", "label"} <= set(features) else None
    return LocalInfo(
      builder=self,
      description=self.DESCRIPTION,
      features=tfds.features.FeaturesDict(features),
      supervised_keys=supervised,
      homepage=self.HOMEPAGE,
      citation=self.CITATION,
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # Everything is generated locally.
    return {split: self._generate_examples(arrays) for split, arrays in self._load_arrays().items()}

  def _generate_examples(self, arrays: dict[str, np.ndarray]):
    features = self.info.features
    sizes = {len(v) for v in arrays.values()}
    if len(sizes) != 1:
      raise ValueError(f"{self.name}: all arrays of a split need the same length, got {sizes}.")
    for i in range(sizes.pop()):
      yield i, {k: _encode(features[k], v[i]) for k, v in arrays.items()}


def with_config(builder: type[ArrayBuilder], config: str) -> type[ArrayBuilder]:
  """`builder` (a TFDS builder with BUILDER_CONFIGS) defaulting to its config `config`: what
  `builders.prepare` instantiates, as `builder(data_dir=...)`, for the dataset NAME/config."""

  def __init__(self, **kwargs):
    kwargs.setdefault("config", config)
    builder.__init__(self, **kwargs)

  attributes = {"__init__": __init__, "name": builder.name}
  return type(f"{builder.__name__}_{config}", (builder,), attributes, skip_registration=True)


class LocalInfo(tfds.core.DatasetInfo):
  """DatasetInfo of a dataset built here: TFDS's bucket holds nothing for it, so there is
  nothing to fetch (TFDS would make an empty temp dir, left behind, for each new builder)."""

  def initialize_from_bucket(self) -> None:
    pass


def _encode(feature: tfds.features.FeatureConnector, value: np.ndarray):
  """PIL images for image features (TFDS would encode numpy images with TF)."""
  if isinstance(feature, tfds.features.Image):
    value = np.asarray(value, np.uint8)
    return PIL.Image.fromarray(value[..., 0] if value.shape[-1] == 1 else value)
  return value
