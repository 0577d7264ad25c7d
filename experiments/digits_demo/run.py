"""The Quickstart job: ViTs with embed_1d, sine_2d and fourier on digits, over seeds.

  python -m experiments.digits_demo.run [--seeds 3] [--steps 600] [--quick] [--out DIR]
  python -m experiments.digits_demo.run --seeds 5 --encodings embed_1d,sine_2d,fourier,none \
    --out experiments/digits_demo     # the committed record (README)

Trains the recipe of `configs/vit_digits.py` (its model, AdamW with clipping, warmup-cosine,
label smoothing, dropout, batch 64) for `--steps` steps (default 600; `--steps 1000` is the
config's length) through the one trainer, `lfpe.train.trainer`, one workdir per seed under
`--out/runs/` (a re-run reads finished runs and resumes interrupted ones), prints test
accuracy as mean ± 95 % t-interval over seeds and writes `results.json`, `claims.json`,
`results.md` and `digits_demo.png` into `--out`: by default `workdirs/digits_demo` (ignored by
git; `workdirs/digits_demo_quick` with `--quick`), so the demo never rewrites the committed
record in experiments/digits_demo/, which only the record's own command (above) writes.

Why seeds and intervals: a run's accuracy moves by 1-3 points with the seed and also with the
CPU (XLA:CPU's code differs per instruction set and thread count; rounding differences of
1e-6 at the first step grow over the run), so one number does not reproduce on another
machine. Results are kept per setting and step count: rerun under e.g.
`XLA_FLAGS=--xla_cpu_max_isa=AVX2` to add that setting. Seed s here is seed s of
`python -m lfpe.main --config=configs/vit_digits.py:posemb=NAME --config.seed=s` with the
demo's `total_steps` and warmup.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

from configs import vit_digits
from experiments import cli, stats
from experiments.provenance import provenance
from experiments.stats import difference, interval
from lfpe.train import trainer

ENCODINGS = ("embed_1d", "sine_2d", "fourier")
SEEDS, STEPS = 3, 600  # the default run (its time on 2 cores: docs/testing.md)
RECIPE_STEPS = 1000  # configs/vit_digits.py


def demo_config(posemb: str, steps: int, quick: bool):
  """`configs/vit_digits.py` for `posemb`; `steps` updates with a 10 % warmup (the recipe's)."""
  config = vit_digits.get_config(f"posemb={posemb},small={int(quick)}")
  if not quick:
    with config.unlocked():
      config.total_steps, config.schedule.warmup_steps = steps, steps // 10
  return config


def train_encoding(config, seeds: int, runs: str) -> dict:
  """Test accuracies of seeds `0..seeds-1` of one config, their mean loss curve, wall time.

  Each seed is one run of the trainer (`python -m lfpe.main` with `--config.seed=s`) in
  `runs/seed<s>`: seed s here is seed s of the command line. A finished workdir is read, not
  retrained, and an interrupted one resumes, so the demo is resumable run by run.
  """
  accuracy, losses, seconds = [], [], 0.0
  for seed in range(seeds):
    with config.unlocked():
      config.seed = seed
    workdir = os.path.join(runs, f"seed{seed}")
    summary = trainer.train_and_evaluate(config, workdir)
    accuracy.append(summary["eval"]["accuracy"])
    seconds += summary.get("wall_s", 0.0)  # training time (its last segment, if resumed)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      train = [r for r in map(json.loads, f) if r["split"] == "train"]
    losses.append({r["step"]: r["loss"] for r in train})
  steps = sorted(set.intersection(*(set(curve) for curve in losses)))
  return {
    "accuracy": accuracy,
    "curve": {"step": steps, "loss": [float(np.mean([c[s] for c in losses])) for s in steps]},
    "seconds": seconds,
  }


def claims(entry: dict) -> list[dict]:
  """The claims this record tests (claims.json), on test accuracy in points, paired by seed
  (seed s of each encoding shares its data order and init stream)."""
  acc = {k: v["accuracy"] for k, v in entry["encodings"].items()}
  tested = [
    (
      "Sec. 4.3",
      "Learnable-Fourier+MLP beats Embed-1D in a ViT (ImageNet top-1 74.5 vs 73.6 %); "
      "here a 2-block ViT on digits",
      "fourier",
      "embed_1d",
    ),
    (
      "Sec. 4.3 (ViT Table 8)",
      "a ViT suffers without a position encoding (the control: position matters here)",
      "embed_1d",
      "none",
    ),
  ]
  return [
    stats.claim(
      paper="002",
      item=item,
      text=text,
      metric="test accuracy (points)",
      a=a,
      b=b,
      a_values=acc[a],
      b_values=acc[b],
      paired=True,
      scale=100,
    )
    for item, text, a, b in tested
    if a in acc and b in acc and min(len(acc[a]), len(acc[b])) >= 2
  ]


def machine() -> dict:
  """The XLA:CPU setting of this run: max ISA (XLA_FLAGS), AVX-512 on the host, cores."""
  match = re.search(r"--xla_cpu_max_isa=(\w+)", os.environ.get("XLA_FLAGS", ""))
  with open("/proc/cpuinfo") as f:
    cpuinfo = f.read()
  model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
  return {
    "isa": match.group(1) if match else "default",
    "avx512": " avx512f" in cpuinfo,
    "cores": len(os.sched_getaffinity(0)),
    "cpu": model.group(1).strip() if model else "unknown",
  }


def setting_name(m: dict) -> str:
  isa = f"max ISA {m['isa']}" if m["isa"] != "default" else "default ISA"
  return f"{isa} ({'AVX-512' if m['avx512'] else 'no AVX-512'} host, {m['cores']} cores)"


def verdict(results: dict) -> str:
  """`fourier` against `sine_2d`: the difference of means with its interval, in words."""
  if not {"fourier", "sine_2d"} <= set(results) or min(len(r) for r in results.values()) < 2:
    return ""
  a, b = results["fourier"], results["sine_2d"]
  paired = len(a) == len(b)  # seed s of both: the same data order and init stream
  diff, half = (stats.paired_difference if paired else difference)(a, b, scale=100)
  word = "beats" if diff - half > 0 else "trails" if diff + half < 0 else "matches"
  return (
    f"`fourier` − `sine_2d`: {diff:+.2f} ± {half:.2f} points (95 % CI, "
    f"{'paired by seed' if paired else 'Welch'}): "
    f"`fourier` {word} `sine_2d`"
    + (" (the interval holds 0: no difference shown)." if word == "matches" else ".")
  )


def table(accuracies: dict[str, list[float]], seconds: dict[str, float] | None = None) -> str:
  """Markdown per encoding: mean ± 95 % CI, where one more run lands (95 % prediction
  interval), the runs' range and count (and seconds)."""
  head = "| encoding | test accuracy (mean ± 95 % CI) | one run (95 % PI) | min – max | runs |"
  lines = [head + " s |" * bool(seconds), "|---|---|---|---|---|" + "---|" * bool(seconds)]
  for name, acc in accuracies.items():
    (mean, half), (_, one) = interval(acc, scale=100), interval(acc, scale=100, one_run=True)
    lines.append(
      f"| `{name}` | {mean:.2f} ± {half:.2f} % | {mean - one:.1f} – {mean + one:.1f} % "
      f"| {100 * min(acc):.2f} – {100 * max(acc):.2f} % | {len(acc)} |"
      + (f" {seconds[name]:.0f} |" if seconds else "")
    )
  return "\n".join(lines)


def setting_section(entry: dict) -> str:
  """One setting's heading, machine line, table and verdict."""
  acc = {k: v["accuracy"] for k, v in entry["encodings"].items()}
  sec = {k: v["seconds"] for k, v in entry["encodings"].items()}
  return "\n\n".join(
    [
      f"### {entry['setting']}",
      f"{entry['machine']['cpu']}; {entry['seeds']} seeds per encoding; "
      f"{entry['seconds']:.0f} s of training in all (`{entry['command']}`).",
      table(acc, sec),
      verdict(acc),
    ]
  )


def markdown(settings: dict) -> str:
  """results.md: per step count, one section per XLA:CPU setting (never pooled)."""
  parts = [
    "# ViT on digits: test accuracy over seeds and XLA:CPU settings",
    "Written by `experiments/digits_demo/run.py` (the recipe of `configs/vit_digits.py`, "
    "each seed one run of the trainer, as `python -m lfpe.main`). Mean ± 95 % confidence "
    "interval of the mean, and the 95 % "
    "prediction interval of one more run (Student t over seeds): one run, such as "
    "`python -m lfpe.main` with one seed, lands anywhere in it, and the same seed gives "
    "another number on another CPU. Settings are not pooled: seed s on two settings shares "
    "its init and data order, so those runs are not independent. s: seconds of training, "
    "summed over seeds (load-dependent).",
  ]
  for steps in sorted({e["steps"] for e in settings.values()}, reverse=True):
    group = {k: e for k, e in settings.items() if e["steps"] == steps}
    recipe = " (the recipe's length)" if steps == RECIPE_STEPS else ""
    batch = next(iter(group.values()))["batch"]
    parts += [f"## {steps} steps of {batch}{recipe}", *map(setting_section, group.values())]
  return "\n\n".join(p for p in parts if p) + "\n"


def plot(settings: dict, current: str, path: str) -> None:
  """Left: runs and mean ± 95 % CI per setting of `current`'s step count; right: its losses."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  steps = settings[current]["steps"]
  group = [e for e in settings.values() if e["steps"] == steps]
  names = list(settings[current]["encodings"])
  fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 4))
  for j, entry in enumerate(group):
    for i, name in enumerate(names):
      acc = 100 * np.asarray(entry["encodings"].get(name, {}).get("accuracy", []))
      if not len(acc):
        continue
      x = i + (j - (len(group) - 1) / 2) * 0.7 / len(group)
      ax_acc.plot([x] * len(acc), acc, ".", color=f"C{j}", alpha=0.5)
      mean, half = interval(acc / 100, scale=100)
      label = entry["setting"] if i == 0 else None
      ax_acc.errorbar(x, mean, yerr=half, fmt="o", color=f"C{j}", capsize=4, label=label)
  ax_acc.set_xticks(range(len(names)), names)
  ax_acc.set_ylabel("test accuracy (%): runs, mean ± 95 % CI")
  ax_acc.legend(fontsize=7, loc="lower right")
  for name in names:
    curve = settings[current]["encodings"][name]["curve"]
    ax_loss.plot(curve["step"], curve["loss"], label=name)
  ax_loss.set_xlabel("step")
  ax_loss.set_ylabel("training loss (mean over seeds)")
  ax_loss.set_title(settings[current]["setting"], fontsize=9)
  ax_loss.set_yscale("log")
  ax_loss.legend()
  fig.suptitle(f"ViT on digits, {steps} steps: position encodings over seeds and CPU settings")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds per encoding (>= 2)")
  parser.add_argument("--steps", type=int, default=STEPS, help="steps of 64 (recipe: 1000)")
  parser.add_argument("--encodings", default=",".join(ENCODINGS))
  parser.add_argument("--quick", action="store_true", help="CI: tiny model, 6 steps, 2 seeds")
  parser.add_argument(
    "--out", default="", help="default workdirs/digits_demo (_quick); the record's: its folder"
  )
  args = parser.parse_args(argv)
  args.out = args.out or os.path.join("workdirs", "digits_demo" + "_quick" * args.quick)
  if args.quick:
    args.seeds = min(args.seeds, 2)
  if args.seeds < 2:
    parser.error("--seeds must be at least 2 (an interval needs two runs)")
  return args


def run_setting(args: argparse.Namespace, command: str) -> dict:
  """Every encoding over seeds on this machine: one results entry."""
  this = machine()
  entry = {"setting": setting_name(this), "machine": this, "seeds": args.seeds}
  print(f"{entry['setting']}: {args.seeds} seeds per encoding", flush=True)
  encodings = {}
  setting = re.sub(r"\W+", "_", entry["setting"]).strip("_").lower()
  for posemb in args.encodings.split(","):
    config = demo_config(posemb, args.steps, args.quick)
    runs = os.path.join(args.out, "runs", f"{setting}_{config.total_steps}_steps", posemb)
    encodings[posemb] = train_encoding(config, args.seeds, runs)
    mean, half = interval(encodings[posemb]["accuracy"], scale=100)
    seconds = encodings[posemb]["seconds"]
    print(f"{posemb}: test accuracy {mean:.2f} ± {half:.2f} % ({seconds:.0f} s)", flush=True)
  seconds = sum(e["seconds"] for e in encodings.values())
  return {
    **entry,
    "provenance": provenance(command.split()),
    "steps": config.total_steps,
    "batch": config.batch_size,
    "command": command,
    "seconds": seconds,
    "encodings": encodings,
  }


def main(argv: list[str] | None = None) -> dict:
  """Runs this setting, merges it into `--out/results.json`, rewrites results.md and the PNG."""
  argv = sys.argv[1:] if argv is None else argv
  args = parse(argv)
  flags = os.environ.get("XLA_FLAGS", "")
  command = " ".join([f"XLA_FLAGS={flags}"] * bool(flags) + ["python -m", __spec__.name, *argv])
  entry = run_setting(args, command)
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "results.json")
  settings = {}
  if os.path.exists(path):
    with open(path) as f:
      settings = json.load(f)["settings"]
  key = f"{entry['setting']}, {entry['steps']} steps"
  settings[key] = entry
  with open(path, "w") as f:
    json.dump({"settings": settings}, f, indent=1)
  with open(os.path.join(args.out, "claims.json"), "w") as f:
    json.dump(claims(entry), f, indent=1)
  with open(os.path.join(args.out, "results.md"), "w") as f:
    f.write(markdown(settings))
  plot(settings, key, os.path.join(args.out, "digits_demo.png"))
  print(f"\n{entry['steps']} steps of {entry['batch']}\n\n" + setting_section(entry))
  for c in claims(entry):
    print(
      f"{c['a']} - {c['b']}: {c['difference']:+.2f} [{c['ci_low']:+.2f}, {c['ci_high']:+.2f}]"
      f" points (paired, n={c['n']}): {c['verdict']}"
    )
  print(f"\nwrote results.json, claims.json, results.md and digits_demo.png to {args.out}")
  return settings


if __name__ == "__main__":
  cli.run(main)
