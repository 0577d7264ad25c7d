"""Optional dependencies: `pip install lfpe` brings the encodings, layers and models only.

Training, data and the experiments need the extras of pyproject.toml:
  train        orbax-checkpoint, ml_collections, tensorflow-datasets, grain, array_record,
               tensorboardX, tqdm, pillow, turbojpeg, opencv-python-headless (lfpe.train,
               lfpe.data, python -m lfpe.main)
  detection    scipy, pycocotools (the detection task: Hungarian matching, COCO AP)
  captioning   pycocoevalcap (BLEU, ROUGE-L, CIDEr, METEOR)
  experiments  scikit-learn, matplotlib (the digits and photo datasets, probes, plots)
  all          every extra above
  cloud        gcsfs, s3fs (gs:// and s3:// workdirs and data dirs, lfpe.train.workdir)
`require(module, extra, what)` imports a module or raises MissingExtraError, whose one line
names the `pip install` to run (`python -m lfpe.main` prints it and exits 2).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from lfpe.errors import UserError

EXTRAS = {
  "train": (
    "orbax.checkpoint",
    "ml_collections",
    "tensorflow_datasets",
    "grain",
    "array_record",
    "tensorboardX",
    "tqdm",
    "PIL",
    "cv2",
  ),
  "detection": ("scipy", "pycocotools"),
  "captioning": ("pycocoevalcap",),
  "experiments": ("sklearn", "matplotlib"),
}


class MissingExtraError(UserError, ImportError):
  """An optional dependency is not installed; the message names the extra to install."""


def require(module: str, extra: str, what: str) -> ModuleType:
  """`importlib.import_module(module)`, or MissingExtraError naming `lfpe[extra]`."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise MissingExtraError(
      f"{what} needs {module.split('.')[0]!r}, which is not installed: "
      f'pip install "lfpe[{extra}]" (or "lfpe[all]").'
    ) from e


def cloud_message(field: str, path: str, error: ImportError) -> str:
  """The line for a gs:// or s3:// `path` whose filesystem library (gcsfs, s3fs) is missing:
  `error` is etils.epath's ImportError, which names the library."""
  return f'{field}={path} cannot be reached: {error} (pip install "lfpe[cloud]").'


def require_extra(extra: str, what: str) -> None:
  """Every module of `extra` importable, or MissingExtraError for the first that is not."""
  for module in EXTRAS[extra]:
    require(module, extra, what)
