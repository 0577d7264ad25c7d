"""The parts of the position study: each trains its configurations and records JSON results.

`Study` holds the mode, the output paths and what parts hand to each other (pretrained
Fourier positions, the trained `embed_1d` model that 000 Table 1 refits). Every result is
appended to `results.json` as soon as it exists, so a stopped run keeps what it finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

import jax
import numpy as np

from experiments.position_study import plan
from lfpe.analysis import probes, similarity
from lfpe.studies import multiseed as ms
from lfpe.studies import positions, sweep
from lfpe.studies.sweep import Config

MAP_INDEX = (2, 2)  # the reference patch of the similarity maps (upper half, 003 Fig. 5)


class Study:
  """Shared state of one run: mode, paths, results, and hand-overs between parts."""

  def __init__(self, mode: plan.Mode, out: str, data_dir: str, strategy: str, log=print):
    self.mode, self.out, self.data_dir, self.strategy, self.log = mode, out, data_dir, strategy, log
    self.results: dict[str, Any] = {"timing": {}}
    self.pretrained = None  # position params [S, ...] of the pretrained Fourier model
    self.refit_source = None  # the `distance` embed_1d Result
    self.part, self.part_start, self.part_base = None, 0.0, 0.0

  def begin(self, part: str) -> None:
    """Starts timing `part`; time an earlier (resumed) run spent on it is kept."""
    self.part, self.part_start = part, time.perf_counter()
    self.part_base = self.results["timing"].get(part, 0.0)

  def tick(self) -> None:
    """Updates the current part's time in the results."""
    if self.part is not None:
      elapsed = time.perf_counter() - self.part_start
      self.results["timing"][self.part] = self.part_base + elapsed

  def run(
    self, config: Config, seeds, label: str | None = None, epochs: int | None = None, **kw
  ) -> sweep.Result:
    """Trains one configuration and logs its scores."""
    spec = self.mode.spec if epochs is None else dataclasses.replace(self.mode.spec, epochs=epochs)
    start = time.perf_counter()
    result = sweep.run(config, list(seeds), spec, self.data_dir, strategy=self.strategy, **kw)
    self.log(
      f"  {config.task:12s} {label or config.posemb:22s} {dict(config.model)} "
      f"n={config.train_size}: {_fmt(result.test)} ({time.perf_counter() - start:.0f}s)"
    )
    return result

  def done(self, part: str, key: str) -> bool:
    """Whether `part`/`key` is already in the results (a resumed run skips it)."""
    return key in self.results.get(part, {})

  def record(self, part: str, key: str, value: Any) -> None:
    self.results.setdefault(part, {})[key] = value
    self.tick()
    with open(os.path.join(self.out, "results.json"), "w") as f:
      json.dump(self.results, f, indent=1)


def _fmt(x: np.ndarray) -> str:
  return f"{np.mean(x):.4f} ± {np.std(x):.4f}"


def probe_all(model, params, names) -> dict[str, dict[str, list[float]]]:
  """Per-seed mean fold scores `{probe: {scheme: [S]}}` of a model's position tables."""
  tables = positions.tables(model, params)
  shape = positions.grid(model)
  return {
    name: {
      scheme: [float(probes.probe(t, shape, name, scheme).mean()) for t in tables]
      for scheme in probes.SCHEMES
    }
    for name in names
  }


def similarity_maps(model, params) -> list[list[float]]:
  """Cosine-similarity map of seed 0's table to the patch `MAP_INDEX` (003 Fig. 5)."""
  table = positions.table(model, jax.tree.map(lambda a: a[0], params))
  return similarity.similarity_map(table, positions.grid(model), MAP_INDEX, "cosine").tolist()


def pretrain(study: Study, needed: bool = False) -> None:
  """003 Sec. 5.1: Fourier positions trained on `direction4`, then on `distance`.

  A resumed run skips it unless its parameters are `needed` (they are not saved).
  """
  if study.pretrained is not None or (study.done("pretrain", "probes") and not needed):
    return
  seeds, n = range(study.mode.seeds), study.mode.train_size
  first = study.run(Config("direction4", "fourier", train_size=n), seeds)
  keep_body = lambda fresh: {**first.params, "head": fresh["head"]}  # new task, new head
  second = study.run(Config("distance", "fourier", train_size=n), seeds, init=keep_body)
  study.pretrained = second.params
  study.record("pretrain", "direction4", first.summary())
  study.record("pretrain", "distance", second.summary())
  names = ("left_right", "up_down", "distance")
  study.record(
    "pretrain",
    "probes",
    {
      "before": probe_all(first.model, first.init_params, names),
      "after": probe_all(second.model, second.params, names),
    },
  )


def _table_run(study: Study, label: str, config: Config, seeds) -> sweep.Result:
  if config.posemb != "fourier_pretrained":
    return study.run(config, seeds, label)
  pretrain(study, needed=True)
  source = study.pretrained
  config = dataclasses.replace(config, posemb="fourier")
  return study.run(config, seeds, label, init=lambda fresh: positions.transplant(fresh, source))


def tables(study: Study) -> None:
  """003 Tables 1, 3, 4 with the probes of Table 2 and the maps of Fig. 5."""
  seeds = range(study.mode.seeds)
  for enc, config in plan.table_configs(study.mode):
    if study.done("tables", f"{config.task}/{enc}"):
      continue
    result = _table_run(study, enc, config, seeds)
    entry = result.summary() | {"posemb": enc}
    names = {"direction": ("left_right", "up_down"), "distance": ("distance",)}.get(config.task)
    if enc in plan.PROBED and names:
      entry["probes"] = {
        "before": probe_all(result.model, result.init_params, names),
        "after": probe_all(result.model, result.params, names),
      }
    if enc in plan.MAPPED and config.task in ("color_shift", "direction"):
      entry["maps"] = {
        "before": similarity_maps(result.model, result.init_params),
        "after": similarity_maps(result.model, result.params),
      }
    if config.task == "distance" and enc == "embed_1d":
      study.refit_source = result
    study.record("tables", f"{config.task}/{enc}", entry)


def curves(study: Study) -> None:
  """003 Fig. 3: test scores against the number of training images."""
  seeds = range(study.mode.few_seeds)
  for config, epochs in plan.curve_configs(study.mode):
    if study.done("curves", plan.curve_key(config)):
      continue
    result = study.run(config, seeds, epochs=epochs)
    study.record(
      "curves",
      plan.curve_key(config),
      result.summary() | {"epochs": epochs},
    )


def ablation(study: Study) -> None:
  """004 Table 8: where and which positions, on a 2-block ViT."""
  seeds = range(study.mode.few_seeds)
  for config in plan.ablation_configs(study.mode):
    if study.done("ablation", plan.ablation_key(config)):
      continue
    result = study.run(config, seeds)
    study.record(
      "ablation",
      plan.ablation_key(config),
      result.summary() | {"params": positions.count(result.params)},
    )


def gabor(study: Study) -> None:
  """000 Tables 3-5 and Fig. 11 on `distance`, then Table 1's refit."""
  seeds = range(study.mode.few_seeds)
  for name, rows in plan.gabor_configs(study.mode).items():
    for label, config in rows:
      if study.done(f"gabor_{name}", label):
        continue
      result = study.run(config, seeds, label)
      study.record(
        f"gabor_{name}", label, result.summary() | {"params": positions.count(result.params)}
      )
  refit(study)


def refit(study: Study) -> None:
  """000 Table 1: freeze a trained `embed_1d` model, train only new gabor / edge positions."""
  seeds = list(range(study.mode.few_seeds))
  source = study.refit_source
  if source is None or source.seeds[: len(seeds)] != seeds:
    source = study.run(Config("distance", "embed_1d", train_size=study.mode.train_size), seeds)
  trained = jax.tree.map(lambda a: a[: len(seeds)], source.params)
  study.record(
    "gabor_refit",
    "embed_1d",
    {"test": source.test[: len(seeds)].tolist(), "params": positions.count(trained)},
  )
  for enc in study.mode.refit:
    if study.done("gabor_refit", enc):
      continue
    result = study.run(
      Config("distance", enc, train_size=study.mode.train_size),
      seeds,
      f"refit {enc}",
      epochs=study.mode.refit_epochs,
      trainable=positions.is_position,
      init=lambda fresh: positions.transplant(trained, fresh, False),
    )
    extra = {"params": positions.count(result.params), "epochs": study.mode.refit_epochs}
    study.record("gabor_refit", enc, result.summary() | extra)


def defaults(study: Study) -> None:
  """`direction` at lfpe's default initial scales: the reason for `sweep.POSITION_INIT`."""
  seeds = range(study.mode.seeds)
  for label, config in plan.defaults_configs(study.mode):
    if not study.done("defaults", label):
      study.record("defaults", label, study.run(config, seeds, label).summary())


def speed(study: Study, epochs: int = 2) -> None:
  """Wall time of S seeds trained as one vmapped program, with lax.map, or one by one."""
  seeds = range(study.mode.seeds)
  spec = dataclasses.replace(study.mode.spec, epochs=epochs)
  config = Config("direction", "embed_1d", train_size=study.mode.train_size)
  data = sweep.splits(config.task, study.data_dir)["train"]
  data = data if config.train_size is None else data.take(config.train_size)
  model = sweep.build_model(config)
  for strategy in plan.SPEED_STRATEGIES:
    if study.done("speed", strategy):
      continue
    params = ms.init_params(model, seeds, data.images.shape[1:])
    start = time.perf_counter()
    _, history = ms.train(model, params, data, spec, list(seeds), strategy=strategy)
    seconds = time.perf_counter() - start
    study.log(f"  speed {strategy}: {seconds:.1f}s for {len(seeds)} seeds x {epochs} epochs")
    study.record(
      "speed",
      strategy,
      {
        "seconds": seconds,
        "seeds": len(seeds),
        "epochs": epochs,
        "examples": len(data.images),
        "epoch_seconds": history["epoch_seconds"],
      },
    )
