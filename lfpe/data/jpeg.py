"""Decoding only the crop window of a JPEG: the training crop's fast path.

An Inception crop keeps on average about half of an image. TensorFlow's
`decode_and_crop_jpeg` (big_vision's `decode_jpeg_and_inception_crop`) decodes only that
window; a full decode then a crop pays for the rest (benchmarks/README.md, "ImageNet input
pipeline per core": 1.8x per core here). `decode_crop` does what TensorFlow does through
TurboJPEG 3's partial decompression (`tj3SetCroppingRegion`): the window is widened left to
whole iMCU columns, decoded, and sliced exactly. The library is the one the `turbojpeg`
wheel bundles (in lfpe[train]; any libjpeg-turbo >= 3 named by `LFPE_TURBOJPEG` works too).
Without it, or for data that is not a baseline or progressive JPEG TurboJPEG reads (PNG,
CMYK), Pillow decodes the whole image and the window is cut from it: the same pixels
(tests/data/test_jpeg.py).

`EncodedImages` wraps a TFDS source read with its image feature undecoded, so that the
first op (`inception_crop`) gets an `Encoded` image and decodes only what it keeps.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import glob
import importlib.util
import io
import os
import threading

import numpy as np
import PIL.Image

_MCU_WIDTH = (8, 16, 16, 8, 8, 32, 8)  # iMCU width per TJSAMP (444, 422, 420, gray, ...)
_DECOMPRESS, _SUBSAMP, _WIDTH, _HEIGHT, _RGB, _GRAY = 1, 4, 5, 6, 0, 6  # TurboJPEG 3 enums
_SAMP_GRAY = 3


@dataclasses.dataclass(frozen=True)
class Encoded:
  """An image as its file's bytes, and the channels (1 or 3) its feature decodes to."""

  data: bytes
  channels: int = 3


class _Region(ctypes.Structure):
  _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("w", ctypes.c_int), ("h", ctypes.c_int)]


def _library_path() -> str | None:
  """LFPE_TURBOJPEG, else the libturbojpeg bundled with the `turbojpeg` wheel, else None."""
  if path := os.environ.get("LFPE_TURBOJPEG"):
    return path
  spec = importlib.util.find_spec("turbojpeg")
  if spec is None or not spec.origin:
    return None
  site = os.path.dirname(spec.origin)
  found = sorted(glob.glob(os.path.join(site, "turbojpeg*", "libturbojpeg*")))
  return found[0] if found else None


class _TurboJpeg:
  """TurboJPEG 3's decompressor; one handle per thread (handles are not thread-safe)."""

  def __init__(self, path: str):
    lib = ctypes.CDLL(path)
    lib.tj3Init.restype, lib.tj3Init.argtypes = ctypes.c_void_p, [ctypes.c_int]
    lib.tj3DecompressHeader.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.tj3Get.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.tj3SetCroppingRegion.argtypes = [ctypes.c_void_p, _Region]
    lib.tj3Decompress8.argtypes = [
      ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int,
      ctypes.c_int,
    ]  # fmt: skip
    self._lib, self._local = lib, threading.local()

  def _handle(self) -> int:
    if getattr(self._local, "handle", None) is None:
      self._local.handle = self._lib.tj3Init(_DECOMPRESS)
    return self._local.handle

  def header(self, data: bytes) -> tuple[int, int, int] | None:
    """(height, width, subsampling) of a JPEG TurboJPEG reads, else None."""
    handle = self._handle()
    if self._lib.tj3DecompressHeader(handle, data, len(data)) != 0:
      return None
    subsamp = self._lib.tj3Get(handle, _SUBSAMP)
    if not 0 <= subsamp < len(_MCU_WIDTH):
      return None
    return self._lib.tj3Get(handle, _HEIGHT), self._lib.tj3Get(handle, _WIDTH), subsamp

  def decode_crop(self, data: bytes, box, head: tuple[int, int, int], channels: int):
    """`[h, w, channels]` uint8 of the window box = (top, left, h, w), or None if it fails."""
    top, left, h, w = box
    mcu = _MCU_WIDTH[head[2]]
    # Whole iMCU columns (the left edge must start one), each edge widened past the column
    # next to it: chroma upsampling at the window's first and last pixels then sees their
    # real neighbours instead of a replicated edge, so the pixels are exact.
    x0, x1 = max(0, (left - 1) // mcu * mcu), min(head[1], ((left + w) // mcu + 1) * mcu)
    handle = self._handle()
    if self._lib.tj3SetCroppingRegion(handle, _Region(x0, top, x1 - x0, h)) != 0:
      return None
    out = np.empty((h, x1 - x0, channels), np.uint8)
    fmt = _RGB if channels == 3 else _GRAY
    if self._lib.tj3Decompress8(handle, data, len(data), out.ctypes.data, 0, fmt) != 0:
      return None
    return out[:, left - x0 : left - x0 + w]


@functools.cache
def _turbo() -> _TurboJpeg | None:
  """The TurboJPEG decoder, loaded once per process; None without a TurboJPEG 3 library."""
  path = _library_path()
  try:
    return _TurboJpeg(path) if path else None
  except (OSError, AttributeError):  # no such file, or not TurboJPEG 3: Pillow decodes
    return None


def available() -> bool:
  """Whether crop decoding goes through TurboJPEG (else Pillow's full decode)."""
  return _turbo() is not None


def _pillow(image: Encoded) -> PIL.Image.Image:
  return PIL.Image.open(io.BytesIO(image.data))


def _header(image: Encoded) -> tuple[int, int, int | None]:
  """(height, width, TurboJPEG subsampling, or None where Pillow must decode)."""
  if (turbo := _turbo()) and (head := turbo.header(image.data)):
    return head
  width, height = _pillow(image).size
  return height, width, None


def size(image: Encoded) -> tuple[int, int]:
  """(height, width), read from the header only."""
  return _header(image)[:2]


def decode_crop(image: Encoded, top: int, left: int, h: int, w: int) -> np.ndarray:
  """`[h, w, channels]` uint8: the window (top, left, h, w) of the image, decoding only it
  where TurboJPEG can (see the module docstring)."""
  height, width, subsamp = _header(image)
  if not (0 <= top and 0 <= left and 0 < h <= height - top and 0 < w <= width - left):
    box = (top, left, h, w)
    raise ValueError(f"decode_crop: window {box} is outside the {height}x{width} image.")
  out = None
  if subsamp is not None and (image.channels == 3 or subsamp == _SAMP_GRAY):
    # (a colour JPEG wanted gray: Pillow's luma from RGB, not TurboJPEG's Y, for one answer)
    head = (height, width, subsamp)
    out = _turbo().decode_crop(image.data, (top, left, h, w), head, image.channels)
  if out is None:
    out = np.asarray(_pillow(image).convert("RGB" if image.channels == 3 else "L"))
    out = out.reshape(height, width, image.channels)[top : top + h, left : left + w]
  return out


class EncodedImages:
  """A source whose rows carry `image` as `Encoded` (the source reads it undecoded)."""

  def __init__(self, source, channels: int):
    self._source, self._channels = source, channels

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index):
    row = self._source[index]
    return {**row, "image": Encoded(bytes(row["image"]), self._channels)}

  def __repr__(self) -> str:
    return f"EncodedImages({self._source!r})"
