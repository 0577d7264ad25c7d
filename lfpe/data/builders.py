"""The dataset registry, and reading any registered dataset with `tfds.data_source`.

`DATASETS` maps names to `DatasetSpec`s. Local datasets (a builder file in this folder, such
as `digits.py`) are built offline by `prepare`. Catalog datasets come from the TFDS catalog:
they must be prepared once as `array_record` in `data_dir` (TensorFlow is needed only for
that step); when they are missing, the error says exactly how. Both kinds are then read the
same way, from files, with `tfds.data_source` (no TensorFlow, no builder code).

Adding a local dataset: write `lfpe/data/NAME.py` with an `ArrayBuilder` and a `SPEC`
(see `digits.py`), and add `NAME.SPEC` to `_LOCAL` below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent import futures

import tensorflow_datasets as tfds
from array_record.python import array_record_module
from etils import epath

from lfpe import extras
from lfpe.data import (
  base,
  crops,
  detection_ops,
  digit_images,
  digits,
  jpeg,
  redgreen,
  screens,
  shape_layout,
  shapes,
  widget_caption,
)
from lfpe.errors import (
  ConfigError,
  DatasetDamagedError,
  DatasetMissingError,
  UserError,
  did_you_mean,
)

_BUILD = (  # `tfds build` imports apache_beam; the Python route needs importlib_resources
  "  pip install tensorflow tensorflow-datasets apache-beam importlib_resources"
  "  # or: pip install 'lfpe[prepare]'\n"
  "  tfds build {name} --data_dir={data_dir} --file_format=array_record\n"
  "or, from Python:\n"
  '  python -c "import tensorflow_datasets as tfds; '
  "tfds.builder('{name}', data_dir='{data_dir}', file_format='array_record')"
  '.download_and_prepare()"\n'
)
_IMAGENET_MANUAL = (
  "  Download ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar (registration at "
  "https://image-net.org/download-images) into {data_dir}/downloads/manual/, then:\n"
)

_CATALOG = (
  base.DatasetSpec("cifar10", 10, (32, 32, 3), instructions=_BUILD),
  base.DatasetSpec(
    "imagenet2012", 1000, None, eval_split="validation", instructions=_IMAGENET_MANUAL + _BUILD
  ),
  base.DatasetSpec(
    "imagenet_resized/64x64", 1000, (64, 64, 3), eval_split="validation", instructions=_BUILD
  ),
  base.DatasetSpec(
    "downsampled_imagenet/64x64",
    256,  # sub-pixel values: the vocabulary of autoregressive generation
    (64, 64, 3),
    fields=("image",),
    eval_split="validation",
    preprocess="",
    instructions=(
      "  Note: image-net.org no longer serves the two files TFDS's builder downloads "
      "(http://image-net.org/small/train_64x64.tar and valid_64x64.tar), so the download step "
      "fails unless you hold a copy of them; `imagenet_resized/64x64` "
      "(--config.data.name=imagenet_resized/64x64) is TFDS's other 64x64 ImageNet.\n" + _BUILD
    ),
  ),
  base.DatasetSpec(
    "coco/2017",
    80,
    None,
    fields=("image", "objects"),
    eval_split="validation",
    preprocess="boxes(100)|resize_pad({size})|value_range(0, 1)",
    instructions=_BUILD,
  ),
)
_LOCAL = (digits.SPEC, *redgreen.SPECS, *shapes.SPECS, *crops.SPECS, *digit_images.SPECS)
_LOCAL += screens.SPECS + shape_layout.SPECS
_LOCAL += (widget_caption.SPEC,)  # built offline from a manual download (its message if missing)

DATASETS: dict[str, base.DatasetSpec] = {spec.name: spec for spec in _LOCAL + _CATALOG}
# Detection datasets (`data.detection` by default), with the sizes and most objects they hold.
# `coco/2017` is read with the `boxes|resize_pad` ops unless `data.detection` is set.
DETECTION: dict[str, detection_ops.Limits] = dict(shapes.LIMITS)


def get_spec(name: str) -> base.DatasetSpec:
  """The `DatasetSpec` of `name`; ValueError listing the known names otherwise."""
  if name not in DATASETS:
    raise ValueError(
      f"Unknown dataset `data.name`={name!r}{did_you_mean(name, DATASETS)}; use one of "
      f"{sorted(DATASETS)}, or add a "
      "builder file to lfpe/data/ and its SPEC to lfpe/data/builders.py."
    )
  return DATASETS[name]


def prepared_version(name: str, data_dir: str) -> str | None:
  """The newest version of `name` prepared as array_record in `data_dir`, else None."""
  versions = [
    v for v in _version_dirs(name, data_dir) if _has_files(name, data_dir, v, "array_record")
  ]
  return max(versions, key=_version_key, default=None)


def prepare(name: str, data_dir: str) -> str:
  """Makes `name` readable from `data_dir`; returns the prepared version.

  Local datasets are built when missing (idempotent: an existing build is reused;
  `widget_caption` is built from a manual download, and raises DatasetMissingError saying
  where to put it when that is missing). Catalog datasets raise DatasetMissingError (a
  FileNotFoundError) with the commands that prepare them. Several processes sharing one
  `data_dir` should call this on one process first (or use per-host dirs); two that build
  the same generated dataset at once both succeed (TFDS renames a finished build into place,
  and the one that loses the rename reuses the winner's).
  """
  spec = get_spec(name)
  if spec.builder is not None:
    version = str(spec.builder.VERSION)
    if version not in _version_dirs(name, data_dir):
      try:
        spec.builder(data_dir=data_dir).download_and_prepare()
      except FileExistsError:  # another process renamed its identical build in first
        if version not in _version_dirs(name, data_dir):
          raise
      except UserError:  # e.g. a manual download missing: its own message
        raise
      except OSError as e:  # a data_dir that cannot be created or written
        raise ConfigError(
          f"config.data.data_dir={data_dir!r}: building {name} there failed ({e}); lfpe "
          "builds it on first use: give a folder it can write."
        ) from e
    return version
  version = prepared_version(name, data_dir)
  if version is None:
    raise DatasetMissingError(missing_message(spec, data_dir))
  return version


def data_source(name: str, split: str, data_dir: str, encoded_images: bool = False):
  """`tfds.data_source` over `split` of `name` (prepared first if it is local).

  Returns a random-access source (`len`, `source[i]` -> dict of numpy features). With
  `encoded_images`, an image feature stays undecoded: rows carry `jpeg.Encoded` images for
  an op that decodes only what it keeps (`inception_crop`).
  """
  version = prepare(name, data_dir)
  try:
    builder = tfds.builder(f"{name}:{version}", data_dir=data_dir, file_format="array_record")
    feature = builder.info.features["image"] if "image" in builder.info.features else None
    if not (encoded_images and isinstance(feature, tfds.features.Image)):
      source = builder.as_data_source(split=split)
    else:
      raw = builder.as_data_source(split=split, decoders={"image": tfds.decode.SkipDecoding()})
      source = jpeg.EncodedImages(raw, channels=feature.shape[-1])
  except ValueError as e:  # TFDS names the splits there are.
    raise ConfigError(
      f"{name!r}: {e} Set `config.data.train_split` / `config.data.eval_split` (or an "
      "evaluation's) to one of them (TFDS slicing such as 'train[:90%]' works too)."
    ) from e
  message = _damaged_message(get_spec(name), data_dir, version)
  if "://" not in data_dir:  # array_record's reader opens local files only
    _check_shards(builder.info.splits[split].file_instructions, message)
  return CheckedReads(source, message)


def _check_shards(files: Sequence, message: str) -> None:
  """DatasetDamagedError unless every shard of the split opens and holds the records that
  dataset_info.json counts. array_record raises nothing for a truncated shard (its reader is
  only not `ok()`), and TFDS would read the missing records as empty bytes: garbage, or a
  TypeError deep in a decoder."""

  def count(path: str) -> int | str:
    if not epath.Path(path).exists():
      return "is missing"
    reader = array_record_module.ArrayRecordReader(path, "readahead_buffer_size:0")
    if not reader.ok():  # e.g. truncated: the footer that indexes the records is gone
      return "is not a readable array_record file"
    try:
      return reader.num_records()
    finally:
      reader.close()

  paths = sorted({f.filename: f.examples_in_shard for f in files}.items())
  with futures.ThreadPoolExecutor(16) as pool:  # ImageNet has 1,024 shards
    counts = list(pool.map(count, [path for path, _ in paths]))
  for (path, expected), found in zip(paths, counts, strict=True):
    if found != expected:
      why = found if isinstance(found, str) else f"holds {found} of its {expected} records"
      raise DatasetDamagedError(message.format(error=f"{epath.Path(path).name} {why}"))


# array_record's RuntimeErrors for a shard that is truncated or corrupted, or was deleted.
_DAMAGED_FILE = re.compile(r"Riegeli|open\(\) failed")


class CheckedReads:
  """A prepared split whose damaged or deleted files raise DatasetDamagedError, naming the
  folder and how to prepare it again, rather than array_record's bare RuntimeError (found
  at the first read of the file, which may be mid-run for a large dataset)."""

  def __init__(self, source: Sequence, message: str):
    self._source, self._message = source, message  # a string: picklable for grain's workers

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index: int):
    try:
      return self._source[index]
    except RuntimeError as e:
      if not _DAMAGED_FILE.search(str(e)):
        raise
      raise DatasetDamagedError(self._message.format(error=f"{type(e).__name__}: {e}")) from e


def _damaged_message(spec: base.DatasetSpec, data_dir: str, version: str) -> str:
  """DatasetDamagedError's text for `spec` (with an `{error}` field): rebuilt by the next run
  (a local dataset) or prepared again (a catalog one)."""
  folder = epath.Path(data_dir) / spec.name / version
  head = (
    f"Dataset {spec.name!r} in {folder} cannot be read: a file is damaged or missing ({{error}})."
  )
  if spec.builder is not None:
    return head + f" Delete {folder}; the next run builds it again."
  how = (
    spec.instructions.format(name=spec.name, data_dir=data_dir)
    .replace("{", "{{")
    .replace("}", "}}")
  )
  return head + f" Delete {folder} and prepare it again:\n" + how


def missing_message(spec: base.DatasetSpec, data_dir: str) -> str:
  """Why `spec` cannot be read from `data_dir`, and the exact commands that fix it."""
  root = epath.Path(data_dir) / spec.name
  text = (
    f"Dataset {spec.name!r} is not prepared as array_record in {root}.\n"
    "Prepare it once (TensorFlow is needed only for this preparation step; lfpe reads "
    "the prepared files with tfds.data_source and grain, without TensorFlow):\n"
    + spec.instructions.format(name=spec.name, data_dir=data_dir)
  )
  tfrecord = [
    v for v in _version_dirs(spec.name, data_dir) if _has_files(spec.name, data_dir, v, "tfrecord")
  ]
  if tfrecord:
    text += (
      f"A TFRecord copy exists ({root}/{tfrecord[0]}); converting it is enough:\n"
      f"  tfds convert_format --dataset_version_dir={root}/{tfrecord[0]} "
      "--out_file_format=array_record\n"
    )
  return text


def _version_dirs(name: str, data_dir: str) -> list[str]:
  """The versions of `name` in `data_dir` that have a dataset_info.json. Through `epath`, so a
  remote data_dir (gs://, s3://: whatever TFDS reads) is searched as a local one."""
  root = epath.Path(data_dir) / name
  try:
    if not root.is_dir():
      return []
  except ImportError as e:  # epath's, for a gs:// or s3:// data_dir without gcsfs or s3fs
    raise ConfigError(extras.cloud_message("config.data.data_dir", data_dir, e)) from None
  return [
    v.name
    for v in root.iterdir()
    if re.fullmatch(r"\d+\.\d+\.\d+", v.name) and (v / "dataset_info.json").exists()
  ]


def _has_files(name: str, data_dir: str, version: str, file_format: str) -> bool:
  return any(
    f".{file_format}-" in f.name for f in (epath.Path(data_dir) / name / version).iterdir()
  )


def _version_key(version: str) -> Sequence[int]:
  return tuple(int(x) for x in version.split("."))
