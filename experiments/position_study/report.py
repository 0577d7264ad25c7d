"""Markdown tables (ours beside the papers'), claims.json and PNG figures from results.json.

Our cells are mean ± 95 % Student-t interval over seeds (n in the table titles); the papers'
are their mean ± std. Figures draw the same intervals, clipped to the metric's range.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from experiments import claims, stats
from experiments.position_study import claims as claims_lib
from experiments.position_study import plan
from lfpe.analysis.similarity import plot_similarity_maps

PROBE_COLUMNS = (
  ("left_right", "before"),
  ("left_right", "after"),
  ("up_down", "before"),
  ("up_down", "after"),
  ("distance", "before"),
  ("distance", "after"),
)


def ms(values, scale: float = 1.0, digits: int = 2) -> str:
  """`mean ± 95 % half-width` of per-seed values (Student t; a constant gives ± 0, one seed
  just its mean: no interval)."""
  return stats.fmt(values, scale=scale, digits=digits)


def _band(values, top: float = 1.0) -> tuple[float, float, float]:
  """(mean, lower, upper error) of the 95 % interval, clipped to the metric's top."""
  mean, half = stats.interval(values)
  half = 0.0 if np.isnan(half) else half
  return mean, half, max(min(mean + half, top) - mean, 0.0)


def _table(header: list[str], rows: list[list[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _score(entry: dict | None, task: str) -> str:
  if entry is None:
    return "-"
  return ms(entry["test"], 1.0 if task == "distance" else 100.0)


def main_tables(res: dict) -> str:
  """003 Tables 1, 3 and 4: test accuracy (%) or R^2, mean ± 95 % CI over seeds."""
  tab = res.get("tables", {})
  encs = [e for e in plan.ROWS if any(f"{t}/{e}" in tab for t in plan.TASKS)]
  out = []
  for title, tasks in (
    ("Table 1: relative direction (acc. %) and distance (R²)", ("direction", "distance")),
    ("Table 3: absolute location (acc. %)", ("absolute",)),
    ("Table 4: colour shift between train and test (acc. %)", ("color_shift",)),
  ):
    n = max(
      (len(tab[k]["test"]) for t in tasks for e in encs if (k := f"{t}/{e}") in tab), default=0
    )
    title = f"{title}; ours: mean ± 95 % CI over {n} seeds, 003: mean ± std"
    header = ["Position embedding"] + [h for t in tasks for h in (f"{t} (ours)", "003")]
    rows = [
      [plan.LABELS[e]]
      + [c for t in tasks for c in (_score(tab.get(f"{t}/{e}"), t), plan.PAPER[t].get(e, "-"))]
      for e in encs
    ]
    out.append(f"**{title}**\n\n" + _table(header, rows))
  return "\n\n".join(out)


def _probe_cell(entry: dict, probe: str, when: str, scheme: str) -> str:
  try:
    values = entry["probes"][when][probe][scheme]
  except KeyError:
    return "-"
  return ms(values, 1.0 if probe == "distance" else 100.0)


def probe_table(res: dict, scheme: str) -> str:
  """003 Table 2: probe accuracy (%) / R^2 before and after training, ours and the paper's."""
  tab = res.get("tables", {})
  header = ["Position embedding"] + [f"{p} {w}" for p, w in PROBE_COLUMNS]
  rows = []
  for enc in plan.PROBED:
    entries = {
      p: tab.get(f"{'distance' if p == 'distance' else 'direction'}/{enc}", {})
      for p, _ in PROBE_COLUMNS
    }
    if not any(entries.values()):
      continue
    rows.append(
      [plan.LABELS[enc]] + [_probe_cell(entries[p], p, w, scheme) for p, w in PROBE_COLUMNS]
    )
    paper = plan.PAPER["probes"].get(enc)
    if paper:
      rows.append(
        ["  003"] + [paper[p][0 if w == "before" else 1] or "-" for p, w in PROBE_COLUMNS]
      )
  return _table(header, rows)


def pretrain_table(res: dict) -> str:
  """Probes of the Fourier table at init and after pretraining (003 Sec. 5.1)."""
  pre = res.get("pretrain", {}).get("probes")
  if not pre:
    return "(not run)"
  rows = []
  for when in ("before", "after"):
    cells = [
      ms(pre[when][p]["positions"], 1.0 if p == "distance" else 100.0)
      for p in ("left_right", "up_down", "distance")
    ]
    rows.append([f"{when} pretraining"] + cells)
  rows.append(["003 (before → after)", "92 → 99", "92 → 99", "0.91 → 0.98"])
  return _table(["Fourier table", "left_right", "up_down", "distance (R²)"], rows)


def ablation_table(res: dict) -> str:
  """004 Table 8: R^2 on `distance` (2 blocks) beside ViT-B/16's 5-shot accuracy."""
  abl = res.get("ablation", {})
  rows = []
  for enc, label in (
    ("none", "No Pos. Emb."),
    ("embed_1d", "1-D Pos. Emb."),
    ("embed_2d", "2-D Pos. Emb."),
    ("rel_attn_2d", "Rel. Pos. Emb."),
  ):
    cells = []
    for inj in ("stem", "every_layer", "every_layer_shared"):
      key = (enc, "attention" if enc == "rel_attn_2d" and inj == "stem" else inj)
      entry = abl.get(f"{key[0]}/{key[1]}")
      cells.append(
        f"{ms(entry['test'], 1, 3)} ({plan.PAPER['ablation'].get(key, 'N/A')})" if entry else "N/A"
      )
    rows.append([label] + cells)
  return _table(["R² (004)", "Stem", "Every layer", "Every layer, shared"], rows)


def gabor_tables(res: dict) -> str:
  """000's studies: R^2 on `distance` beside DeiT-T / ViT-B ImageNet top-1."""
  out = []
  for part, title, paper in (
    ("gabor_plus", "Tables 3-4: where positions enter attention", plan.PAPER["plus"]),
    ("gabor_concat", "Eq. 13 / Fig. 11: channels concatenated to q, k", {}),
    ("gabor_deep", "Table 5: positions in the first k blocks", plan.PAPER["deep"]),
  ):
    rows = [
      [label, ms(e["test"], 1, 3), str(e["params"]), paper.get(label, "-")]
      for label, e in res.get(part, {}).items()
    ]
    out.append(
      f"**000 {title}**\n\n" + _table(["Row", "R² (ours)", "#pos. params", "000 top-1 %"], rows)
    )
  rows = [
    [enc, ms(e["test"], 1, 3), str(e["params"]), plan.PAPER["refit"].get(enc, "-")]
    for enc, e in res.get("gabor_refit", {}).items()
  ]
  out.append(
    "**000 Table 1: refit of a trained embed_1d model (only positions train)**\n\n"
    + _table(["Positions", "R² (ours)", "#pos. params", "000 ViT-B top-1 (#params)"], rows)
  )
  return "\n\n".join(out)


def curves_table(res: dict) -> str:
  """003 Fig. 3 in numbers: test score per training-set size (5,000: Table 1's runs)."""
  curves, full = res.get("curves", {}), res.get("tables", {})
  sizes = sorted({e["train_size"] for e in curves.values()}) + [5000]
  rows = []
  for task in ("direction", "distance"):
    for enc in plan.CURVE_ENCODINGS:
      cells = [curves.get(f"{task}/{enc}/{n}") for n in sizes[:-1]]
      cells.append(full.get(f"{task}/{enc}"))
      cells = [_score(e, task) for e in cells]
      if any(c != "-" for c in cells):
        rows.append([task, plan.LABELS[enc], *cells])
  return _table(["task", "Position embedding", *map(str, sizes)], rows)


def defaults_table(res: dict) -> str:
  """`direction` accuracy at lfpe's default initial scales, with the seeds left at chance."""
  rows = [
    [label, ms(e["test"], 100.0), f"{sum(v < 0.6 for v in e['test'])} of {len(e['test'])}"]
    for label, e in res.get("defaults", {}).items()
  ]
  return _table(["direction, lfpe's default init", "test acc. %", "seeds at chance"], rows)


def speed_table(res: dict) -> str:
  """Total seconds per way of running the seeds, and the speed-up against one after another
  (each way's whole wall time: compilation and data preparation included)."""
  speed = res.get("speed", {})
  loop = speed.get("loop", {}).get("seconds")
  rows = [
    [strategy, f"{e['seconds']:.1f}", f"{loop / e['seconds']:.2f}x" if loop else "-"]
    for strategy, e in speed.items()
  ]
  return _table(["Seeds run as", "total s", "speed-up vs one after another"], rows)


def timing_table(res: dict) -> str:
  """Seconds per part in run order, the total last (a resumed run adds to its parts)."""
  timing = res.get("timing", {})
  order = ("speed", *plan.PARTS, "total")
  rows = [[part, f"{timing[part]:.0f}"] for part in order if part in timing]
  return _table(["Part", "seconds"], rows)


def markdown(res: dict) -> str:
  """Every table of the study, in README order."""
  parts = [
    main_tables(res),
    "**003 Fig. 3: test score by training images (acc. % / R²; mean ± 95 % CI over 5 seeds; "
    "5,000: Table 1's 10)**"
    "\n\n" + curves_table(res),
    "**Table 2: probes, 10-fold CV on held-out positions (`positions` scheme)**\n\n"
    + probe_table(res, "positions"),
    "**Table 2, the literal reading (`pairs` scheme: sklearn defaults, folds of pairs)**"
    "\n\n" + probe_table(res, "pairs"),
    "**Pretrained Fourier positions (003 Sec. 5.1), `positions` probes**\n\n" + pretrain_table(res),
    "**004 Table 8: position-embedding ablation**\n\n" + ablation_table(res),
    gabor_tables(res),
    "**Initialisations: `direction` at lfpe's default initial scales**\n\n" + defaults_table(res),
    "**Seeds trained together vs one after another**\n\n" + speed_table(res),
    "**Runtime per part**\n\n" + timing_table(res),
  ]
  return "\n\n".join(parts) + "\n"


def _plt():
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def curves_figure(res: dict, path: str) -> None:
  """003 Fig. 3: test score against training-set size, mean and 95 % CI over seeds."""
  plt = _plt()
  full = res.get("tables", {})
  fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
  for ax, task in zip(axes, ("direction", "distance"), strict=True):
    sizes = set()
    for enc in plan.CURVE_ENCODINGS:
      pts = {
        e["train_size"]: e["test"]
        for k, e in res.get("curves", {}).items()
        if k.startswith(f"{task}/{enc}/")
      }
      if f"{task}/{enc}" in full:
        pts[5000] = full[f"{task}/{enc}"]["test"]
      if pts:
        n = sorted(pts)
        m, low, high = zip(*[_band(pts[k]) for k in n], strict=True)
        ax.errorbar(n, m, yerr=[low, high], marker="o", capsize=3, label=plan.LABELS[enc])
        sizes |= set(n)
    ax.set_xscale("log")
    ax.set_xticks(sorted(sizes), [str(k) for k in sorted(sizes)])  # the sizes, no minors
    ax.minorticks_off()
    ax.set_xlabel("training images")
    ax.set_ylabel("test accuracy" if task == "direction" else "test R²")
    ax.set_title(task)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(fontsize=8, title="mean, 95 % CI (clipped at 1)", title_fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def maps_figure(res: dict, task: str, path: str) -> None:
  """003 Fig. 5: cosine similarity to one patch, before and after training on `task`."""
  maps = {}
  for enc in plan.MAPPED:
    entry = res.get("tables", {}).get(f"{task}/{enc}", {})
    for when in ("before", "after"):
      if "maps" in entry:
        maps[f"{enc} {when}"] = np.asarray(entry["maps"][when])
  if maps:
    plot_similarity_maps(maps, path, title=f"cosine similarity to patch (2, 2), {task}")


def concat_figure(res: dict, path: str) -> None:
  """000 Fig. 11: score against the number of concatenated position channels."""
  plt = _plt()
  rows = [(int(k.split()[0]), e["test"]) for k, e in res.get("gabor_concat", {}).items()]
  if not rows:
    return
  rows.sort()
  fig, ax = plt.subplots(figsize=(4.5, 3.5))
  m, low, high = zip(*[_band(t) for _, t in rows], strict=True)
  ax.errorbar([c for c, _ in rows], m, yerr=[low, high], marker="o", capsize=3)
  ax.set_title("mean, 95 % CI over seeds (clipped at R² = 1)", fontsize=8)
  ax.set_xscale("log", base=2)
  ax.set_xlabel("position channels per head (q and k)")
  ax.set_ylabel("test R² (distance)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def figures(res: dict, out: str) -> list[str]:
  """Writes every figure into `out`; returns the paths written."""
  paths = {
    "fig3_learning_curves.png": lambda p: curves_figure(res, p),
    "fig5_similarity_color_shift.png": lambda p: maps_figure(res, "color_shift", p),
    "fig5_similarity_direction.png": lambda p: maps_figure(res, "direction", p),
    "fig11_concat_channels.png": lambda p: concat_figure(res, p),
  }
  written = []
  for name, draw in paths.items():
    draw(os.path.join(out, name))
    if os.path.exists(os.path.join(out, name)):
      written.append(name)
  return written


def write(res: dict[str, Any], out: str) -> None:
  """`tables.md`, `claims.json` and the figures into `out`; the tables and the claims'
  verdict table also replace their blocks of `out/README.md` when it has them."""
  text = markdown(res)
  with open(os.path.join(out, "tables.md"), "w") as f:
    f.write(text)
  entries = claims_lib.claims(res)
  figures(res, out)
  claims.write(entries, out)
  claims.update_readme(out, {"tables": text})
