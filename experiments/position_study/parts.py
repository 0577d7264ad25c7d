"""The parts of the position study: each trains its configurations and records JSON results.

Every configuration is one trainer workdir under `OUT/runs/` (all its seeds as one vmapped
program, `config.seeds`); what parts hand to each other (pretrained Fourier positions, the
trained `embed_1d` model that 000 Table 1 refits) is a workdir that the next run starts from
(`config.init_from`). Every result is appended to `results.json` as soon as it exists, and a
stopped configuration resumes from its last epoch's checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from typing import Any

import jax
import numpy as np

from experiments import provenance
from experiments.position_study import plan
from lfpe.analysis import probes, similarity
from lfpe.studies import positions, sweep
from lfpe.studies.sweep import Config
from lfpe.train import trainer

MAP_INDEX = (2, 2)  # the reference patch of the similarity maps (upper half, 003 Fig. 5)


class Study:
  """Shared state of one run: mode, paths, results and the part being timed."""

  def __init__(self, mode: plan.Mode, out: str, data_dir: str, log=print, stamp=None):
    self.mode, self.out, self.data_dir, self.log = mode, out, data_dir, log
    self.stamp = stamp or {}  # this invocation's `provenance.run_provenance`
    self.results: dict[str, Any] = {"timing": {}}
    self.part, self.part_start, self.part_base = None, 0.0, 0.0
    self.pretrained: str | None = None  # the pretraining's workdir, once trained or read

  def begin(self, part: str) -> None:
    """Starts timing `part`; time an earlier (resumed) run spent on it is kept."""
    self.part, self.part_start = part, time.perf_counter()
    self.part_base = self.results["timing"].get(part, 0.0)

  def tick(self) -> None:
    """Updates the current part's time in the results."""
    if self.part is not None:
      elapsed = time.perf_counter() - self.part_start
      self.results["timing"][self.part] = self.part_base + elapsed

  def workdir(self, key: str) -> str:
    """The trainer workdir of the configuration `key` (e.g. 'tables/direction/embed_1d')."""
    return os.path.join(self.out, "runs", *(re.sub(r"[^\w.=-]+", "_", p) for p in key.split("/")))

  def run(
    self, key: str, config: Config, seeds, label: str | None = None, epochs: int | None = None, **kw
  ) -> sweep.Result:
    """Trains (or reads back) one configuration in its workdir and logs its scores; `kw` are
    `sweep.trainer_config`'s options (`init_from`, `init_skip`, `trainable`). The provenance
    of the invocation that trained it goes into its workdir and into the results'
    `run_provenance[key]` (a workdir finished by code that wrote none: `read_back`)."""
    spec = self.mode.spec if epochs is None else dataclasses.replace(self.mode.spec, epochs=epochs)
    start = time.perf_counter()
    workdir = self.workdir(key)
    trained_here = not os.path.exists(os.path.join(workdir, "summary.json"))
    result = sweep.run(config, list(seeds), spec, self.data_dir, workdir, **kw)
    if trained_here:
      provenance.stamp_workdir(workdir, self.stamp)
    self.results.setdefault("run_provenance", {})[key] = provenance.of_workdir(workdir, self.stamp)
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


def pretrain(study: Study) -> str:
  """003 Sec. 5.1: Fourier positions trained on `direction4`, then on `distance` (the body
  carried over, a new head); returns the workdir whose positions the pretrained rows start
  from (trained once: a finished workdir is read back)."""
  if study.pretrained is not None:
    return study.pretrained
  seeds, n = range(study.mode.seeds), study.mode.train_size
  first = study.run("pretrain/direction4", Config("direction4", "fourier", train_size=n), seeds)
  source = study.workdir("pretrain/direction4")
  second = study.run(
    "pretrain/distance",
    Config("distance", "fourier", train_size=n),
    seeds,
    init_from=source,
    init_skip=("^params/head/",),  # new task, new head
  )
  if not study.done("pretrain", "probes"):
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
  study.pretrained = study.workdir("pretrain/distance")
  return study.pretrained


def _table_run(study: Study, key: str, label: str, config: Config, seeds) -> sweep.Result:
  if config.posemb != "fourier_pretrained":
    return study.run(key, config, seeds, label)
  source = pretrain(study)  # its positions start this model; the rest is initialised afresh
  config = dataclasses.replace(config, posemb="fourier")
  return study.run(key, config, seeds, label, init_from=source, init_skip=(sweep.NOT_POSITIONS,))


def tables(study: Study) -> None:
  """003 Tables 1, 3, 4 with the probes of Table 2 and the maps of Fig. 5."""
  seeds = range(study.mode.seeds)
  for enc, config in plan.table_configs(study.mode):
    if study.done("tables", f"{config.task}/{enc}"):
      continue
    result = _table_run(study, f"tables/{config.task}/{enc}", enc, config, seeds)
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
    study.record("tables", f"{config.task}/{enc}", entry)


def curves(study: Study) -> None:
  """003 Fig. 3: test scores against the number of training images."""
  seeds = range(study.mode.few_seeds)
  for config, epochs in plan.curve_configs(study.mode):
    if study.done("curves", plan.curve_key(config)):
      continue
    result = study.run(f"curves/{plan.curve_key(config)}", config, seeds, epochs=epochs)
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
    result = study.run(f"ablation/{plan.ablation_key(config)}", config, seeds)
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
      result = study.run(f"gabor_{name}/{label}", config, seeds, label)
      study.record(
        f"gabor_{name}", label, result.summary() | {"params": positions.count(result.params)}
      )
  refit(study)


def refit(study: Study) -> None:
  """000 Table 1: freeze a trained `embed_1d` model, train only new gabor / edge positions."""
  seeds = list(range(study.mode.few_seeds))
  config = Config("distance", "embed_1d", train_size=study.mode.train_size)
  source = study.run("gabor_refit/embed_1d", config, seeds)
  study.record(
    "gabor_refit",
    "embed_1d",
    {"test": source.test.tolist(), "params": positions.count(source.params)},
  )
  for enc in study.mode.refit:
    if study.done("gabor_refit", enc):
      continue
    result = study.run(
      f"gabor_refit/{enc}",
      Config("distance", enc, train_size=study.mode.train_size),
      seeds,
      f"refit {enc}",
      epochs=study.mode.refit_epochs,
      init_from=study.workdir("gabor_refit/embed_1d"),  # the trained body; new positions
      init_skip=(sweep.POSITIONS,),
      trainable=(sweep.POSITIONS,),
    )
    extra = {"params": positions.count(result.params), "epochs": study.mode.refit_epochs}
    study.record("gabor_refit", enc, result.summary() | extra)


def defaults(study: Study) -> None:
  """`direction` at lfpe's default initial scales: the reason for `sweep.POSITION_INIT`."""
  seeds = range(study.mode.seeds)
  for label, config in plan.defaults_configs(study.mode):
    if not study.done("defaults", label):
      result = study.run(f"defaults/{label}", config, seeds, label)
      study.record("defaults", label, result.summary())


def speed(study: Study, epochs: int = 2) -> None:
  """Wall time of S seeds trained as one vmapped program (`config.seeds`) against the same
  seeds trained one after another (S plain runs of the trainer)."""
  seeds = list(range(study.mode.seeds))
  config = Config("direction", "embed_1d", train_size=study.mode.train_size)
  for strategy in plan.SPEED_STRATEGIES:
    if study.done("speed", strategy):
      continue
    groups = [seeds] if strategy == "vmap" else [[s] for s in seeds]
    spec = dataclasses.replace(study.mode.spec, epochs=epochs)
    with tempfile.TemporaryDirectory() as scratch:  # always trained afresh, never read back
      start = time.perf_counter()
      for group in groups:
        settings = sweep.trainer_config(config, spec, group, study.data_dir)
        settings.seeds = len(group) if strategy == "vmap" else 0  # a plain run: no seed axis
        trainer.train_and_evaluate(settings, os.path.join(scratch, str(group[0])))
      seconds = time.perf_counter() - start
    study.log(f"  speed {strategy}: {seconds:.1f}s for {len(seeds)} seeds x {epochs} epochs")
    study.record(
      "speed",
      strategy,
      {
        "seconds": seconds,
        "seeds": len(seeds),
        "epochs": epochs,
        "examples": study.mode.train_size or 5000,
      },
    )
