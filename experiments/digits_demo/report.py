"""The digits record's tables, verdicts, claims and plot, from its results.json.

Runs are grouped by step count and XLA:CPU setting (`run.setting_name`): a run's accuracy
moves with the CPU as well as the seed, so settings are reported side by side, never pooled
(seed s on two settings shares its init and data order: those runs are not independent).
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from experiments import claims as claims_table  # noqa: E402
from experiments import stats  # noqa: E402
from experiments.stats import interval  # noqa: E402

RECIPE_STEPS = 1000  # configs/vit_digits.py
TESTED = (  # (item, claim, a, b): 002's claims this record tests, on test accuracy
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
)


def groups(results: dict) -> dict[tuple[int, str], dict]:
  """`{(steps, setting): {"entries": [run entries], "accuracy": {posemb: [per seed]}}}`,
  each encoding's accuracies in seed order (seed s of every encoding paired)."""
  out: dict = {}
  entries = [e for key, e in results.items() if key != "provenance"]
  for entry in sorted(entries, key=lambda e: e["seed"]):
    group = out.setdefault((entry["steps"], entry["setting"]), {"entries": [], "accuracy": {}})
    group["entries"].append(entry)
    group["accuracy"].setdefault(entry["encoding"], []).append(entry["accuracy"])
  return out


def claims(accuracy: dict[str, list[float]]) -> list[dict]:
  """The claims one setting tests (claims.json), in points, paired by seed."""
  return [
    stats.claim(
      paper="002",
      item=item,
      text=text,
      metric="test accuracy (points)",
      a=a,
      b=b,
      a_values=accuracy[a],
      b_values=accuracy[b],
      paired=True,
      scale=100,
      tuned=stats.AT_DEFAULTS + " (Fourier at the config's γ = 0.25, set by hand)",
    )
    for item, text, a, b in TESTED
    if a in accuracy and b in accuracy and len(accuracy[a]) == len(accuracy[b]) >= 2
  ]


def verdict(accuracy: dict[str, list[float]]) -> str:
  """`fourier` against `sine_2d`: the difference of means with its interval, in words."""
  if not {"fourier", "sine_2d"} <= set(accuracy) or min(map(len, accuracy.values())) < 2:
    return ""
  a, b = accuracy["fourier"], accuracy["sine_2d"]
  paired = len(a) == len(b)  # seed s of both: the same data order and init stream
  diff, half = (stats.paired_difference if paired else stats.difference)(a, b, scale=100)
  word = "beats" if diff - half > 0 else "trails" if diff + half < 0 else "matches"
  return (
    f"`fourier` − `sine_2d`: {diff:+.2f} ± {half:.2f} points (95 % CI, "
    f"{'paired by seed' if paired else 'Welch'}): `fourier` {word} `sine_2d`"
    + (" (the interval holds 0: no difference shown)." if word == "matches" else ".")
  )


def table(accuracy: dict[str, list[float]], seconds: dict[str, float]) -> str:
  """Markdown per encoding: mean ± 95 % CI, where one more run lands (95 % prediction
  interval), the runs' range and count, and seconds of training."""
  lines = [
    "| encoding | test accuracy (mean ± 95 % CI) | one run (95 % PI) | min – max | runs | s |",
    "|---|---|---|---|---|---|",
  ]
  for name, acc in accuracy.items():
    (mean, half), (_, one) = interval(acc, scale=100), interval(acc, scale=100, one_run=True)
    lines.append(
      f"| `{name}` | {mean:.2f} ± {half:.2f} % | {mean - one:.1f} – {mean + one:.1f} % "
      f"| {100 * min(acc):.2f} – {100 * max(acc):.2f} % | {len(acc)} | {seconds[name]:.0f} |"
    )
  return "\n".join(lines)


def section(setting: str, group: dict) -> str:
  """One setting's heading, machine line, table and verdict."""
  entries, accuracy = group["entries"], group["accuracy"]
  seconds = {p: sum(e["seconds"] or 0 for e in entries if e["encoding"] == p) for p in accuracy}
  seeds = max(map(len, accuracy.values()))
  cpu = entries[0]["machine"]["cpu"]
  return "\n\n".join(
    [
      f"### {setting}",
      f"{cpu}; {seeds} seeds per encoding; {sum(seconds.values()):.0f} s of training in all.",
      table(accuracy, seconds),
      verdict(accuracy),
    ]
  )


def markdown(results: dict) -> str:
  """results.md: per step count, one section per XLA:CPU setting (never pooled)."""
  parts = [
    "# ViT on digits: test accuracy over seeds and XLA:CPU settings",
    "Written by `experiments/digits_demo/report.py` (the recipe of `configs/vit_digits.py`, "
    "each seed one run of the trainer, as `python -m lfpe.main`). Mean ± 95 % confidence "
    "interval of the mean, and the 95 % prediction interval of one more run (Student t over "
    "seeds): one run, such as `python -m lfpe.main` with one seed, lands anywhere in it, and "
    "the same seed gives another number on another CPU. Settings are not pooled: seed s on "
    "two settings shares its init and data order, so those runs are not independent. s: "
    "seconds of training, summed over seeds (load-dependent).",
  ]
  by_group = groups(results)
  for steps in sorted({s for s, _ in by_group}, reverse=True):
    batch = next(g for (s, _), g in by_group.items() if s == steps)["entries"][0]["batch"]
    recipe = " (the recipe's length)" if steps == RECIPE_STEPS else ""
    parts.append(f"## {steps} steps of {batch}{recipe}")
    parts += [section(setting, g) for (s, setting), g in by_group.items() if s == steps]
  return "\n\n".join(p for p in parts if p) + "\n"


def plot(results: dict, current: tuple[int, str], path: str) -> None:
  """Left: runs and mean ± 95 % CI per setting of `current`'s step count; right: the mean
  training loss of `current`'s runs."""
  by_group = groups(results)
  group = [(setting, g) for (s, setting), g in by_group.items() if s == current[0]]
  names = list(by_group[current]["accuracy"])
  fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 4))
  for j, (setting, g) in enumerate(group):
    for i, name in enumerate(names):
      acc = 100 * np.asarray(g["accuracy"].get(name, []))
      if not len(acc):
        continue
      x = i + (j - (len(group) - 1) / 2) * 0.7 / len(group)
      ax_acc.plot([x] * len(acc), acc, ".", color=f"C{j}", alpha=0.5)
      mean, half = interval(acc / 100, scale=100)
      label = setting if i == 0 else None
      ax_acc.errorbar(x, mean, yerr=half, fmt="o", color=f"C{j}", capsize=4, label=label)
  ax_acc.set_xticks(range(len(names)), names)
  ax_acc.set_ylabel("test accuracy (%): runs, mean ± 95 % CI")
  ax_acc.legend(fontsize=7, loc="lower right")
  for name in names:
    curves = [e["curve"] for e in by_group[current]["entries"] if e["encoding"] == name]
    steps = sorted(set.intersection(*(set(c["step"]) for c in curves)))
    losses = [dict(zip(c["step"], c["loss"], strict=True)) for c in curves]
    ax_loss.plot(steps, [np.mean([c[s] for c in losses]) for s in steps], label=name)
  ax_loss.set_xlabel("step")
  ax_loss.set_ylabel("training loss (mean over seeds)")
  ax_loss.set_title(current[1], fontsize=9)
  ax_loss.set_yscale("log")
  ax_loss.legend()
  fig.suptitle(f"ViT on digits, {current[0]} steps: position encodings over seeds and settings")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def newest(results: dict) -> tuple[int, str]:
  """(steps, setting) of the most recently trained run: the group claims.json tests."""
  entries = [e for key, e in results.items() if key != "provenance"]
  last = max(entries, key=lambda e: e["provenance"]["date"])
  return last["steps"], last["setting"]


def write(results: dict, out: str, current: tuple[int, str]) -> str:
  """results.md, digits_demo.png and claims.json (of `current`: this machine's setting and
  step count) into `out`; returns `current`'s section, to print."""
  with open(os.path.join(out, "results.md"), "w") as f:
    f.write(markdown(results))
  plot(results, current, os.path.join(out, "digits_demo.png"))
  accuracy = groups(results)[current]["accuracy"]
  claims_table.write(claims(accuracy), out)
  return section(current[1], groups(results)[current])
