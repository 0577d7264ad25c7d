"""The resolution benchmark's leaderboard, plot and claims.json, from results.json.

Cells are test accuracy (%) as mean ± 95 % Student-t interval over seeds. Claims compare
accuracy at twice the training size, paired by seed (seed s of every arm shares its data
order), and the control compares the best arm with `none` at the training size.
"""

from __future__ import annotations

import collections

import numpy as np

from experiments import stats
from experiments.resolution.figure import draw_curves
from experiments.resolution.report import accuracy_claim, control_gap, write_files
from experiments.resolution_redgreen import plan

DOUBLE = str(2 * plan.TRAIN_SIZE)

# (paper, item, claim, (arm, policy) a, (arm, policy) b): a keeps more accuracy at 2x than b.
PUBLISHED = (
  (
    "rope-vit",
    "Heo et al. 2024, Fig. 3",
    "RoPE-Mixed degrades less than RoPE-Axial when the test size doubles",
    ("rope_mixed", "extrapolate"),
    ("rope_axial", "extrapolate"),
  ),
  (  # RoPE-ViT's APE is a full 2-D table resized with PyTorch's bicubic; this one is lfpe's
    "lfpe",
    "after Heo et al. 2024, Fig. 3, with lfpe's per-axis tables (not RoPE-ViT's APE)",
    "RoPE-Mixed degrades less than per-axis learned tables resized with timm's antialiased "
    "bicubic when the test size doubles",
    ("rope_mixed", "extrapolate"),
    ("embed_2d", "bicubic"),
  ),
  (
    "002",
    "Table 2",
    "Learnable-Fourier extrapolates better than Embed-2D to an unseen size",
    ("fourier unit", "extrapolate"),
    ("embed_2d", "bicubic"),
  ),
  (  # rope-vit extrapolates at a new size; PI per axis is lfpe's (rotary-embedding-torch's)
    "PI",
    "Chen et al. 2023, applied per axis by lfpe",
    "position interpolation helps RoPE-Axial at twice the size",
    ("rope_axial", "pi"),
    ("rope_axial", "extrapolate"),
  ),
  (  # DINOv3's three perturbations at lfpe's values (0.1, 1.1, 1.25), on index coordinates
    "lfpe",
    "DINOv3-style coordinate augmentation at lfpe's values, not DINOv3's released preset",
    "coordinate augmentation (lfpe's values) helps RoPE-Axial at twice the size",
    ("rope_axial +aug", "extrapolate"),
    ("rope_axial", "extrapolate"),
  ),
)


TUNED = stats.AT_DEFAULTS + " (`fourier index` at γ = 0.25, set by hand), nothing swept"


def cells(results: dict) -> dict:
  """`{task: {(arm, policy): {size: {seed: accuracy}}}}` (seeds ascending)."""
  out = collections.defaultdict(
    lambda: collections.defaultdict(lambda: collections.defaultdict(dict))
  )
  for entry in results["runs"].values():
    for policy, by_size in entry["scores"].items():
      for size, acc in by_size.items():
        out[entry["task"]][(entry["arm"], policy)][size][entry["seed"]] = acc
  return {
    task: {
      row: {size: dict(sorted(s.items())) for size, s in by_size.items()}
      for row, by_size in rows.items()
    }
    for task, rows in out.items()
  }


def leaderboard(results: dict) -> str:
  """Markdown: per task, one row per (arm, policy), one column per test size."""
  parts = []
  for task, rows in cells(results).items():
    sizes = sorted({int(s) for r in rows.values() for s in r})
    n = max(len(v) for r in rows.values() for v in r.values())
    head = "| arm | policy | " + " | ".join(f"{s} px" for s in sizes) + " |"
    lines = [
      f"### {task} (test accuracy %, mean ± 95 % CI over {n} seeds; trained at "
      f"{plan.TRAIN_SIZE} px)",
      "",
      head,
      "|---|---|" + "---|" * len(sizes),
    ]
    for (arm, policy), by_size in rows.items():
      values = [
        stats.fmt(list(by_size[str(s)].values()), scale=100) if str(s) in by_size else "-"
        for s in sizes
      ]
      lines.append(f"| {arm} | {policy} | " + " | ".join(values) + " |")
    parts.append("\n".join(lines))
  return "\n\n".join(parts) + "\n"


def claims(results: dict) -> list[dict]:
  """claims.json: the control and `PUBLISHED`, per task, where both cells were run."""
  out = []
  train = str(plan.TRAIN_SIZE)
  for task, rows in cells(results).items():
    best = max(
      (r for r in rows if r[0] != "none"),
      key=lambda r: np.mean(list(rows[r][train].values())),
    )
    tested = [
      (
        "lfpe",
        "control",
        f"position is needed on `{task}` (the control: the best arm against `none` at {train} px)",
        best,
        ("none", "extrapolate"),
        train,
      )
    ]
    tested += [(p, i, f"{t} (`{task}`)", a, b, DOUBLE) for p, i, t, a, b in PUBLISHED]
    for paper, item, text, a, b, size in tested:
      if a not in rows or b not in rows or size not in rows[a] or size not in rows[b]:
        continue
      gap = control_gap(rows, size)
      out.append(accuracy_claim(paper, item, text, rows, a, b, size, tuned=TUNED, control_gap=gap))
  return out


# Panels of the plot: arms whose name starts with one of these prefixes (`none`, the
# control, is drawn in every panel).
FAMILIES = (
  ("learned tables", ("embed_",)),
  ("sinusoids and Fourier", ("sine_2d", "fourier", "learnable_sine", "mlp", "gabor")),
  ("relative tables", ("rel_",)),
  ("2-D RoPE", ("rope_",)),
)


def plot(results: dict, path: str) -> None:
  """Accuracy against test size: a row per task, a panel per family of encodings (the
  control in each), 95 % bands clipped to [0, 100]."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  tables = cells(results)
  fig, axes = plt.subplots(
    len(tables), len(FAMILIES), figsize=(4.2 * len(FAMILIES), 4.6 * len(tables)), squeeze=False
  )
  for row, (task, rows) in zip(axes, tables.items(), strict=True):
    for ax, (family, prefixes) in zip(row, FAMILIES, strict=True):
      draw_curves(
        ax,
        rows,
        prefixes,
        solid=("extrapolate", "bicubic"),
        train_size=plan.TRAIN_SIZE,
        ticks={s: str(s) for s in plan.TEST_SIZES},
        title=f"{task}: {family}",
        xlabel="test size (px; trained at 32)",
      )
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write(results: dict, out: str) -> None:
  """leaderboard.md, claims.json and accuracy_vs_size.png into `out` (and the README's
  `leaderboard` and `claims` blocks, when it has them)."""
  write_files(out, claims(results), leaderboard(results), lambda path: plot(results, path))
