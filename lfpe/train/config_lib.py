"""What configs/*.py share: the trainer's default fields and argument parsing.

`base_config()` holds every trainer field with its default; a config file
starts from it and sets its own values (an encoding is one value,
`lfpe.encodings.spec(name, gamma=...)`, keeping the options that `name` takes, so one
config can sweep every encoding). `parse_arg(arg, **defaults)` reads the
argument of `configs/NAME.py:ARG` ("posemb=fourier,small=1"): values convert to
the default's type (bool accepts 1/0/true/false/yes/no); unknown keys and
unparsable values raise ValueError naming the key.
"""

from __future__ import annotations

import ast
from typing import Any

import ml_collections

from lfpe.errors import did_you_mean

_TRUE, _FALSE = ("1", "true", "yes", "y", "on"), ("0", "false", "no", "n", "off", "")


def literal(text: str) -> Any:
  """A Python literal, or a `dict(key=literal, ...)` call (nested too) as its dict."""

  def value(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
      if any(k.arg is None for k in node.keywords):
        raise ValueError("dict(**...) is not a literal")
      return {k.arg: value(k.value) for k in node.keywords}
    if isinstance(node, ast.Dict) and None not in node.keys:
      return {value(k): value(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, (ast.List, ast.Tuple)):
      return (list if isinstance(node, ast.List) else tuple)(map(value, node.elts))
    return ast.literal_eval(node)

  return value(ast.parse(text.strip(), mode="eval").body)


def convert(name: str, text: str, default: Any) -> Any:
  """Command-line `text` as a value of `default`'s type (ValueError naming `name` if it is
  not one): bool (1/0, true/false, yes/no), int, float, str; other types (tuples, lists,
  None) as Python literals (`dict(key=literal, ...)` too, as the docs write dicts), None
  taking any literal or else the text."""
  kind = type(default).__name__
  if isinstance(default, bool):
    if text.lower() in _TRUE + _FALSE:
      return text.lower() in _TRUE
    raise ValueError(f"{name}={text!r} must be a boolean (true/false or 1/0).")
  if isinstance(default, (int, float)):
    try:
      return type(default)(text)
    except ValueError:
      what = "an integer" if isinstance(default, int) else "a number"
      raise ValueError(
        f"{name}={text!r} must be of type {kind}: it must be {what}, e.g. {default}."
      ) from None
  if isinstance(default, str):
    return text
  try:
    value = literal(text)
  except (ValueError, SyntaxError):
    if default is None:
      return text
    raise ValueError(
      f"{name}={text!r} must be a Python literal of type {kind}, e.g. {default!r}."
    ) from None
  if default is None:
    return value
  if isinstance(default, (tuple, list)) and isinstance(value, (tuple, list)):
    return type(default)(value)
  raise ValueError(f"{name}={text!r} must be a {kind}, e.g. {default!r}.")


def base_config() -> ml_collections.ConfigDict:
  """Every trainer field at its default (see lfpe/train/validate.py for the rules).

  seed: init, dropout and data order. seeds: 0 for one run, or S runs (seeds seed, ...,
  seed + S - 1) trained as one vmapped program, metrics per seed (lfpe/train/seeds.py).
  total_steps: optimizer updates. batch_size:
  global batch (split over mesh.data). eval_batch_size: global eval batch.
  log_every / eval_every / checkpoint_every: in steps (the last step always does
  all three). keep_checkpoints: how many to keep. compute_dtype: 'float32' or
  'bfloat16' (parameters stay float32). mesh: data (-1: all devices left), model
  (tensor-parallel size), fsdp (shard parameters over data too). distributed:
  force `jax.distributed.initialize()` (else only when the environment shows
  several processes). progress: tqdm bar on a terminal, else log lines every report_every
  steps (0: about 20 lines a run; rounded up to a multiple of log_every).
  dropout_prng: the key type of dropout and LSH hashing, 'threefry2x32' (JAX's default) or
  'rbg' (XLA's RngBitGenerator, as T5X and MaxText train: the same Bernoulli masks in
  distribution, other draws, a faster step where dropout is a large share of it; see
  benchmarks/README.md). Initialisation always uses threefry2x32. init_from: a workdir or a
  checkpoint's state folder whose parameters start this run, resampled where the grid
  changed; init_skip: regular expressions of parameter paths it leaves as initialised
  (lfpe/train/init_from.py). reset_data_position: resume a workdir's model and optimizer
  with a fresh data stream where the number of processes changed (each saved its own
  position); a checkpoint of as many processes resumes its position as always. evals: named
  evaluations beside the config's own, each `dict(data=..., model=..., every=...)` overrides
  (lfpe/train/evaluation.py). train_patch_sizes: () or the patch sizes (ints or (h, w)) a
  ViT's training steps draw from, one per step from (seed, step): FlexiViT's training of one
  model for every patch size, its kernel kept at the trained patch size (lfpe/train/flexi.py).
  """
  return ml_collections.ConfigDict(
    dict(
      seed=0,
      seeds=0,
      total_steps=1000,
      batch_size=128,
      eval_batch_size=256,
      log_every=50,
      eval_every=500,
      checkpoint_every=500,
      keep_checkpoints=3,
      compute_dtype="float32",
      async_checkpoints=True,
      distributed=False,
      progress=True,
      report_every=0,
      dropout_prng="threefry2x32",
      reset_data_position=False,
      init_from="",
      init_skip=(),
      evals={},
      train_patch_sizes=(),
      mesh=dict(data=-1, model=1, fsdp=False),
      task=dict(
        name="classification",
        label_smoothing=0.0,
        mixup_alpha=0.0,  # Mixup / CutMix (lfpe/tasks/mixing.py): 0 is off
        cutmix_alpha=0.0,
        mix_prob=1.0,
        switch_prob=0.5,
      ),
      optim=dict(
        name="adamw",
        lr=1e-3,
        weight_decay=1e-4,
        b1=0.9,
        b2=0.999,
        eps=1e-8,
        momentum=0.9,
        nesterov=False,
        grad_clip_norm=1.0,
        trainable=(),
        freeze=(),
        no_decay=(),
        ema_decay=0.0,
      ),
      schedule=dict(name="warmup_cosine", warmup_steps=100, end_lr_factor=0.0, timescale=10_000.0),
    )
  )


def small_loop(
  config: ml_collections.ConfigDict,
  *,
  total_steps: int = 4,
  batch_size: int = 16,
  eval_batch_size: int | None = None,
) -> None:
  """The training loop of a config's `small=1` variant (CI's plumbing run, in seconds): a few
  steps, every one logged, evaluated and checkpointed at its middle and end, float32."""
  config.total_steps, config.log_every = total_steps, 2
  config.eval_every = config.checkpoint_every = total_steps // 2
  config.batch_size, config.eval_batch_size = batch_size, eval_batch_size or batch_size
  config.compute_dtype = "float32"
  config.schedule.warmup_steps = max(1, total_steps // 3)


def _top_level_items(text: str) -> list[str]:
  """`text` split at the commas outside brackets and quotes."""
  items, depth, start, quote = [], 0, 0, None
  for i, char in enumerate(text):
    if quote:
      quote = None if char == quote else quote
    elif char in "'\"":
      quote = char
    elif char in "([{":
      depth += 1
    elif char in ")]}":
      depth -= 1
    elif char == "," and depth == 0:
      items.append(text[start:i])
      start = i + 1
    if depth < 0:
      break
  if depth or quote:  # a stray bracket or quote would swallow the arguments after it
    raise ValueError(f"config arguments {text!r} have an unbalanced bracket or quote.")
  return [*items, text[start:]]


def parse_arg(arg: str | None, **defaults: Any) -> ml_collections.ConfigDict:
  """The config arguments: `defaults` updated from "k1=v1,k2=v2" (a bare "k" means k=1;
  commas inside brackets or quotes belong to a value: posemb=fourier(gamma=0.5,groups=2))."""
  values = dict(defaults)
  for item in filter(None, _top_level_items(arg or "")):
    key, _, text = item.partition("=")
    key = key.strip()
    if key not in defaults:
      raise ValueError(
        f"unknown config argument {key!r}{did_you_mean(key, defaults)}; "
        f"known: {', '.join(sorted(defaults))}."
      )
    values[key] = convert(
      f"config argument {key}", text.strip() if "=" in item else "1", defaults[key]
    )
  return ml_collections.ConfigDict(values)
