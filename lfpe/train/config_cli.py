"""The config of a command line: `--config=FILE[:ARG]` and `--config.FIELD=VALUE` overrides.

`load(config_arg, overrides)` reads the config file, calls its `get_config(ARG)` and applies
each override to the (locked) config. Every mistake is a ConfigError whose one-line message
names the flag and the fix, with a "did you mean" for misspelled names:

* a missing config file, an unknown or unparsable config argument;
* an override of a field that does not exist, or of a group of fields as a whole;
* a value that does not parse as the field's type (bool, int, float, str, tuple, list).

`config.evals` is open: `--config.evals.NAME="{'data': {...}, ...}"` (a dict literal) adds
the named evaluation NAME (lfpe/train/evaluation.py checks its fields with the config's).
So are `config.model`, to the fields of its family's model (`--config.model.FIELD=VALUE` sets
one the config file left at its default: `model.posemb_grid=7`), and `config.task`, to its
task's options (`task.bbox_weight=2` on a detection config).

An override one level below an encoding spec changes one option of that spec:
`--config.model.posemb.gamma=0.5` turns `"fourier(gamma=0.25)"` into
`"fourier(gamma=0.5)"` (the value is a Python literal; a bare word is a string). The option
must be one the encoding takes. `--config.model.posemb=NAME(...)` still replaces it whole, but
not after an option of it was set: that option would be dropped silently, so it is refused.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import ml_collections

from lfpe import encodings, tasks
from lfpe.errors import ConfigError, did_you_mean
from lfpe.train import config_lib


def load(config_arg: str, overrides: Sequence[tuple[str, str]] = ()) -> Any:
  """The config of `--config=config_arg` with `overrides` ((dotted path, text) pairs) applied."""
  config = _read_file(config_arg)
  option_flags: dict[str, str] = {}  # spec path -> the option flag that changed it
  for path, text in overrides:
    if path in option_flags:
      raise ConfigError(
        f"--config.{path}={text} replaces the encoding whole and would drop "
        f"{option_flags[path]}, given before it; put the option in the spec "
        f"(--config.{path}='NAME(option=value)') or give the option after the spec."
      )
    spec_path = set_field(config, path, text)
    if spec_path:
      option_flags[spec_path] = f"--config.{path}={text}"
  return config


def _read_file(config_arg: str) -> Any:
  path, _, arg = config_arg.partition(":")
  if not os.path.isfile(path):
    folder = os.path.dirname(path) or "."
    found = [f for f in os.listdir(folder) if f.endswith(".py")] if os.path.isdir(folder) else []
    close = difflib.get_close_matches(os.path.basename(path), found, n=1, cutoff=0.6)
    hint = f" (did you mean {os.path.join(folder, close[0])!r}?)" if close else ""
    raise ConfigError(f"--config: no config file {path!r}{hint}; the configs are in configs/.")
  spec = importlib.util.spec_from_file_location("lfpe_config_file", path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except Exception as e:  # the file itself is broken: a user error, shown with its cause
    raise ConfigError(f"--config: {path} cannot be loaded ({type(e).__name__}: {e}).") from e
  if not hasattr(module, "get_config"):
    raise ConfigError(f"--config: {path} defines no get_config(arg=None); see configs/.")
  try:
    config = module.get_config(arg) if arg else module.get_config()
  except ValueError as e:
    raise ConfigError(f"--config={config_arg}: {e}") from e
  if not isinstance(config, ml_collections.ConfigDict):
    raise ConfigError(f"--config: {path}'s get_config() must return an ml_collections.ConfigDict.")
  return config


def set_field(config: Any, path: str, text: str) -> str | None:
  """Sets `config.<path>` from the command-line `text` (ConfigError naming the flag if wrong);
  returns the spec's path when `path` is an option of an encoding spec, else None."""
  flag = f"--config.{path}"
  keys = path.split(".")
  parent = config
  for i, key in enumerate(keys[:-1]):
    value = _child(parent, key, flag, keys[: i + 1])
    if isinstance(value, str) and i == len(keys) - 2 and _is_spec(value):
      spec_path = ".".join(keys[:-1])
      parent[key] = _set_spec_option(value, keys[-1], text, flag, spec_path)
      return spec_path
    if not isinstance(value, ml_collections.ConfigDict):
      whole = f"--config.{'.'.join(keys[: i + 1])}"
      raise ConfigError(
        f"{flag}: config.{'.'.join(keys[: i + 1])} is a value ({value!r}), not a group of "
        f"fields; set it whole, {whole}=VALUE (a dict literal, e.g. \"{{'key': 1}}\", where "
        "it takes a dict)."
      )
    parent = value
  if keys[:-1] == ["evals"] and keys[-1] not in parent:
    _add_evaluation(parent, keys[-1], text, flag)
    return None
  if keys[:-1] in (["model"], ["task"]) and keys[-1] not in parent:
    _add_field(config, keys[0], keys[-1], text, flag)
    return None
  current = _child(parent, keys[-1], flag, keys)
  if isinstance(current, ml_collections.ConfigDict):
    if keys == ["evals"]:
      raise ConfigError(
        f"{flag}: named evaluations are set one at a time, "
        f"{flag}.NAME=\"{{'data': {{'image_size': 32}}}}\" (lfpe/train/evaluation.py)."
      )
    fields = ", ".join(sorted(current.keys()))
    raise ConfigError(
      f"{flag}: a group of fields; set one of them, {flag}.FIELD (FIELD: {fields})."
    )
  if current is None:  # a placeholder: its declared type, if it has one
    parent[keys[-1]] = _typed(parent.get_type(keys[-1]), text, flag)
  else:
    parent[keys[-1]] = _convert(current, text, flag)
  return None


EXAMPLES = {tuple: "(16, 32)", list: "[16, 32]"}


def _typed(kind: type, text: str, flag: str) -> Any:
  """`text` for a field whose value is None: any literal (else the text) where it was declared
  None, else a value of the placeholder's type (`config_lib.convert` against a stand-in of that
  type; a tuple also from a list), or ConfigError with an example."""
  if text == "None":  # unset again
    return None
  if kind in (bool, int, float, str):
    return _convert(kind(), text, flag)
  value = _convert(None, text, flag)
  if kind is type(None) or isinstance(value, kind):
    return value
  if kind in EXAMPLES and isinstance(value, (tuple, list)):
    return kind(value)
  example = f"({value!r},)" if kind is tuple and isinstance(value, (int, float)) else None
  raise ConfigError(
    f"{flag}={text!r} must be a {kind.__name__}, e.g. {example or EXAMPLES.get(kind, '...')}."
  )


def _add_evaluation(evals: Any, name: str, text: str, flag: str) -> None:
  """Adds the named evaluation `name` to `config.evals` from a dict literal."""
  try:
    value = config_lib.literal(text)
  except (ValueError, SyntaxError):
    value = None
  if not isinstance(value, dict):
    raise ConfigError(
      f"{flag}={text!r}: a new named evaluation is a dict literal of overrides, e.g. "
      f"{flag}=\"{{'data': {{'image_size': 64}}}}\" (lfpe/train/evaluation.py)."
    )
  with evals.unlocked():
    evals[name] = value


def _add_field(config: Any, section: str, field: str, text: str, flag: str) -> None:
  """Sets a field of the model (`section` "model") or an option of the task ("task") that the
  config file left at its default."""
  if section == "model":
    tasks.check_model_field(config, field, flag)
  else:
    tasks.check_option(config.task, field, flag)
  with config[section].unlocked():
    config[section][field] = _convert(None, text, flag)


def _child(parent: Any, key: str, flag: str, keys: list[str]) -> Any:
  if key not in parent:
    where = ".".join(keys[:-1])
    hint = did_you_mean(key, list(parent.keys()))
    raise ConfigError(
      f"{flag}: config{'.' + where if where else ''} has no field {key!r}{hint}; "
      f"its fields: {', '.join(sorted(parent.keys()))}."
    )
  return parent[key]


def _is_spec(value: str) -> bool:
  try:
    encodings.parse(value)
  except ValueError:
    return False
  return True


def _set_spec_option(spec: str, option: str, text: str, flag: str, spec_path: str) -> str:
  """`spec` with `option` set to `text` (a literal, else a string), if its encoding takes it."""
  name, opts = encodings.parse(spec)
  taken = encodings.options(name)
  if option not in taken:
    raise ConfigError(
      f"{flag}: encoding {name!r} has no option {option!r}{did_you_mean(option, taken)}; its "
      f"options: {', '.join(taken)}. Replace the encoding whole with "
      f"--config.{spec_path}='NAME(option=value, ...)'."
    )
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError):
    value = text
  return encodings.with_options(spec, **{option: value})


def _convert(current: Any, text: str, flag: str) -> Any:
  """`text` as a value of `current`'s type (config_lib.convert), or ConfigError naming `flag`."""
  try:
    return config_lib.convert(flag, text, current)
  except ValueError as e:
    raise ConfigError(str(e)) from None
