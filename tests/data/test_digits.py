"""digits builder: TF-free array_record build, split sizes, determinism, pixels vs sklearn."""

import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

from lfpe.data import builders, digits


def _read(data_dir, split):
  source = builders.data_source("digits", split, data_dir)
  rows = [source[i] for i in range(len(source))]
  return {k: np.stack([r[k] for r in rows]) for k in ("image", "label", "index")}


def test_builds_as_array_record_without_tensorflow(tmp_path):
  """In a fresh process: this one's sys.modules holds whatever earlier tests imported."""
  code = (
    "import sys\nfrom lfpe import data\n"
    f"data.prepare('digits', {str(tmp_path)!r})\n"
    "print('tensorflow' in sys.modules)\n"
  )
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr
  assert done.stdout.split()[-1] == "False"
  files = os.listdir(tmp_path / "digits" / "1.0.0")
  assert any(".array_record-" in f for f in files)


def test_split_sizes_disjoint_and_stratified(digits_dir):
  train, test = _read(digits_dir, "train"), _read(digits_dir, "test")
  assert (len(train["index"]), len(test["index"])) == (1437, 360)
  assert not set(train["index"]) & set(test["index"])
  assert set(train["index"]) | set(test["index"]) == set(range(1797))
  np.testing.assert_array_equal(np.bincount(test["label"], minlength=10), [36] * 10)


def test_pixels_and_labels_match_sklearn(digits_dir):
  sk = load_digits()
  test = _read(digits_dir, "test")
  assert test["image"].shape == (360, 8, 8, 1) and test["image"].dtype == np.uint8
  expected = np.round(sk.images[test["index"]] * 255 / 16)  # 0..16 -> 0..255
  np.testing.assert_array_equal(test["image"][..., 0], expected)
  np.testing.assert_array_equal(test["label"], sk.target[test["index"]])
  # Hand-checked: 16 maps to 255, 8 to 128 (127.5 rounds to even), 1 to 16.
  assert np.round(np.array([16, 8, 1]) * 255 / 16).tolist() == [255, 128, 16]


def test_build_is_deterministic_and_idempotent(digits_dir, tmp_path):
  assert builders.prepare("digits", str(tmp_path)) == "1.0.0"
  again, first = _read(str(tmp_path), "train"), _read(digits_dir, "train")
  for k in first:
    np.testing.assert_array_equal(again[k], first[k])
  version_dir = tmp_path / "digits" / "1.0.0"
  before = {f: os.path.getmtime(version_dir / f) for f in os.listdir(version_dir)}
  builders.prepare("digits", str(tmp_path))  # Reuses the build.
  assert before == {f: os.path.getmtime(version_dir / f) for f in os.listdir(version_dir)}


def test_split_indices_fixed_seed():
  labels = np.repeat(np.arange(10), 50)
  a, b = digits.split_indices(labels), digits.split_indices(labels)
  np.testing.assert_array_equal(a["test"], b["test"])
  assert len(a["test"]) == 360 and len(a["train"]) == 140


@pytest.mark.parametrize("split", ["validation", "bogus"])
def test_unknown_split_lists_the_splits(digits_dir, split):
  with pytest.raises(ValueError, match=r"'train', 'test'.*`config.data.eval_split`"):
    builders.data_source("digits", split, digits_dir)
