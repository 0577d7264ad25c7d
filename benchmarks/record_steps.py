"""The records' train steps, timed side by side in this tree and in an older one.

  git worktree add /tmp/base 595f2c9
  python -m benchmarks.record_steps --baseline /tmp/base [--rounds 3] [--steps 30]

For each record (digits demo, detection, generation, layout) the script starts one fresh
process per tree and round, alternating trees, with `PYTHONPATH` set to that tree so that
`lfpe` and `configs` come from it. Each process builds the trainer's own step
(`lfpe.train.steps.train_step` with the config's task, model and optimizer, jitted with the
state donated, one device), feeds it a fixed batch of the config's dataset (prepared under
`--data_dir` or the TFDS default) and times `--steps` updates after compiling. The figure of
a tree is the best process (on a shared machine the least disturbed one); the ratio
baseline / this tree is the speed-up of the record's step. It also reports the step's
FLOPs (XLA's cost analysis) as a share of an f32 matmul's rate measured in the same process.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (record, config file, its argument in the baseline and here, fields set here): the same
# model and data in both trees, stepped here as the record now steps it (layout_synthetic now
# draws dropout from rbg keys; reformer_digits, the generation record's config, runs its LSH
# rounds at once, set here on reformer_crops, the model of the baseline's record).
RECORDS = (
  ("digits demo", "vit_digits.py", "posemb=fourier", "posemb=fourier", ""),
  ("detection", "detr_shapes.py", "posemb=fourier", "posemb=fourier", ""),
  (
    "generation",
    "reformer_crops.py",
    "posemb=fourier",
    "posemb=fourier",
    "model.rounds_at_once=true",
  ),
  ("layout", "layout_synthetic.py", "posemb=fourier", "captions=templates", ""),
)


def _load_config(path: str, arg: str):
  """`get_config(arg)` of the config file at `path`."""
  spec = importlib.util.spec_from_file_location("config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def _matmul_rate(n: int = 1024, repeats: int = 5) -> float:
  """FLOP/s of the best of `repeats` f32 n x n x n matmuls."""
  import jax
  import jax.numpy as jnp

  x = jnp.ones((n, n), jnp.float32)
  mm = jax.jit(lambda a: a @ a)
  jax.block_until_ready(mm(x))
  best = min(_timed(lambda: jax.block_until_ready(mm(x))) for _ in range(repeats))
  return 2 * n**3 / best


def _timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def step_parts(config) -> tuple:
  """(task, model, optimizer, schedule, a batch of the train data on one device): what the
  trainer's step of `config` takes, from the `lfpe` on sys.path (either tree)."""
  import jax

  from lfpe import data as data_lib
  from lfpe import tasks
  from lfpe.train import optim, sharding

  task, (tx, schedule) = tasks.get(config.task), optim.make_optimizer(config)
  mesh = sharding.make_mesh(config.mesh, jax.devices()[:1])
  loader = data_lib.make_loader(
    config.data,
    global_batch_size=config.batch_size,
    seed=0,
    train=True,
    mesh=sharding.batch_sharding(mesh),
  )
  return task, task.create_model(config), tx, schedule, next(iter(loader))


def worker(args) -> dict:
  """Seconds per train step (after compiling) of the config `args.worker` with `args.set`
  ("path=value,...", a value as JSON or else a string) set, in the tree on sys.path; with a
  barrier, the timed steps start once `args.jobs` workers have compiled; with `args.jobs` > 1
  on one XLA:CPU thread, as `experiments.runs.execute` runs its jobs (only this tree's
  workers run as jobs)."""
  import jax

  if args.jobs > 1:
    from experiments.jobs import one_thread_backend

    one_thread_backend()

  import lfpe
  from lfpe.train import sharding
  from lfpe.train import steps as steps_lib

  config = _load_config(args.worker, args.arg)
  with config.unlocked():
    for path, text in (kv.split("=") for kv in args.set.split(",") if kv):
      *parents, leaf = path.split(".")
      node = functools.reduce(getattr, parents, config)
      try:
        setattr(node, leaf, json.loads(text))  # true, 3, 0.5
      except json.JSONDecodeError:
        setattr(node, leaf, text)  # rbg
    if args.data_dir:
      config.data.data_dir = args.data_dir
  task, model, tx, schedule, batch = step_parts(config)
  state = jax.jit(
    lambda k: sharding.unbox(
      steps_lib.init_state(k, task.example_batch(config), task=task, model=model, tx=tx)
    )
  )(jax.random.key(0))

  def step(state, batch):
    return steps_lib.train_step(
      state,
      batch,
      task=task,
      model=model,
      tx=tx,
      schedule=schedule,
      dropout_rng=jax.random.key(1, impl=config.get("dropout_prng", "threefry2x32")),
    )

  compiled = jax.jit(step, donate_argnums=0).lower(state, batch).compile()
  flops = (compiled.cost_analysis() or {}).get("flops", float("nan"))
  state, metrics = compiled(state, batch)
  jax.block_until_ready(metrics)
  if args.barrier:
    open(os.path.join(args.barrier, str(os.getpid())), "w").close()
    while len(os.listdir(args.barrier)) < args.jobs:
      time.sleep(0.01)
  times = []
  for _ in range(args.steps):
    start = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - start)
  return {
    "lfpe": os.path.dirname(os.path.dirname(lfpe.__file__)),
    "batch": config.batch_size,
    "best_s": min(times),
    "median_s": sorted(times)[len(times) // 2],
    "flops": flops,
    "matmul_flops_per_s": _matmul_rate(),
  }


def _start_worker(tree: str, record: tuple, args, *, jobs: int = 1, barrier: str = "") -> tuple:
  """(process, tree) of `worker` in a fresh process whose `lfpe` and `configs` come from
  `tree`; with `jobs` > 1 on one XLA:CPU thread (as `experiments.runs.execute` runs jobs),
  starting its timed steps when `jobs` workers have compiled (`barrier`: a folder)."""
  _, config, base_arg, here_arg, fields = record
  here = tree == ROOT
  env = {**os.environ, "PYTHONPATH": tree, "JAX_PLATFORMS": "cpu"}
  command = [sys.executable, os.path.abspath(__file__), "--steps", str(args.steps)]
  command += ["--worker", os.path.join(tree, "configs", config)]
  command += ["--arg", here_arg if here else base_arg, "--set", fields if here else ""]
  command += ["--barrier", barrier, "--jobs", str(jobs)] if barrier else []
  command += ["--data_dir", args.data_dir] if args.data_dir else []
  process = subprocess.Popen(command, env=env, cwd=tree, stdout=subprocess.PIPE, text=True)
  return process, tree


def _result(started: tuple) -> dict:
  """The JSON line a worker printed, checked to come from its tree."""
  process, tree = started
  stdout, _ = process.communicate()
  if process.returncode:
    raise SystemExit(f"a worker in {tree} failed (its stderr is above)")
  result = json.loads(stdout.strip().splitlines()[-1])
  if os.path.realpath(result["lfpe"]) != os.path.realpath(tree):
    raise SystemExit(f"lfpe was imported from {result['lfpe']}, not {tree}")
  return result


def _commit(tree: str) -> str:
  out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True)
  return out.stdout.decode().strip()


def compare(args) -> None:
  """Per record, `--rounds` rounds of: the baseline's step, this tree's step, and this tree's
  record throughput with two one-thread jobs at once; prints a Markdown table."""
  from benchmarks.timing import machine

  base, here = _commit(args.baseline), _commit(ROOT)
  print(f"{datetime.date.today()}; {machine()}; {args.steps} steps x {args.rounds} rounds\n")
  print(
    f"| record | batch | {base} ms/step | {here} ms/step | step speed-up | {here} steps/s, "
    f"2 jobs | record speed-up | FLOP share ({here}, 1 job) |\n|---|---|---|---|---|---|---|---|"
  )
  for record in [r for r in RECORDS if not args.records or r[0] in args.records.split(",")]:
    rows = {"base": [], "here": [], "jobs": []}
    for _ in range(args.rounds):
      rows["base"].append(_result(_start_worker(args.baseline, record, args)))
      rows["here"].append(_result(_start_worker(ROOT, record, args)))
      with tempfile.TemporaryDirectory() as barrier:
        pair = [_start_worker(ROOT, record, args, jobs=2, barrier=barrier) for _ in range(2)]
        rows["jobs"].append(sum(1 / _result(p)["median_s"] for p in pair))
    base_s = min(r["median_s"] for r in rows["base"])
    best = min(rows["here"], key=lambda r: r["median_s"])
    jobs = max(rows["jobs"])
    share = best["flops"] / best["median_s"] / max(r["matmul_flops_per_s"] for r in rows["here"])
    print(
      f"| {record[0]} | {best['batch']} | {1e3 * base_s:.1f} | {1e3 * best['median_s']:.1f} | "
      f"{base_s / best['median_s']:.2f}x | {jobs:.2f} | {base_s * jobs:.2f}x | "
      f"{100 * share:.0f} % |",
      flush=True,
    )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--baseline", help="a checkout of the older tree (git worktree add)")
  parser.add_argument("--worker", help=argparse.SUPPRESS)
  parser.add_argument("--arg", default="", help=argparse.SUPPRESS)
  parser.add_argument("--set", default="", help=argparse.SUPPRESS)
  parser.add_argument("--barrier", default="", help=argparse.SUPPRESS)
  parser.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--records", default="", help="comma-separated record names (default: all)")
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--data_dir", default=None, help="where the TFDS datasets are prepared")
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(worker(args)))
  elif args.baseline:
    compare(args)
  else:
    parser.error("--baseline is required (a checkout of the tree to compare against)")


if __name__ == "__main__":
  main()
