"""The encoding registry, and encodings as one config value: a name with its options.

A position encoding is named by a *spec*: a name (`"fourier"`), a name with options
(`"fourier(gamma=0.25, hidden_dim=64)"`), or a mapping (`{"name": "fourier", "gamma": 0.25}`).
A spec is one value, so `--config.model.posemb=embed_1d` replaces an encoding together with
its options. Option values are Python literals; a bare word is a string
(`"sine_2d(layout=concat)"`).

Each encoding module declares its names once (`ENCODINGS`, a tuple of
`base.Registration`: name, linen factory, aliases, capabilities); this module finds them in
every module of the package, so adding an encoding is adding one module (README: "How to
extend"). `REGISTRY`, `ALIASES`, `NAMES`, `info(name)`, `display_name(spec)` (the one map from
an encoding to the name tables and figures print) and `markdown_table()` derive from them.

* `options(name)`: the options an encoding takes (the one place this is computed).
* `create(spec, **kwargs)`: the module, with exactly these arguments.
* `build(spec, **context)`: what models call; `context` is what the model knows (`dim`,
  `grid_shape`, `num_heads`, `head_dim`, ...) and each module receives the fields it
  declares. A spec option that the encoding lacks, or that the model sets, is an error.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from lfpe.encodings.base import Registration
from lfpe.encodings.resample import packed_problem
from lfpe.errors import did_you_mean


def collect(modules) -> dict[str, Registration]:
  """{name: Registration} from the `ENCODINGS` of `modules`; a name or alias used twice is an
  error (so a new module cannot shadow an encoding)."""
  found: dict[str, Registration] = {}
  for module in modules:
    for entry in getattr(module, "ENCODINGS", ()):
      if entry.labels and len(entry.labels) != 1 + len(entry.aliases):
        raise ValueError(
          f"encoding {entry.name!r} of {module.__name__}: give one display label per name and "
          f"alias, labels=({', '.join(['...'] * (1 + len(entry.aliases)))})."
        )
      for name in (entry.name, *entry.aliases):
        taken = [n for n, e in found.items() if name in (n, *e.aliases)]
        if taken:
          raise ValueError(f"encoding name {name!r} of {module.__name__} is taken by {taken[0]!r}.")
      found[entry.name] = entry
  return found


def _encoding_modules():
  """Every module of this package (each may declare `ENCODINGS`), in name order."""
  package = os.path.dirname(__file__)
  names = sorted(m.name for m in pkgutil.iter_modules([package]) if m.name != "registry")
  return [importlib.import_module(f"{__package__}.{name}") for name in names]


REGISTRATIONS: dict[str, Registration] = collect(_encoding_modules())
REGISTRY: dict[str, Callable] = {name: e.factory for name, e in REGISTRATIONS.items()}
ALIASES = {alias: name for name, e in REGISTRATIONS.items() for alias in e.aliases}
NAMES = tuple(sorted([*REGISTRY, *ALIASES]))
# What a model passes to `build` (never a spec option: the model decides it).
CONTEXT = ("dim", "grid_shape", "num_heads", "head_dim")


def info(name: str) -> Registration:
  """The registration of encoding `name` (or of the encoding an alias names)."""
  resolve(name)
  return REGISTRATIONS[ALIASES.get(name, name)]


def augment_refusal(encoding: Any) -> str | None:
  """Why coordinate augmentation (`model.coord_augment`, `resolution.train_coords`) cannot
  perturb what `encoding` (a spec, or a built module) reads; None where it can: absolute and
  rotary encodings of continuous coordinates. Learned tables index cells (augmented, their
  lookups leave the table: NaN rows) and relative encodings read offsets between cells."""
  if isinstance(encoding, str | Mapping):
    name = parse(encoding)[0]
    entry = info(name)
  else:
    entry = next((e for e in REGISTRATIONS.values() if type(encoding) is e.module_class), None)
    if entry is None:
      return f"{type(encoding).__name__} is not a registered encoding"
    name = entry.name
  if entry.kind in ("absolute", "rotary") and entry.resolution_free:
    return None
  return (
    f"{name!r} (kind {entry.kind!r}) reads no coordinates to augment; use a "
    "coordinate-based encoding (fourier, sine_2d, rope_axial, ...)"
  )


def module_classes() -> tuple[type, ...]:
  """The linen class of every registered encoding, once each, in registry order."""
  return tuple(dict.fromkeys(e.module_class for e in REGISTRATIONS.values()))


def markdown_table() -> str:
  """The README's table of encodings: name (aliases), label, module, kind and capabilities."""
  rows = [
    "| name (aliases) | label | module | kind | 4-D boxes | resolution-free |",
    "|---|---|---|---|---|---|",
  ]
  for name, e in sorted(REGISTRATIONS.items()):
    aliases = f" ({', '.join(f'`{a}`' for a in e.aliases)})" if e.aliases else ""
    module = _format(e.module_class.__name__, getattr(e.factory, "keywords", {}))
    yes = lambda flag: "yes" if flag else "no"
    labels = " / ".join(dict.fromkeys(e.labels or [name]))
    rows.append(
      f"| `{name}`{aliases} | {labels} | `{module}` | {e.kind} | {yes(e.reads_boxes)} | "
      f"{yes(e.resolution_free)} |"
    )
  return "\n".join(rows)


def resolve(name: str) -> Callable:
  """The module factory registered under `name` (or an alias of it)."""
  if name not in REGISTRY and name not in ALIASES:
    raise ValueError(
      f"Unknown positional encoding {name!r}{did_you_mean(name, NAMES)}; "
      f"valid names: {', '.join(NAMES)}."
    )
  return REGISTRY[ALIASES.get(name, name)]


def _module_class(name: str) -> type:
  return info(name).module_class


def kind(spec) -> str:
  """Where the encoding of `spec` enters a model (see base.KINDS)."""
  return info(parse(spec)[0]).kind


def _settings(spec) -> tuple[str, dict[str, Any]]:
  """(name, every option's value) of `spec`: the module's defaults, its name's fixed keywords,
  then the spec's own options."""
  name, opts = parse(spec)
  values = {f.name: f.default for f in dataclasses.fields(_module_class(name)) if f.init}
  values.update(getattr(resolve(name), "keywords", {}), **opts)
  return name, values


def packed_refusal(spec) -> str | None:
  """Why the encoding of `spec` cannot take NaFlex-packed batches (several grids in one
  batch), or None: every kind can, by a per-example `packed` (learned tables resampled per
  example), except a resampling policy with no per-example version, or a reason of the
  encoding's own (`packed_refusal(settings)`: RoPE's grid-dependent scaling)."""
  name, values = _settings(spec)
  cls = _module_class(name)
  if cls.kind in ("bias", "logits") and not hasattr(cls, "packed"):
    return "it indexes one grid's offsets and has no per-example version"
  own = getattr(cls, "packed_refusal", None)
  problem = own(values) if own is not None else None
  if problem:
    return problem
  method = values.get("resample_method")
  return None if method is None else packed_problem(method, values.get("align_corners", False))


def mixed_size_problem(spec) -> str | None:
  """Why `spec` would misread a model trained at several sizes, or None: a scaling policy
  (RoPE's `pi`, `ntk`, `yarn`) takes its training length from the model's nominal grid unless
  `trained_grid` (or, for `ntk`, a fixed `ntk_factor`: YaRN's ramp still reads L) says
  otherwise."""
  _, values = _settings(spec)
  scaling = values.get("scaling", "none")
  fixed = scaling == "ntk" and values.get("ntk_factor")
  if scaling == "none" or values.get("trained_grid") or fixed:
    return None
  return (
    f"scaling={scaling!r} would take the nominal grid as the training length, "
    "smaller than the largest grid the model trained at"
  )


def options(name: str) -> tuple[str, ...]:
  """The keyword arguments encoding `name` takes, sorted (those its name fixes excluded)."""
  factory = resolve(name)
  fixed = set(getattr(factory, "keywords", {}))
  fields = {f.name for f in dataclasses.fields(_module_class(name)) if f.init}
  return tuple(sorted(fields - fixed - {"parent", "name"}))


def parse(spec) -> tuple[str, dict[str, Any]]:
  """`(name, options)` of a spec: `"name"`, `"name(k=v, ...)"` or `{"name": ..., k: v}`."""
  if hasattr(spec, "to_dict"):  # an ml_collections.ConfigDict
    spec = spec.to_dict()
  if isinstance(spec, Mapping):
    opts = dict(spec)
    name = opts.pop("name", None)
    if not isinstance(name, str):
      raise ValueError(f"encoding spec {spec!r} needs a 'name' key, e.g. {{'name': 'fourier'}}.")
  elif isinstance(spec, str):
    name, opts = _parse_string(spec)
  else:
    raise ValueError(
      f"encoding spec {spec!r} must be a name, 'name(option=value, ...)' or a dict with "
      f"a 'name' key; valid names: {', '.join(NAMES)}."
    )
  resolve(name)
  return name, opts


def _parse_string(text: str) -> tuple[str, dict[str, Any]]:
  try:
    tree = ast.parse(text.strip(), mode="eval").body
  except SyntaxError:
    tree = None
  if isinstance(tree, ast.Name):
    return tree.id, {}
  if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.args):
    raise ValueError(
      f"encoding spec {text!r} is not 'name' or 'name(option=value, ...)', "
      f"e.g. 'fourier(gamma=0.25)'."
    )
  opts = {}
  for kw in tree.keywords:
    if kw.arg in opts:
      raise ValueError(f"encoding spec {text!r} sets {kw.arg!r} twice; set it once.")
    value = kw.value
    opts[kw.arg] = value.id if isinstance(value, ast.Name) else _literal(value, kw.arg, text)
  return tree.func.id, opts


def _literal(node: ast.AST, key: str, text: str) -> Any:
  try:
    return ast.literal_eval(node)
  except ValueError:
    raise ValueError(
      f"encoding spec {text!r}: the value of {key!r} must be a Python literal "
      f"(number, string, tuple, True/False/None)."
    ) from None


def spec(name: str, **opts: Any) -> str:
  """The spec string of `name` with the `opts` it takes (others dropped), e.g. for configs.

  `spec("fourier", gamma=0.25)` -> `"fourier(gamma=0.25)"`; `spec("embed_1d", gamma=0.25)`
  -> `"embed_1d"`: one config can offer an option that only some encodings take. `name` may
  be a whole spec, whose own options win: `spec("fourier(gamma=0.5)", gamma=0.25)` ->
  `"fourier(gamma=0.5)"` (a config argument `posemb=fourier(gamma=0.5)` over its default γ).
  """
  base, own = parse(name)
  taken = set(options(base))
  return _format(base, {**{k: v for k, v in opts.items() if k in taken}, **own})


def _format(head: str, opts: Mapping[str, Any], space: str = "") -> str:
  """`head(k=v, ...)`, options sorted (`head` alone without options): the one formatter of
  specs and display names."""
  args = ", ".join(f"{k}={v!r}" for k, v in sorted(opts.items()))
  return f"{head}{space}({args})" if args else head


def display_name(spec) -> str:
  """How tables and figures name the encoding of `spec`: its registered label (002's names:
  `Sine-2D`, `Learnable-Fourier+MLP`, ...), options after it in brackets, e.g.
  `display_name("fourier(gamma=16.0)")` -> `"Learnable-Fourier+MLP (gamma=16.0)"`."""
  name, opts = parse(spec)
  entry = info(name)
  names = (entry.name, *entry.aliases)
  return _format((entry.labels or names)[names.index(name)], opts, space=" ")


def with_options(spec, **options: Any) -> str:
  """The spec string of `spec` with `options` set (added or replaced), options sorted:
  `with_options("fourier(gamma=0.25)", gamma=0.5)` -> `"fourier(gamma=0.5)"`. The one
  formatter of a changed spec (the command line's `--config.model.posemb.OPTION=`, the
  experiments' policies); an option the encoding lacks fails when it is built, naming it."""
  name, old = parse(spec)
  return _format(name, {**old, **options})


def knob(spec) -> tuple[str, float] | None:
  """`(option, value)` of the scale knob of `spec`'s encoding (`Registration.knob`) at the
  value `spec` gives it (else the default), or None where the encoding has no knob:
  `knob("fourier(gamma=16.0)")` -> `("gamma", 16.0)`; what a sweep scales."""
  name, opts = parse(spec)
  entry = info(name)
  if not entry.knob:
    return None
  option, default = entry.knob
  return option, float(opts.get(option, default))


def check_options(name: str, opts: Mapping[str, Any], context: Mapping[str, Any] = ()) -> None:
  """ValueError if `opts` names an option encoding `name` lacks or one the model sets."""
  known = options(name)
  unknown = sorted(set(opts) - set(known))
  if unknown:
    raise ValueError(
      f"{unknown[0]!r} is not an option of encoding {name!r} "
      f"({_module_class(name).__name__}); options: {', '.join(known)}."
    )
  clash = sorted(set(opts) & set(context) & set(CONTEXT))
  if clash:
    raise ValueError(
      f"option {clash[0]!r} of encoding {name!r} is set by the model "
      f"({clash[0]}={context[clash[0]]!r}); remove it from the spec."
    )


def create(spec, **kwargs: Any):
  """The flax.linen module of encoding `spec`, built with the spec's options and `kwargs`; an
  option given in both with different values is refused (neither silently wins)."""
  name, opts = parse(spec)
  twice = sorted(k for k in set(opts) & set(kwargs) if opts[k] != kwargs[k])
  if twice:
    key = twice[0]
    raise ValueError(
      f"encoding spec {spec!r}: option {key!r} is given twice, {opts[key]!r} in the spec and "
      f"{key}={kwargs[key]!r} as an argument; give it once."
    )
  opts = {**opts, **kwargs}
  check_options(name, opts)
  return resolve(name)(**opts)


def build(spec, **context: Any):
  """The module of `spec` for a model: each module takes the `context` fields it declares.

  `context` holds what the model knows (`dim`, `grid_shape`, `num_heads`, `head_dim`, and
  `parent=None` to build an unbound module for a check); the spec's options override other
  context fields (e.g. `ndim`) but not the model's `CONTEXT` fields.
  """
  name, opts = parse(spec)
  check_options(name, opts, context)
  declared = {*options(name), "parent"}
  return resolve(name)(**{**{k: v for k, v in context.items() if k in declared}, **opts})
