"""FSDP (`mesh.fsdp`): every family's parameters and optimizer slots split over `data`, and a
sharded DETR step (ResNet-style convolutions, heads) equal to the one-device step."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from configs import (
  detr_coco,
  detr_shapes,
  layout_synthetic,
  reformer_imagenet64,
  vit_b16_imagenet,
  widget_caption,
)
from lfpe import tasks
from lfpe.train import program as program_lib
from lfpe.train import sharding

# Position encodings are modules users import into their own models, kept free of sharding
# metadata (lfpe.train.sharding): their parameters are the only ones FSDP may leave whole.
ENCODING_SCOPES = ("pos", "positions", "box_encoding")


def _program(config, data=8, fsdp=True):
  with config.unlocked():
    config.mesh.data, config.mesh.model, config.mesh.fsdp = data, 1, fsdp
  return program_lib.build(config, sharding.make_mesh(config.mesh, jax.devices()[:data]))


def _replicated(prog):
  """{path: (size, ndim)} of the state's leaves replicated on every device."""
  flat = jax.tree_util.tree_flatten_with_path(prog.abstract_state)[0]
  shardings = jax.tree.leaves(prog.state_shardings)
  return {
    jax.tree_util.keystr(path): (int(np.prod(leaf.shape)), leaf.ndim)
    for (path, leaf), s in zip(flat, shardings, strict=True)
    if all(axis is None for axis in s.spec)
  }


@pytest.mark.parametrize(
  "module, arg, share",
  [
    (vit_b16_imagenet, "posemb=fourier", 0.001),
    (detr_coco, "posemb=fourier", 0.002),  # was 58 %: its ResNet, input projection and heads
    (reformer_imagenet64, None, 0.001),
    (widget_caption, None, 0.005),
    (layout_synthetic, None, 0.06),
    (detr_shapes, None, 0.05),
  ],
)
def test_fsdp_splits_every_parameter_but_the_encodings(module, arg, share):
  prog = _program(module.get_config(arg))
  replicated = _replicated(prog)
  whole = [  # matrices and kernels (vectors: biases, norms, DETR's frozen statistics)
    path
    for path, (size, ndim) in replicated.items()
    if ndim >= 2 and size >= 1024 and not any(f"['{s}']" in path for s in ENCODING_SCOPES)
  ]
  assert not whole, whole  # e.g. a ResNet kernel, a head, an input projection
  total = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(prog.abstract_state))
  assert sum(size for size, _ in replicated.values()) / total < share


def test_detr_convolutions_split_their_output_channels():
  prog = _program(detr_coco.get_config("posemb=detr_sine"))
  params = prog.state_shardings.params
  assert params["backbone"]["layer4_0"]["conv2"]["kernel"].spec == P(None, None, None, "data")
  assert params["input_proj"]["kernel"].spec == P(None, None, None, "data")
  assert params["class_head"]["kernel"].spec == P("data", None)
  without = _program(detr_coco.get_config("posemb=detr_sine"), fsdp=False).state_shardings
  assert all(axis is None for axis in without.params["backbone"]["conv1"]["kernel"].spec)


def _detection_batch(config, size=8):
  """A batch of `size` random images, each with two random boxes of random classes."""
  rng = np.random.default_rng(0)
  batch = {
    k: np.repeat(v, size, axis=0) for k, v in tasks.get(config.task).example_batch(config).items()
  }
  batch["image"] = rng.normal(size=batch["image"].shape).astype(np.float32)
  batch["target_valid"][:, :2] = True
  batch["labels"][:, :2] = rng.integers(0, 6, size=(size, 2))
  centres = rng.uniform(0.3, 0.7, size=(size, 2, 2))
  batch["boxes"][:, :2] = np.concatenate([centres, np.full((size, 2, 2), 0.2)], -1)
  return batch


def test_a_sharded_detr_step_equals_the_one_device_step():
  """Two steps of the small DETR with FSDP over 8 devices: the same losses and parameters as
  on one device (XLA gathers each split kernel where it is used)."""
  make = lambda: detr_shapes.get_config("small=1")
  results = []
  for data, fsdp in ((1, False), (8, True)):
    prog = _program(make(), data=data, fsdp=fsdp)
    batch = jax.device_put(_detection_batch(prog.config), prog.data_sharding)
    state, losses = prog.init_state(), []
    for _ in range(2):
      state, metrics = prog.train_step(state, batch, prog.dropout_rng)
      losses.append(float(metrics["loss"]))
    results.append((losses, jax.device_get(state.params)))
  (one_losses, one_params), (fsdp_losses, fsdp_params) = results
  np.testing.assert_allclose(fsdp_losses, one_losses, rtol=1e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), fsdp_params, one_params
  )
