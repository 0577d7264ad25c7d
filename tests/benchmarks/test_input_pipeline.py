"""benchmarks/input_pipeline.py runs every path it times (tiny: 2 images to 32 px)."""

import io

import numpy as np
import PIL.Image
import pytest

from benchmarks import input_pipeline


@pytest.mark.parametrize("name", sorted(input_pipeline.PATHS))
@pytest.mark.parametrize("train", [True, False])
def test_every_path_yields_the_output_size(name, train):
  files = input_pipeline.fabricate(2)
  assert input_pipeline.images_per_second(input_pipeline.PATHS[name], files, 32, train) > 0


def test_lfpe_path_is_the_imagenet_configs_crop():
  """`lfpe`'s train path is `inception_crop(size, antialias=False)` on the encoded JPEG:
  the same pixels as that op of ImageNet's config on the decoded image, same draws."""
  from configs import vit_b16_imagenet  # noqa: PLC0415
  from lfpe.data import ops  # noqa: PLC0415

  (data,) = input_pipeline.fabricate(1)
  crop = ops.parse(vit_b16_imagenet.get_config().data.augment)[0]
  image = np.asarray(PIL.Image.open(io.BytesIO(data)))
  expected = crop.random_map({"image": image}, np.random.default_rng(3))["image"]
  out = input_pipeline.lfpe_train(data, np.random.default_rng(3), 224)
  np.testing.assert_array_equal(out, expected)
