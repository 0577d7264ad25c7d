"""One panel of a resolution plot: accuracy against test size, with 95 % bands (both
editions' figures, `report.plot` and `resolution_redgreen.report.plot`)."""

from __future__ import annotations

import itertools

import numpy as np

from experiments import stats

# Matplotlib's 10 colours, then two more: the RoPE panel draws 11 curves besides the control.
COLORS = (*(f"C{i}" for i in range(10)), "black", "darkgoldenrod")


def draw_curves(
  ax, rows: dict, prefixes: tuple[str, ...], *, solid: tuple[str, ...], **axis
) -> None:
  """One panel: accuracy (%) against test size of the `(arm, policy)` rows whose arm starts
  with one of `prefixes`, and the control (`none`, dotted grey); the policies of `solid`
  drawn solid, the others dashed; 95 % bands clipped to [0, 100]; open circles at the sizes
  an arm also trained on (`axis["trained"]`, {arm: sizes}: a mixed-resolution arm's are not
  unseen); then the axis (`axis`: `train_size`, `ticks` {size: label}, `tick_style`, `title`,
  `xlabel`)."""
  drawn = [k for k in rows if k[0] == "none" or k[0].startswith(prefixes)]
  trained = axis.get("trained", {})
  colors = itertools.cycle(COLORS)
  for arm, policy in drawn:
    by_size = rows[arm, policy]
    sizes = sorted(int(s) for s in by_size)
    mean, half = zip(
      *(stats.interval(list(by_size[str(s)].values()), scale=100) for s in sizes), strict=True
    )
    mean, half = np.asarray(mean), np.nan_to_num(np.asarray(half))
    color = "0.5" if arm == "none" else next(colors)
    style = ":" if arm == "none" else "-" if policy in solid else "--"
    ax.plot(sizes, mean, style, color=color, label=f"{arm} / {policy}", lw=1.2)
    seen = [i for i, s in enumerate(sizes) if s in trained.get(arm, ())]
    if seen:
      ax.plot([sizes[i] for i in seen], mean[seen], "o", mfc="none", color=color, ms=5)
    low, high = np.clip(mean - half, 0, 100), np.clip(mean + half, 0, 100)
    ax.fill_between(sizes, low, high, color=color, alpha=0.12)
  ax.axvline(axis["train_size"], color="k", lw=0.5)
  ax.set_xscale("log", base=2)
  ax.set_xticks(list(axis["ticks"]), list(axis["ticks"].values()), **axis.get("tick_style", {}))
  ax.minorticks_off()
  ax.set_ylim(0, 101)
  ax.set_title(axis["title"], fontsize=9)
  ax.set_xlabel(axis["xlabel"], fontsize=8)
  ax.set_ylabel("test accuracy (%)", fontsize=8)
  # Below the axes: inside, 11 RoPE curves' legend hid the curves that fall (e.g. to 15 %).
  ax.legend(
    fontsize=5.5, loc="upper center", bbox_to_anchor=(0.5, -0.24), ncol=2, frameon=False,
    title="mean, 95 % CI", title_fontsize=6,
  )  # fmt: skip
