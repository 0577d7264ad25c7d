"""Tables, the orderings of 002 Sec. 4.1 checked with intervals, curves and samples."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from experiments import claims as claims_table  # noqa: E402
from experiments import recipe, stats, sweeps  # noqa: E402
from experiments.recipe import TUNED  # noqa: E402
from experiments.stats import fmt, interval  # noqa: E402
from lfpe import encodings  # noqa: E402

ARMS = ("embed_2d", "embed_1d", "sine_2d", "sine_1d", "fourier", "fourier_no_mlp", "mlp", "none")
NAMES = {posemb: encodings.display_name(posemb) for posemb in ARMS}  # the registry's labels
FIGURES = {
  "fig3a": ("embed_2d", "embed_1d", "sine_2d", "sine_1d", "fourier", "none"),
  "fig3b": ("fourier", "fourier_no_mlp", "mlp"),
}
# 002 Sec. 4.1's statements: (a, b, relation), "<": a ends with lower bits/dim than b.
# "Learnable-Fourier + MLP outperforms all the baselines ... lower bits per dim at the end":
# one claim per Fig. 3a baseline.
ORDERINGS = (
  ("fourier", "embed_2d", "<"),
  ("fourier", "embed_1d", "<"),
  ("fourier", "sine_2d", "<"),
  ("fourier", "sine_1d", "<"),
  ("embed_2d", "sine_2d", "<"),
  ("embed_2d", "sine_1d", "<"),
  ("embed_2d", "embed_1d", "<"),
  ("sine_2d", "sine_1d", "<"),
  ("embed_1d", "sine_1d", "~"),
  ("fourier", "fourier_no_mlp", "<"),
  ("fourier", "mlp", "<"),
)


EARLY = 0.3  # 002's "first 30k steps" of its 100k, as a share of training
# The declared length rule (README, "Recipe"): each encoding's mean held-out bits per dim at
# defaults gains less than 0.01 over the last 500 steps.
LENGTH_RULE = recipe.LengthRule(window=500, tolerance=0.01, higher_is_better=False)
TEXTS = {  # 002 Sec. 4.1 on Fig. 3, for each ordering
  **{
    ("fourier", b): f"Learnable-Fourier+MLP ends lower than {NAMES[b]} (best; Fig. 3a)"
    for b in ("embed_2d", "embed_1d", "sine_2d", "sine_1d")
  },
  ("embed_2d", "sine_2d"): "Embed-2D ends lower than Sine-2D (second best)",
  ("embed_2d", "sine_1d"): "Embed-2D ends lower than Sine-1D (second best)",
  ("embed_2d", "embed_1d"): "Embed-2D ends lower than Embed-1D (second best)",
  ("sine_2d", "sine_1d"): "Sine-2D clearly outperforms Sine-1D",
  ("embed_1d", "sine_1d"): 'Embed-1D performs like Sine-1D (002: "similar")',
  ("fourier", "fourier_no_mlp"): "Learnable-Fourier alone ends above L-F+MLP (Fig. 3b)",
  ("fourier", "mlp"): "MLP alone ends above Learnable-Fourier+MLP (Fig. 3b)",
}


def claims(results: dict) -> list[dict]:
  """claims.json: 002's orderings of final held-out bits/dim (lower is better, so a claim
  "a below b" is direction -1), and its early-training claims (faster convergence: at the
  first evaluation; Learnable-Fourier alone "competitive for the first 30k steps" of 100k: the
  mean over the evaluations in the first `EARLY` of training); paired by seed (seed s of
  every encoding trains on the same images in the same order); and the control: the
  encoding with the lowest mean final bits/dim against `none`."""
  tests = [(a, b, "final", -1 if rel == "<" else 0, TEXTS[(a, b)]) for a, b, rel in ORDERINGS]
  tests += [
    (
      "fourier",
      b,
      "first",
      -1,
      f"Learnable-Fourier+MLP converges faster: below {NAMES[b]} at the first evaluation",
    )
    for b in ("embed_2d", "embed_1d", "sine_2d", "sine_1d")
  ]
  tests += [
    ("fourier_no_mlp", "fourier", "early", 0,
     f"Learnable-Fourier alone is competitive early (mean over the first {EARLY:.0%} of "
     "training like Learnable-Fourier+MLP's; 002: the first 30k of 100k steps)"),
  ]  # fmt: skip
  out = []
  picks = chosen(results)
  for attention in _attentions(results):
    best = _best(results, attention)
    none = _runs(results, attention, "none")
    control = (best, "none", "final", -1, f"control: position is needed ({NAMES[best]}, the best "
               "encoding, ends below no position)")  # fmt: skip
    swept = {arm: grid for arm, grid in sweep(results).items() if arm.startswith(f"{attention}/")}
    variants = [(False, control), *((False, t) for t in tests)]
    variants += [
      (True, t) for t in tests if {f"{attention}/{t[0]}", f"{attention}/{t[1]}"} & set(picks)
    ]
    for as_tuned, (a, b, when, direction, text) in variants:
      at = "tuned" if as_tuned else "defaults"
      ra, rb = _runs(results, attention, a, at), _runs(results, attention, b, at)
      va, vb, paired = stats.seed_paired(_by_seed(ra, when), _by_seed(rb, when))
      if not paired or (direction == 0 and not none):
        continue  # too few runs, or an "about equal" claim with no control to size its margin
      early = early_steps([step for step, _ in ra[0]["curve"]])
      step = {
        "final": "the end",
        "first": f"step {early[0]}",
        "early": f"steps {early[0]}-{early[-1]} (mean)" if len(early) > 1 else f"step {early[0]}",
      }[when]
      item = "Fig. 3b" if "fourier_no_mlp" in (a, b) or b == "mlp" else "Fig. 3a"
      out.append(
        stats.claim(
          paper="lfpe" if b == "none" else "002",
          item="control" if b == "none" else item,
          text=f"{text} [{attention} attention{', as tuned' * as_tuned}]",
          metric=f"held-out bits/dim at {step}",
          a=f"{attention}/{a}",
          b=f"{attention}/{b}",
          a_values=va,
          b_values=vb,
          direction=direction,
          control_gap=_gap(results, attention, when) if none else None,
          paired=True,
          tuned=_tuned_note(picks, swept, attention, (a, b)) if as_tuned else stats.AT_DEFAULTS,
        )
      )
  return out


def _tuned_note(picks: dict, swept: dict, attention: str, arms: tuple[str, ...]) -> str:
  """The `tuned` note of a claim between `arms` as tuned: which were swept (and how), which
  ran at defaults (an encoding without a knob, or one the sweep did not cover)."""
  names = lambda keep: [NAMES[a] for a in arms if (f"{attention}/{a}" in picks) == keep]
  keys = [f"{attention}/{a}" for a in arms]
  own = {k: swept[k] for k in keys if k in swept}  # the claim's arms' budget
  rule = "lowest mean validation bits/dim"
  return sweeps.tuned_note(names(True), names(False), own, rule, knob="each one's knob")


def early_steps(steps: list[int]) -> list[int]:
  """The evaluated steps within the first `EARLY` of training (at least the first one)."""
  return [s for s in steps if s <= EARLY * steps[-1]] or steps[:1]


def _best(results: dict, attention: str) -> str:
  """The encoding (not the control) with the lowest mean final bits/dim at defaults."""
  encoded = [p for p in NAMES if p != "none" and _runs(results, attention, p)]
  return min(encoded, key=lambda p: np.mean([r["final"] for r in _runs(results, attention, p)]))


def _gap(results: dict, attention: str, when: str) -> float:
  """Every margin's base: the best encoding's mean minus no position's, both on the claim's
  own metric (`when`), the best chosen on that metric too (at the first evaluation the
  encoding that ends best need not lead)."""
  mean = lambda posemb: np.mean(list(_by_seed(_runs(results, attention, posemb), when).values()))
  encoded = [p for p in NAMES if p != "none" and _runs(results, attention, p)]
  return float(min(mean(p) for p in encoded) - mean("none"))


def _by_seed(runs: list[dict], when: str) -> dict[int, float]:
  return {r["seed"]: _value(r, when) for r in runs}


def _value(run: dict, when: str) -> float:
  """A run's held-out bits/dim at the end, at the first evaluation, or averaged early."""
  if when == "final":
    return run["final"]
  if when == "first":
    return run["curve"][0][1]
  early = set(early_steps([step for step, _ in run["curve"]]))
  return float(np.mean([bpd for step, bpd in run["curve"] if step in early]))


def _runs(results: dict, attention: str, posemb: str, at: str = "defaults") -> list[dict]:
  """An encoding's runs `at` "defaults", "tuned" or "reported" (`sweeps.runs_at`)."""
  return sweeps.runs_at(results, f"{attention}/{posemb}", chosen(results), at)


def _attentions(results: dict) -> list[str]:
  return sorted({k.split("/")[0] for k in results if k != "provenance"} - {"sweep"})


def validation_bpd(entry: dict) -> float:
  """A sweep run's score: bits/dim on its validation digits."""
  return entry["final"]


def sweep(results: dict) -> dict[str, dict[float, list[float]]]:
  """The sweep's validation bits/dim: {"attention/posemb": {knob value: [one per seed]}}."""
  return sweeps.scores(results, validation_bpd)


def chosen(results: dict) -> dict[str, float]:
  """The declared rule, per swept `attention/posemb`: the knob value with the lowest mean
  validation bits/dim (ties to the smaller value)."""
  return sweeps.choose(sweep(results), higher_is_better=False)


def sweep_table(results: dict) -> list[str]:
  def name(arm: str) -> str:
    attention, posemb = arm.split("/")
    return f"{NAMES[posemb]} ({encodings.knob(posemb)[0]}), {attention} attention"

  columns = ("encoding", "validation bits/dim")
  cell = lambda values: fmt(values, digits=3)
  return sweeps.table(
    sweep(results), chosen(results), columns=columns, name=name, cell=cell, knob="value"
  )


def table(results: dict) -> list[str]:
  """Per encoding and attention: final bits/dim at defaults and as tuned (the chosen value)."""
  attentions, picks = _attentions(results), chosen(results)
  heads = [f"{a} attention, {v}" for a in attentions for v in ("at defaults", "as tuned")]
  lines = ["| encoding | seeds | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
  cell = lambda runs: fmt([r["final"] for r in runs], digits=3) if runs else "–"
  for posemb, name in NAMES.items():
    if not any(_runs(results, a, posemb, "reported") for a in attentions):
      continue
    cells = []
    for a in attentions:
      arm = f"{a}/{posemb}"
      value = f" ({encodings.knob(posemb)[0]} = {picks[arm]:g})" if arm in picks else ""
      tuned = cell(_runs(results, a, posemb, "tuned")) + value if arm in picks else "not swept"
      cells += [cell(_runs(results, a, posemb)), tuned]
    seeds = len(_runs(results, attentions[0], posemb, "reported"))
    lines.append(f"| {name} | {seeds} | " + " | ".join(cells) + " |")
  return lines


def _length_curves(results: dict) -> dict[str, list]:
  """Each reading's held-out curves (`recipe.length_curves`): at defaults (as tuned where a
  record has only those runs: the first edition's Fourier arms) by `attention/posemb`, and
  as tuned by `attention/posemb (tuned)` where the sweep chose other runs."""
  arms = [f"{attention}/{posemb}" for attention in _attentions(results) for posemb in NAMES]
  return recipe.length_curves(arms, lambda arm, at: _runs(results, *arm.split("/"), at))


def settled_table(results: dict) -> list[str]:
  """The length rule checked on each reading's held-out curve, per attention."""

  def name(arm: str) -> str:
    attention, posemb = arm.removesuffix(TUNED).split("/")
    tuned = arm.endswith(TUNED) or not _runs(results, attention, posemb)  # older: tuned only
    return f"{NAMES[posemb]}{' (tuned)' * tuned}, {attention} attention"

  return LENGTH_RULE.table(_length_curves(results), name=name, digits=4, unit=" (bits/dim)")


def length_check(results: dict) -> dict[str, bool | None] | None:
  """Each reading's length-rule verdict (`recipe.LengthRule.check`): `attention/posemb` and,
  for claims read as tuned, `attention/posemb (tuned)`; None where no run has a curve (the
  length was not checked)."""
  return LENGTH_RULE.check(_length_curves(results))


def ablation(results: dict) -> list[str]:
  lines = ["| attention | Learnable-Fourier+MLP | attention output zeroed |", "|---|---|---|"]
  for attention in _attentions(results):
    runs = [r for r in _runs(results, attention, "fourier", "reported") if "zero_attention" in r]
    if runs:
      final = fmt([r["final"] for r in runs], digits=3)
      zeroed = fmt([r["zero_attention"] for r in runs], digits=3)
      lines.append(f"| {attention} | {final} | {zeroed} |")
  return lines


def leak(results: dict) -> list[str]:
  """Held-out bits/dim as recorded (LSH's chunks sorted over the whole sequence) and
  re-scored strictly causal with the same parameters, per encoding, paired by seed."""
  lines = [
    "| encoding | recorded | strictly causal | strict − recorded (paired) |",
    "|---|---|---|---|",
  ]
  for posemb, name in NAMES.items():
    runs = [r for r in _runs(results, "lsh", posemb, "reported") if "strict" in r]
    if runs:
      recorded, strict = [r["final"] for r in runs], [r["strict"] for r in runs]
      diff, half = stats.paired_difference(strict, recorded)
      lines.append(
        f"| {name} | {fmt(recorded, digits=3)} | {fmt(strict, digits=3)} | "
        f"{diff:+.3f} ± {half:.3f} (n = {len(runs)}) |"
      )
  return lines


def figure(results: dict, encodings: tuple[str, ...], path: str) -> None:
  """Held-out bits per dim against steps, mean and 95 % band over seeds, a panel per attention:
  each encoding at its defaults, or, labelled "(tuned)", at its chosen knob where the record
  has only those runs (the first edition's Fourier arms)."""
  attentions = _attentions(results)
  fig, axes = plt.subplots(1, len(attentions), figsize=(4.5 * len(attentions), 3.5), sharey=True)
  for ax, attention in zip(np.atleast_1d(axes), attentions, strict=True):
    for posemb in encodings:
      runs, label = _runs(results, attention, posemb), NAMES[posemb]
      if not runs:
        runs, label = _runs(results, attention, posemb, "tuned"), f"{label} (tuned)"
      if not runs:
        continue
      steps = [s for s, _ in runs[0]["curve"]]
      stats = [interval([r["curve"][i][1] for r in runs]) for i in range(len(steps))]
      mean, half = np.array(stats).T
      ax.plot(steps, mean, label=label)
      ax.fill_between(steps, mean - np.nan_to_num(half), mean + np.nan_to_num(half), alpha=0.2)
    ax.set(title=f"{attention} attention", xlabel="training step")
  np.atleast_1d(axes)[0].set_ylabel("held-out bits per dim\n(mean, 95 % band over seeds)")
  np.atleast_1d(axes)[0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def sample_grid(samples: dict[str, np.ndarray], path: str, levels: int, zoom: int = 6) -> None:
  """One row of images per attention, each enlarged `zoom` times (nearest), 2 px apart; grey
  levels 0..levels-1 drawn black to white."""
  rows = []
  for images in samples.values():
    grey = np.round(images.astype(np.float64) * (255 / (levels - 1))).astype(np.uint8)
    big = np.broadcast_to(grey, (*grey.shape[:3], 3)).repeat(zoom, axis=1).repeat(zoom, axis=2)
    pad = np.full((big.shape[0], big.shape[1], 2, 3), 255, np.uint8)
    rows.append(np.concatenate([x for image in big for x in (image, pad[0])], axis=1))
  gap = np.full((2, rows[0].shape[1], 3), 255, np.uint8)
  Image.fromarray(np.concatenate([x for row in rows for x in (row, gap)], axis=0)).save(path)


def write(results: dict, out: str) -> None:
  """tables.md, claims.json, fig3a.png and fig3b.png from run.py's results alone
  (`experiments.refresh` rewrites them from the committed results.json)."""
  entries = claims_table.mark_settling(claims(results), length_check(results))
  lines = ["## Final held-out bits per dim (mean ± 95 % CI over seeds)", "", *table(results), ""]
  lines += ["## 002's claims and the control, checked", "", claims_table.markdown(entries), ""]
  lines += ["## Seeds: what each claim needs", "", claims_table.power_markdown(entries)]
  lines += claims_table.rereads_markdown(claims, results)
  lines += ["## Does the model use its attention?", "", *ablation(results), ""]
  lines += [f"## The length rule: bits/dim gained over the last {LENGTH_RULE.window} steps", ""]
  lines += [*settled_table(results), ""]
  lines += ["## Is the LSH likelihood causal? The same models, re-scored", "", *leak(results), ""]
  lines += [
    "## The knob sweep (each encoding's own knob; validation digits carved from training)",
    "",
    *sweep_table(results),
  ]
  with open(os.path.join(out, "tables.md"), "w") as f:
    f.write("\n".join(lines))
  claims_table.write(entries, out)
  for name, arms in FIGURES.items():
    figure(results, arms, os.path.join(out, f"{name}.png"))
