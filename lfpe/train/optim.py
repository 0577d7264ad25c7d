"""Optimizers and learning-rate schedules from the config (optax).

config.optim:    name ('adamw' | 'sgd'), lr (peak), weight_decay, b1, b2, eps (adamw),
                 momentum, nesterov (sgd), grad_clip_norm (0 disables clipping),
                 lr_multipliers ({top-level module: factor}, e.g. DETR's backbone at
                 1e-5 / 1e-4 = 0.1 of the transformer's rate), trainable and freeze
                 (regular expressions of parameter paths such as 'params/Transformer/pos/...':
                 a parameter trains iff it matches one of `trainable` (when any are given)
                 and none of `freeze`; the others get no update, no decay and no slots),
                 no_decay (regular expressions of parameter paths kept out of weight decay
                 beside the vectors, timm's `no_weight_decay()`: e.g. '/freqs$', RoPE-Mixed's
                 learned frequencies, which rope-vit does not decay; '/(table|cls)$' for timm's
                 position table and class token),
                 ema_decay (0: off; else an exponential moving average of the parameters,
                 `ema ← d · ema + (1 − d) · params` after every update, kept in the optimizer
                 state and evaluated instead of the parameters: `ema_params`).
config.schedule: name ('warmup_cosine' | 'warmup_rsqrt' | 'constant' | 'warmup_step'),
                 warmup_steps, end_lr_factor (cosine: final lr / peak lr), timescale
                 (rsqrt), decay_steps and decay_factor (step: multiply the rate by
                 decay_factor at each of the decay_steps, DETR's drop at epoch 200).

Weight decay applies to parameters of two or more dimensions (ndim > 1), the rule the
records trained with: vectors (Dense biases, norm scales) are not decayed, nor the parameters
`no_decay` names (none by default), but position tables, class tokens, RoPE-Mixed's
frequencies and the attention's `[heads, head_dim]` q/k/v biases are. timm skips biases and
vectors, big_vision decays only `/kernel$`: `no_decay=('/bias$',)` spares the q/k/v biases,
`('^(?!.*/kernel$)',)` is big_vision's rule (docs/training.md). AdamW's decay is decoupled
(Loshchilov & Hutter: `lr * wd * p` added to the Adam update); SGD's is the classic L2 term
added to the gradient.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from lfpe.errors import ConfigError

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("warmup_cosine", "warmup_rsqrt", "constant", "warmup_step")


def make_schedule(schedule_config: Any, peak_lr: float, total_steps: int) -> optax.Schedule:
  """Learning rate as a function of the step (0-based): linear warmup from 0, then decay.

  Warmup is clipped to `total_steps - 1` (see `clipped_warmup`).
  warmup_cosine: cosine from `peak_lr` at the end of warmup to `end_lr_factor * peak_lr`
  at `total_steps`. warmup_rsqrt: `peak_lr / sqrt(1 + (step - warmup) / timescale)`
  after warmup (big_vision's rsqrt without cooldown). constant: warmup, then `peak_lr`.
  """
  name, warmup = schedule_config.name, clipped_warmup(schedule_config, total_steps)
  if name == "warmup_cosine":
    return optax.warmup_cosine_decay_schedule(
      init_value=0.0,
      peak_value=peak_lr,
      warmup_steps=warmup,
      decay_steps=total_steps,
      end_value=peak_lr * schedule_config.get("end_lr_factor", 0.0),
    )
  if name == "warmup_rsqrt":
    timescale = float(schedule_config.get("timescale", max(warmup, 1)))
    decay = lambda t: peak_lr * jax.lax.rsqrt(1.0 + jnp.maximum(t, 0) / timescale)
    return _with_warmup(decay, peak_lr, warmup)
  if name == "constant":
    return _with_warmup(lambda t: jnp.full((), peak_lr, jnp.float32), peak_lr, warmup)
  if name == "warmup_step":
    factor = float(schedule_config.get("decay_factor", 0.1))
    bounds = jnp.asarray(tuple(schedule_config.get("decay_steps", ())), jnp.float32) - warmup
    decay = lambda t: peak_lr * factor ** jnp.sum(jnp.maximum(t, 0) >= bounds)
    return _with_warmup(decay, peak_lr, warmup)
  raise ValueError(f"`schedule.name`={name!r} is unknown; use one of {SCHEDULES}.")


def clipped_warmup(schedule_config: Any, total_steps: int) -> int:
  """`warmup_steps`, at most `total_steps - 1`: a quick try (`total_steps=5`) needs no second
  flag, and the schedule keeps at least one step after warmup (the trainer logs the clip)."""
  return max(min(int(schedule_config.warmup_steps), total_steps - 1), 0)


def _with_warmup(decay, peak_lr: float, warmup: int) -> optax.Schedule:
  """Linear warmup 0 -> `peak_lr` over `warmup` steps, then `decay(step - warmup)`."""
  if warmup == 0:
    return lambda step: decay(jnp.asarray(step, jnp.float32))
  ramp = optax.linear_schedule(0.0, peak_lr, warmup)
  return optax.join_schedules([ramp, lambda t: decay(jnp.asarray(t, jnp.float32))], [warmup])


def _decay_mask(no_decay: Any) -> Any:
  """`params -> tree of bools`: matrices decay, but those a `no_decay` pattern matches."""
  skip = [re.compile(p) for p in no_decay]
  decays = lambda path, p: p.ndim > 1 and not any(s.search(param_name(path)) for s in skip)
  return lambda params: jax.tree_util.tree_map_with_path(decays, params)


def make_optimizer(config: Any) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """(optax transformation, lr schedule) for `config.optim`, `config.schedule`."""
  opt = config.optim
  schedule = make_schedule(config.schedule, opt.lr, config.total_steps)
  decay_mask = _decay_mask(opt.get("no_decay", ()))
  if opt.name == "adamw":
    tx = optax.adamw(
      schedule,
      b1=opt.get("b1", 0.9),
      b2=opt.get("b2", 0.999),
      eps=opt.get("eps", 1e-8),
      weight_decay=opt.get("weight_decay", 0.0),
      mask=decay_mask,
    )
  elif opt.name == "sgd":
    tx = optax.chain(
      optax.add_decayed_weights(opt.get("weight_decay", 0.0), mask=decay_mask),
      optax.sgd(
        schedule, momentum=opt.get("momentum", 0.9) or None, nesterov=opt.get("nesterov", False)
      ),
    )
  else:
    raise ValueError(f"`optim.name`={opt.name!r} is unknown; use one of {OPTIMIZERS}.")
  multipliers = dict(opt.get("lr_multipliers", None) or {})
  if multipliers:
    tx = optax.chain(tx, _scale_modules(multipliers))
  clip = opt.get("grad_clip_norm", 0.0)
  if clip:
    tx = optax.chain(optax.clip_by_global_norm(clip), tx)
  trains = trains_fn(opt.get("trainable", ()), opt.get("freeze", ()))
  if trains is not None:  # the frozen ones outside, so that clipping sees only trained ones
    labels = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: "train" if trains(param_name(path)) else "freeze", params
    )
    tx = optax.multi_transform({"train": tx, "freeze": optax.set_to_zero()}, labels)
  decay = opt.get("ema_decay", 0.0)
  if decay:
    tx = optax.chain(tx, params_ema(decay))
  return tx, schedule


class ParamsEma(NamedTuple):
  """The optimizer-state slot of `params_ema`: the moving average of the parameters."""

  ema: Any


def params_ema(decay: float) -> optax.GradientTransformation:
  """Last in the chain: updates pass unchanged; the state tracks the average of the parameters
  they produce, `ema ← decay · ema + (1 − decay) · (params + updates)`, from the initial ones."""

  def update(updates, state, params):
    new = jax.tree.map(lambda p, u: p + u, params, updates)
    ema = jax.tree.map(lambda e, n: decay * e + (1.0 - decay) * n.astype(e.dtype), state.ema, new)
    return updates, ParamsEma(ema)

  return optax.GradientTransformation(lambda params: ParamsEma(params), update)


def ema_params(opt_state: Any) -> Any:
  """The parameters' moving average held in `opt_state` (`optim.ema_decay`), or None."""
  slots = jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, ParamsEma))
  return next((s.ema for s in slots if isinstance(s, ParamsEma)), None)


def param_name(path: Any) -> str:
  """'params/Transformer/pos/encoding/table' of a key path into the params (boxes skipped)."""
  return "/".join(["params", *(str(k.key) for k in path if hasattr(k, "key"))])


def check_patterns(config: Any, params: Any) -> None:
  """Each `optim.trainable` / `optim.freeze` / `optim.no_decay` pattern must name some
  parameter of `params` (a typo would silently train or decay everything): ConfigError naming
  it and a few names."""
  names = [param_name(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  for field in ("trainable", "freeze", "no_decay"):
    for pattern in config.optim.get(field, ()):
      if not any(re.search(pattern, name) for name in names):
        raise ConfigError(
          f"config.optim.{field}: {pattern!r} matches no parameter; they are named like "
          f"{', '.join(names[:3])}."
        )


def trains_fn(trainable: Any, freeze: Any) -> Any:
  """`name -> bool` of `optim.trainable` / `optim.freeze`, or None when everything trains."""
  if not trainable and not freeze:
    return None
  keep, stop = ([re.compile(p) for p in patterns] for patterns in (trainable, freeze))
  return lambda name: (
    (not keep or any(p.search(name) for p in keep)) and not any(p.search(name) for p in stop)
  )


def _scale_modules(multipliers: dict[str, float]) -> optax.GradientTransformation:
  """Multiplies the updates of the parameters under each named top-level module.

  After AdamW (whose update already includes `lr` and the decoupled decay) this is the
  same as that module's learning rate times the factor.
  """

  def factor(path) -> float:
    return multipliers.get(getattr(path[0], "key", str(path[0])), 1.0)

  def update(updates, state, params=None):
    del params
    scaled = jax.tree_util.tree_map_with_path(lambda p, u: u * factor(p), updates)
    return scaled, state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)
