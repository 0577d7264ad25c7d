"""The registry: every name builds, runs through Flax NNX, declares true capabilities."""

import pathlib
import re
import types

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lfpe import encodings
from lfpe.encodings import registry, rotary

SHAPE, DIM, HEADS, HEAD_DIM = (4, 6), 16, 2, 8
PUBLIC = encodings.NAMES  # every name and alias the registry found


def _module_and_args(name):
  module = encodings.build(
    name, dim=DIM, grid_shape=SHAPE, num_heads=HEADS, head_dim=HEAD_DIM, ndim=2
  )
  n = int(np.prod(SHAPE))
  kind = encodings.kind(name)
  if kind == "absolute":
    return module, (module.grid_coords(SHAPE),), (n, DIM)
  if kind == "bias":
    return module, (SHAPE,), (HEADS, n, n)
  if kind == "logits":
    return module, (jnp.ones((1, n, HEADS, HEAD_DIM)), SHAPE), (1, HEADS, n, n)
  if kind == "rotary":
    return (
      module,
      (jnp.ones((1, n, HEADS, HEAD_DIM)), module.grid_coords(SHAPE)),
      (1, n, HEADS, HEAD_DIM),
    )
  return module, (), None


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_creates_a_linen_module(name):
  module, args, out_shape = _module_and_args(name)
  assert isinstance(module, nn.Module)
  assert encodings.kind(name) in encodings.KINDS
  if out_shape is None:
    assert module.apply({}, *args) is None
    return
  variables = module.init(jax.random.key(0), *args)
  out = module.apply(variables, *args)
  assert out.shape == out_shape
  assert bool(jnp.all(jnp.isfinite(out)))


@pytest.mark.parametrize("name", [n for n in PUBLIC if n not in ("none", "sine_4d", "embed_4d")])
def test_every_module_runs_from_flax_nnx_via_bridge(name):
  module, args, out_shape = _module_and_args(name)
  # The bridge traces every argument, so grid shapes (static) come from `grid_shape`.
  args = tuple(a for a in args if not isinstance(a, tuple))
  bridged = nnx.bridge.ToNNX(module, rngs=nnx.Rngs(0))
  nnx.bridge.lazy_init(bridged, *args)
  nnx_out = bridged(*args)
  assert nnx_out.shape == out_shape
  # The same variables through linen give the same output: the bridge changes nothing.
  nnx_vars = nnx.to_pure_dict(nnx.state(bridged))
  linen_vars = jax.eval_shape(module.init, jax.random.key(0), *args)
  same = {col: {k: nnx_vars[k] for k in tree} for col, tree in linen_vars.items()}
  np.testing.assert_allclose(nnx_out, module.apply(same, *args), rtol=1e-6, atol=1e-6)


def test_absolute_grid_equals_call_on_grid_coords():
  module = encodings.create("fourier", dim=DIM)
  coords = module.grid_coords(SHAPE)
  variables = module.init(jax.random.key(1), coords)
  np.testing.assert_array_equal(
    module.apply(variables, SHAPE, method=module.grid), module.apply(variables, coords)
  )


def test_unknown_name_lists_the_valid_names():
  with pytest.raises(ValueError, match="Unknown positional encoding 'fourrier'.*fourier.*sine_2d"):
    encodings.create("fourrier", dim=8)


def test_aliases_resolve_to_their_family():
  assert encodings.resolve("sine_2d") is encodings.resolve("sine_nd")
  assert encodings.resolve("embed_4d") is encodings.resolve("embed_nd")
  assert set(PUBLIC) <= set(encodings.NAMES)


def test_build_passes_only_declared_fields():
  module = encodings.build("sine_2d", dim=32, grid_shape=(3, 3), num_heads=4, unrelated=1)
  assert module.dim == 32
  assert not hasattr(module, "unrelated")


@pytest.mark.parametrize("name", [n for n in PUBLIC if encodings.kind(n) == "absolute"])
def test_reads_boxes_is_true_to_the_module(name):
  """An encoding declared to read 4-D boxes maps them to [N, D]; any other refuses them."""
  module = encodings.build(name, dim=DIM, grid_shape=(8, 8, 8, 8), ndim=4, parent=None)
  box = jnp.zeros((3, 4))
  if encodings.info(name).reads_boxes:
    variables = jax.eval_shape(module.init, jax.random.key(0), box)
    assert jax.eval_shape(module.apply, variables, box).shape == (3, DIM)
  else:
    with pytest.raises(ValueError, match="last dimension"):
      jax.eval_shape(module.init, jax.random.key(0), box)


@pytest.mark.parametrize("name", PUBLIC)
def test_resolution_free_means_no_table(name):
  """Resolution-free encodings hold no parameter whose size grows with the grid."""
  module, args, _ = _module_and_args(name)
  if encodings.kind(name) == "none":
    return

  def size(module, args):
    shapes = jax.eval_shape(lambda key: module.init(key, *args), jax.random.key(0))
    return sum(x.size for x in jax.tree.leaves(shapes))

  sizes = [size(module, args), size(*_module_and_args_on(name, (8, 12))[:2])]
  assert (sizes[0] == sizes[1]) == encodings.info(name).resolution_free, sizes


def _module_and_args_on(name, shape):
  module = encodings.build(name, dim=DIM, grid_shape=shape, num_heads=HEADS, head_dim=HEAD_DIM)
  n = int(np.prod(shape))
  kind = encodings.kind(name)
  args = {
    "absolute": lambda: (module.grid_coords(shape),),
    "bias": lambda: (shape,),
    "logits": lambda: (jnp.ones((1, n, HEADS, HEAD_DIM)), shape),
    "rotary": lambda: (jnp.ones((1, n, HEADS, HEAD_DIM)), module.grid_coords(shape)),
  }[kind]()
  return module, args, None


def test_a_module_declares_its_names_once():
  from lfpe.encodings import registry  # noqa: PLC0415

  def module(name, *entries):
    return types.SimpleNamespace(__name__=name, ENCODINGS=entries)

  new = encodings.Registration("my_pe", encodings.SineND, aliases=("mine",), reads_boxes=True)
  found = registry.collect([module("a", encodings.REGISTRATIONS["fourier"]), module("b", new)])
  assert list(found) == ["fourier", "my_pe"] and found["my_pe"].kind == "absolute"
  clash = encodings.Registration("fresh", encodings.SineND, aliases=("learnable_fourier_mlp",))
  with pytest.raises(ValueError, match="'learnable_fourier_mlp' of b is taken by 'fourier'"):
    registry.collect([module("a", encodings.REGISTRATIONS["fourier"]), module("b", clash)])


def test_display_names_are_one_map_with_a_label_for_every_name():
  """Every encoding of lfpe declares its labels; names and aliases map to them one to one, and
  options follow in brackets (reports and figures print these and nothing else)."""
  labels = {}
  for entry in encodings.REGISTRATIONS.values():
    assert len(entry.labels) == 1 + len(entry.aliases), entry.name
    for name in (entry.name, *entry.aliases):
      labels[name] = encodings.display_name(name)
  assert labels["sine_2d"] == "Sine-2D" and labels["detr_sine"] == "Sine-2D (DETR)"
  assert labels["fourier"] == labels["learnable_fourier_mlp"] == "Learnable-Fourier+MLP"
  assert len(set(labels.values())) == len(labels) - 1  # only the alias of `fourier` repeats
  assert encodings.display_name("fourier(gamma=16.0)") == "Learnable-Fourier+MLP (gamma=16.0)"
  with pytest.raises(ValueError, match="Unknown positional encoding"):
    encodings.display_name("foureir")


def test_labels_must_match_the_names():
  from lfpe.encodings import registry  # noqa: PLC0415

  bad = encodings.Registration("my_pe", encodings.SineND, aliases=("mine",), labels=("My PE",))
  with pytest.raises(ValueError, match="one display label per name and alias"):
    registry.collect([types.SimpleNamespace(__name__="b", ENCODINGS=(bad,))])


def test_every_registered_class_is_exported():
  for cls in encodings.module_classes():
    assert getattr(encodings, cls.__name__) is cls and cls.__name__ in encodings.__all__


def test_the_readme_table_is_the_registry():
  readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
  assert encodings.registry.markdown_table() in readme


def test_create_refuses_an_option_given_twice_with_two_values():
  with pytest.raises(ValueError, match=r"option 'dim' is given twice, 8 in the spec and dim=16"):
    encodings.create("fourier(dim=8)", dim=16)
  assert encodings.create("fourier(dim=8)", dim=8).dim == 8  # the same value twice is one


def test_mixed_rope_without_num_heads_says_it_needs_them():
  with pytest.raises(ValueError, match=r"mode='mixed' learns frequencies per head, so it needs"):
    encodings.create("rope_mixed", head_dim=8)


def test_the_docs_table_of_what_each_encoding_computes_matches_the_registry():
  """docs/encodings.md's table is hand-written prose, but its names, modules and kinds must
  be the registry's: every registered name (and alias) once, with its module class and kind."""
  docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "encodings.md"
  lines = docs.read_text().split("| name (aliases) | module | kind |")[1].split("\n\n")[0]
  rows = [line.split(" | ") for line in lines.splitlines()[2:] if line.startswith("| `")]
  listed = {}
  for first, module, kind, *_ in rows:
    for name in re.findall(r"`(\w+)`", first):
      assert name not in listed, f"{name} is listed twice"
      listed[name] = (module.strip("`").split("(")[0], kind)
  assert sorted(listed) == sorted(registry.NAMES)
  for name, (module, kind) in listed.items():
    assert registry.info(name).module_class.__name__ == module, name
    assert registry.info(name).kind == kind, name


def test_with_options_is_the_one_formatter_of_a_changed_spec():
  assert encodings.with_options("fourier(gamma=0.25)", gamma=0.5) == "fourier(gamma=0.5)"
  assert encodings.with_options("embed_1d", resample_method="bicubic", antialias=False) == (
    "embed_1d(antialias=False, resample_method='bicubic')"
  )
  assert encodings.with_options("sine_2d") == "sine_2d"


@pytest.mark.parametrize("name", encodings.NAMES)
def test_each_scale_knob_is_an_option_at_its_real_default(name):
  """A declared knob names an option of the encoding, and its default is the value the module
  uses when the option is not given (RoPE's None resolves to Heo's θ per mode)."""
  found = encodings.knob(name)
  if found is None:
    return
  option, default = found
  assert option in encodings.options(name)
  module = encodings.build(name, dim=DIM, grid_shape=SHAPE, num_heads=HEADS, head_dim=HEAD_DIM)
  value = getattr(module, option)
  if value is None:  # rope: THETA by mode
    value = rotary.THETA[module.mode]
  assert value == default
  assert encodings.knob(encodings.with_options(name, **{option: 3.0})) == (option, 3.0)


def test_every_encoding_a_record_compares_has_a_knob():
  """The encodings the records compare can all be tuned by one sweep (issue: equal budget)."""
  compared = ("fourier", "fourier_no_mlp", "fixed_fourier_mlp", "mlp", "sine_2d", "sine_1d",
              "embed_1d", "embed_2d", "embed_4d", "learnable_sine", "gabor", "gabor_edge",
              "rel_bias_2d", "rope_axial", "rope_mixed", "detr_sine")  # fmt: skip
  assert [n for n in compared if encodings.knob(n) is None] == []
  # Only the parameter-free intuitive encodings (003) and `none` have nothing to scale.
  assert {n for n in encodings.NAMES if encodings.knob(n) is None} == {
    "binary",
    "index",
    "unit",
    "none",
  }


class _UsersPE(encodings.AbsoluteEncoding, nn.Module):
  """README's "How to extend" example: an absolute encoding of a user's own."""

  dim: int
  coords_mode: str = "unit"

  @nn.compact
  def __call__(self, coords):
    return jnp.sin(nn.Dense(self.dim)(coords))


def test_a_users_absolute_encoding_gets_the_coords_mode_check():
  """(it failed inside the traced init, naming no field)"""
  assert _UsersPE(dim=4).grid_coords((2, 3)).shape == (6, 2)
  with pytest.raises(ValueError, match=r"_UsersPE: `coords_mode`='bogus' is not a coordinate"):
    _UsersPE(dim=4, coords_mode="bogus")
