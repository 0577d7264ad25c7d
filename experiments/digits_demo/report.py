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
from experiments import recipe, stats, sweeps  # noqa: E402
from experiments.stats import interval  # noqa: E402
from lfpe import encodings  # noqa: E402

RECIPE_STEPS = 1000  # configs/vit_digits.py
# The length rule, declared 2026-11-29 before its check ran (README, "Recipe"): every encoding's
# mean test accuracy at defaults gains less than 1 point over the last 150 of the record's
# 600 steps; 1 point is below the record's smallest minimum detectable difference
# (1.68), so what an arm would still gain cannot turn a verdict the record can resolve.
LENGTH_RULE = recipe.LengthRule(window=150, tolerance=1.0, higher_is_better=True, scale=100)
TESTED = (  # (item, claim, a, b, 002's a − b): 002's claims this record tests, on test accuracy
  (
    "Sec. 4.3",
    "Learnable-Fourier+MLP beats Embed-1D in a ViT (ImageNet top-1 74.5 vs 73.6 %); "
    "here a 2-block ViT on digits",
    "fourier",
    "embed_1d",
    0.9,
  ),
  (
    "Sec. 4.3 (ViT Table 8)",
    "a ViT suffers without a position encoding (the control: position matters here)",
    "embed_1d",
    "none",
    None,
  ),
)


def validation_accuracy(entry: dict) -> float:
  """A sweep run's score: accuracy on its validation digits."""
  return entry["accuracy"]


def sweep(results: dict) -> dict[str, dict[float, list[float]]]:
  """`{arm: {knob value: [validation accuracy per seed]}}`, arm `<setting>/<steps>_steps/<enc>`."""
  return sweeps.scores(results, validation_accuracy)


def chosen(results: dict) -> dict[str, float]:
  """The shared rule, per arm swept: the knob value with the best mean validation accuracy."""
  return sweeps.choose(sweep(results), higher_is_better=True)


def groups(results: dict) -> dict[tuple[int, str], dict]:
  """`{(steps, setting): {"entries": [defaults runs], "accuracy": {encoding: {seed: accuracy}},
  "tuned": {encoding: {seed: accuracy at the sweep's choice}}, "sweep": {encoding: {value:
  [...]}}, "length": {encoding: [the length check's test accuracy curves], "encoding (tuned)":
  [...]}}}`, seeds in order (claims pair arms on their common seeds). A run is in `tuned` when
  its knob has the value the sweep chose for its arm (the defaults run, when that is the
  default)."""
  picks, swept, out = chosen(results), sweep(results), {}
  records = [(k, e) for k, e in results.items() if k != "provenance" and not k.startswith("sweep/")]
  for key, entry in sorted(records, key=lambda item: item[1]["seed"]):
    group = out.setdefault(
      (entry["steps"], entry["setting"]),
      {"entries": [], "accuracy": {}, "tuned": {}, "sweep": {}, "length": {}},
    )
    if key.startswith(recipe.LENGTH):  # the length check (run.py --length): curves only
      name = entry["encoding"] + recipe.TUNED * sweeps.is_tuned_key(key)  # its sweep's choice
      group["length"].setdefault(name, []).append(entry["test_curve"])
      continue
    arm, name, knob = (
      "/".join(key.split("/")[:3]),
      entry["encoding"],
      encodings.knob(entry["posemb"]),
    )
    if arm in swept:
      group["sweep"][name] = swept[arm]
    if not sweeps.is_tuned_key(key):  # `<setting>/<steps>_steps/<encoding>/<seed>`: defaults
      group["entries"].append(entry)
      group["accuracy"].setdefault(name, {})[entry["seed"]] = entry["accuracy"]
    if arm in picks and knob and sweeps.is_own(entry["posemb"], picks[arm]):
      group["tuned"].setdefault(name, {})[entry["seed"]] = entry["accuracy"]
  return out


def claims(group: dict) -> list[dict]:
  """The claims one setting tests (claims.json), in points, paired by seed: each at defaults,
  then (after a sweep) each again with both arms at their tuned values (same budget, rule)."""
  at_defaults = stats.AT_DEFAULTS + " (Fourier at the config's γ = 0.25, set by hand)"
  out, gap = [], control_gap(group["accuracy"])
  for item, text, a, b, paper in TESTED:
    out.append(_claim(item, text, a, b, paper, group["accuracy"], at_defaults, gap))
  for item, text, a, b, paper in TESTED:
    if a in group["tuned"] and b in group["tuned"]:
      names = [encodings.display_name(x) for x in (a, b)]
      rule = "best mean validation accuracy"
      own = {x: group["sweep"][x] for x in (a, b) if x in group["sweep"]}
      note = sweeps.tuned_note(names, [], own, rule, knob="its own knob")
      out.append(_claim(item, f"{text} (each tuned)", a, b, paper, group["tuned"], note, gap))
  return [c for c in out if c]


def control_gap(accuracy: dict) -> float | None:
  """The best encoding's mean test accuracy at defaults minus no position's (None without a
  control run): the base of every claim's margin (`stats.claim`: a difference inside a tenth
  of it is inside the about-equal margin)."""
  if "none" not in accuracy:
    return None
  mean = lambda arm: np.mean(list(accuracy[arm].values()))
  return float(max(mean(arm) for arm in accuracy if arm != "none") - mean("none"))


def _claim(item, text, a, b, paper, accuracy: dict, tuned: str, gap: float | None) -> dict | None:
  """One claim on test accuracy (points), paired on the seeds both arms ran (`seed_paired`),
  with the setting's `control_gap`; None without two runs of each."""
  if a not in accuracy or b not in accuracy or min(len(accuracy[a]), len(accuracy[b])) < 2:
    return None
  a_values, b_values, paired = stats.seed_paired(accuracy[a], accuracy[b])
  return stats.claim(
    paper="002",
    item=item,
    text=text,
    metric="test accuracy (points)",
    a=a,
    b=b,
    a_values=a_values,
    b_values=b_values,
    paired=paired,
    scale=100,
    control_gap=gap,
    tuned=tuned,
    paper_value=paper,
  )


def claim_line(claim: dict) -> str:
  """One claim as the run prints it: its text, a − b with its 95 % interval, the test used,
  the verdict and its margin note (`claims.margin_note`)."""
  n = claim["n"]
  test = f"paired, n={n}" if claim["paired"] else f"Welch, n={n[0]} and {n[1]}"
  difference = stats.signed_interval(claim["difference"], claim["ci_low"], claim["ci_high"])
  return (
    f"{claim['claim']}: `{claim['a']}` − `{claim['b']}` {difference} points ({test}): "
    f"{claim['verdict']}{claims_table.margin_note(claim)}"
  )


def verdict(accuracy: dict[str, dict[int, float]]) -> str:
  """`fourier` against `sine_2d`: the difference of means with its interval, in words."""
  if not {"fourier", "sine_2d"} <= set(accuracy) or min(map(len, accuracy.values())) < 2:
    return ""
  # seed s of both: the same data order and init stream
  a, b, paired = stats.seed_paired(accuracy["fourier"], accuracy["sine_2d"])
  diff, half = (stats.paired_difference if paired else stats.difference)(a, b, scale=100)
  head = (
    f"`fourier` − `sine_2d`: {diff:+.2f} ± {half:.2f} points (95 % CI, "
    f"{'paired by seed' if paired else 'Welch'}): "
  )
  if abs(diff) <= half:  # neither a difference nor an equivalence is shown
    return head + "unresolved (the interval holds 0: no difference shown, nor equivalence)."
  return head + f"`fourier` {'beats' if diff > 0 else 'trails'} `sine_2d`."


def table(accuracy: dict[str, dict[int, float]], seconds: dict[str, float] | None = None) -> str:
  """Markdown per encoding: mean ± 95 % CI, where one more run lands (95 % prediction
  interval, clipped to 0-100 %), the runs' range and count (and seconds of training)."""
  lines = [
    "| encoding | test accuracy (mean ± 95 % CI) | one run (95 % PI) | min – max | runs |"
    + " s |" * bool(seconds),
    "|---|---|---|---|---|" + "---|" * bool(seconds),
  ]
  for name, by_seed in accuracy.items():
    acc = list(by_seed.values())
    (mean, half), (_, one) = interval(acc, scale=100), interval(acc, scale=100, one_run=True)
    lines.append(
      f"| `{name}` | {mean:.2f} ± {half:.2f} % "
      f"| {max(mean - one, 0):.1f} – {min(mean + one, 100):.1f} % "  # an accuracy's own range
      f"| {100 * min(acc):.2f} – {100 * max(acc):.2f} % | {len(acc)} |"
      + (f" {seconds[name]:.0f} |" if seconds else "")
    )
  return "\n".join(lines)


def _with_knob(name: str) -> str:
  """`sine_2d (temperature)`: an encoding with the name of its knob."""
  return f"{name} ({encodings.knob(name)[0]})"


def tuned_section(group: dict) -> list[str]:
  """The sweep's table and each encoding at its chosen value (empty without a sweep)."""
  if not group["sweep"]:
    return []
  picks = sweeps.choose(group["sweep"], higher_is_better=True)
  cell = lambda values: stats.fmt(values, scale=100, digits=2)
  columns = ("encoding", "validation accuracy (%)")
  sweep_lines = sweeps.table(
    group["sweep"], picks, columns=columns, name=_with_knob, cell=cell, scale=100, knob="value"
  )
  return [
    "**Each encoding tuned** (its knob, `lfpe.encodings.knob`, chosen on the first "
    "validation digits by the best mean accuracy; test accuracy at the chosen value):",
    table(group["tuned"]),
    verdict(group["tuned"]),
    "The sweep (validation digits carved from training):",
    "\n".join(sweep_lines),
  ]


def section(setting: str, group: dict) -> str:
  """One setting's heading, machine line, table and verdict."""
  entries, accuracy = group["entries"], group["accuracy"]
  seconds = {p: sum(e["seconds"] or 0 for e in entries if e["encoding"] == p) for p in accuracy}
  seeds = max(map(len, accuracy.values()))
  cpu = entries[0]["machine"]["cpu"]
  parts = [
    f"### {setting}",
    f"{cpu}; {seeds} seeds per encoding; {sum(seconds.values()):.0f} s of training in all.",
    "**At defaults:**" if group["sweep"] else "",
    table(accuracy, seconds),
    verdict(accuracy),
    *tuned_section(group),
    settled_table(group["length"]),
  ]
  return "\n\n".join(p for p in parts if p)


def settled_table(curves: dict[str, list]) -> str:
  """The length rule (`LENGTH_RULE`) on the length check's test accuracy curves
  (`run.py --length`), in points; empty before the check ran."""
  if not curves:
    return ""
  seeds = len(next(iter(curves.values())))
  table = LENGTH_RULE.table(curves, name=lambda e: f"`{e}`", digits=2, unit=" (points)")
  at = "at defaults" + " and tuned" * any(e.endswith(recipe.TUNED) for e in curves)
  head = f"**The length rule** (test accuracy curves {at}, {seeds} seeds, `--length`):"
  return "\n".join([head, "", *table])


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
      acc = 100 * np.asarray(list(g["accuracy"].get(name, {}).values()))
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


def length_check(results: dict, current: tuple[int, str] | None = None) -> dict | None:
  """Each encoding's length-rule verdict in setting `current` (the newest by default:
  `recipe.LengthRule.check`); None before its length check ran."""
  return LENGTH_RULE.check(groups(results)[current or newest(results)]["length"])


def write(results: dict, out: str, current: tuple[int, str]) -> str:
  """results.md, digits_demo.png and claims.json (of `current`: this machine's setting and
  step count) into `out`; returns `current`'s section, to print."""
  with open(os.path.join(out, "results.md"), "w") as f:
    f.write(markdown(results))
  plot(results, current, os.path.join(out, "digits_demo.png"))
  entries = claims(groups(results)[current])
  claims_table.write(claims_table.mark_settling(entries, length_check(results, current)), out)
  return section(current[1], groups(results)[current])
