"""Whether this tree trains and tests the resolution record's arms as an older commit did.

  git worktree add /tmp/base 92e7663        # the commit of the record's newest runs
  python -m experiments.resolution.code_check --baseline /tmp/base [--arms none,rope_axial]

Each arm (`plan.by_slug`, seed 0, the small config) trains 4 steps and is tested at 32 and
128 px (`SIZES`) under each of its policies, once in each tree: a fresh process whose
`PYTHONPATH` is that tree, so that lfpe/, configs/ and experiments/ come from it (its
datasets are built anew, under the tree's own code). The parameters' digest and every
test's summed loss are compared exactly. A record resumed at a later commit keeps its
earlier runs of the arms that print `equal` (on one CPU and thread count: XLA:CPU may round
otherwise elsewhere); an arm that differs trains again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "CODE_CHECK "  # the line of the probe's output that holds its findings
SIZES = (32, 128)  # a shrinking and an enlarging test size


def probe(out: str, arms: list[str]) -> dict:
  """{arm: {"params": digest, "tests": {name: metrics}}} in the tree this process imports
  (`{"error": ...}` for an arm it cannot build)."""
  import hashlib  # noqa: PLC0415  (imported here: the caller's process never starts JAX)

  import jax  # noqa: PLC0415
  import numpy as np  # noqa: PLC0415

  from experiments.resolution import plan, run  # noqa: PLC0415
  from lfpe.train import trainer  # noqa: PLC0415

  args = run.parse(["--quick", f"--out={out}", "--steps=4"])
  found = {}
  for slug, arm in plan.by_slug(False).items():
    if arms and slug not in arms:
      continue
    config = run.load_config(arm, 0, args)
    with config.unlocked():
      config.data.data_dir = os.path.join(out, "data")
      config.checkpoint_every = config.eval_every = 4
      config.progress = False
      try:
        config.evals = plan.evals(arm, str(config.model.posemb), SIZES, config.data.name)
      except TypeError:  # before 63892b1 (2026-11-27): its tests drew their scenes anew
        config.evals = plan.evals(arm, str(config.model.posemb), SIZES)
    workdir = os.path.join(out, slug)
    try:
      summary = trainer.train_and_evaluate(config, workdir)
      _, variables = trainer.restore(config, workdir)
    except Exception as e:  # noqa: BLE001  (an arm this tree cannot build is a finding)
      found[slug] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
      continue
    leaves = b"".join(np.asarray(x).tobytes() for x in jax.tree.leaves(variables))
    tests = {k: v for k, v in summary.items() if k.startswith("eval")}
    found[slug] = {"params": hashlib.sha256(leaves).hexdigest()[:16], "tests": tests}
  return found


def in_tree(tree: str, arms: list[str], out: str) -> dict:
  """`probe` run by a fresh interpreter on `tree`'s code."""
  command = [sys.executable, os.path.abspath(__file__), "--probe", out, "--arms", ",".join(arms)]
  env = {**os.environ, "PYTHONPATH": tree, "JAX_PLATFORMS": "cpu"}
  done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
  lines = [x for x in done.stdout.splitlines() if x.startswith(MARK)]
  if done.returncode or not lines:
    sys.exit(f"the probe failed in {tree}:\n{done.stderr[-3000:]}")
  return json.loads(lines[-1].removeprefix(MARK))


def compare(baseline: dict, here: dict) -> list[str]:
  """One line per arm: `equal` (its parameters and every test both trees ran), or what
  differs; tests one tree's plan runs and the other's does not are named, not compared."""
  lines = []
  for arm in sorted(set(baseline) | set(here)):
    if arm not in baseline or arm not in here:
      lines.append(f"{arm}: only in {'this tree' if arm in here else 'the baseline'}")
      continue
    old, new = baseline[arm], here[arm]
    if "error" in old or "error" in new:
      lines.append(f"{arm}: error: {old.get('error') or new.get('error')}")
      continue
    shared = sorted(set(old["tests"]) & set(new["tests"]))
    differ = [n for n in shared if old["tests"][n] != new["tests"][n]]
    unshared = [
      f"only in {where}: {', '.join(sorted(set(a) - set(b)))}"
      for where, a, b in (("the baseline", old["tests"], new["tests"]),
                          ("this tree", new["tests"], old["tests"]))
      if set(a) - set(b)
    ]  # fmt: skip
    if old["params"] == new["params"] and not differ:
      lines.append(f"{arm}: equal ({'; '.join([f'{len(shared)} tests', *unshared])})")
    else:
      said = "parameters differ" if old["params"] != new["params"] else "parameters equal"
      lines.append(f"{arm}: DIFFERS ({said}; tests differing: {', '.join(differ) or 'none'})")
  return lines


def main(argv: list[str] | None = None) -> list[str]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--baseline", help="a worktree of the older commit")
  parser.add_argument("--arms", default="", help="comma-separated arm slugs (default: all)")
  parser.add_argument("--probe", help=argparse.SUPPRESS)  # the child: probe into this folder
  args = parser.parse_args(argv)
  arms = [a for a in args.arms.split(",") if a]
  if args.probe:
    print(MARK + json.dumps(probe(args.probe, arms), sort_keys=True), flush=True)
    return []
  if not args.baseline or not os.path.isdir(os.path.join(args.baseline, "lfpe")):
    parser.error("--baseline must be a worktree of the older commit (git worktree add DIR REV)")
  with tempfile.TemporaryDirectory() as tmp:
    old = in_tree(os.path.abspath(args.baseline), arms, os.path.join(tmp, "baseline"))
    new = in_tree(ROOT, arms, os.path.join(tmp, "here"))
  lines = compare(old, new)
  print(*lines, sep="\n")
  return lines


if __name__ == "__main__":
  main()
