"""The papers' claims the position study tests, scored from results.json (claims.json).

Each claim names two cells of the study (`part`, `key`) and the side the paper puts them on;
`stats.claim` gives the difference with its 95 % interval (paired by seed: seed s of every
configuration shares its data order), the verdict and the minimum detectable difference.
Scores are accuracy in points (x 100) or R² (x 1). Claims whose cells the run lacks (a
`--quick` run, a part not run) are left out.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments import stats


@dataclasses.dataclass(frozen=True)
class Tested:
  """One claim: `a` beats `b` (direction +1), loses (-1) or matches (0: within a tenth of
  the gap between the `control` cells of the same part, `stats.equivalence_margin`);
  `b_fails`: the paper says `b` fails (`stats.claim`).
  `paper_value`: the paper's a − b where it reports it in this metric's units (points or R²);
  `source`: 'text' or 'table' (lfpe's reading of the paper's numbers)."""

  paper: str
  item: str
  text: str
  part: str
  a: str
  b: str
  direction: int = 1
  control: tuple[str, str] | None = None
  paper_value: float | None = None
  source: str = "text"
  b_fails: bool = False  # the paper says `b` fails: at the ceiling it contradicts the claim


TUNED = (
  "none: every arm at the study's settings (lfpe.studies.sweep.POSITION_INIT, the same for "
  "every encoding that takes them), nothing swept"
)


def _table(task: str, a: str, b: str, text: str, item: str, **kw) -> Tested:
  return Tested("003", item, text, "tables", f"{task}/{a}", f"{task}/{b}", **kw)


TESTED = (
  _table(
    "direction",
    "rel_attn_2d",
    "none",
    "position is needed for relative direction (the control: 99.92 vs 52.72 %)",
    "Table 1",
    paper_value=47.2,
  ),
  _table(
    "distance",
    "sine_2d",
    "none",
    "position is needed for the distance (the control: R² 0.96 vs -0.01)",
    "Table 1",
    paper_value=0.97,
  ),
  _table(
    "absolute",
    "fourier",
    "none",
    "position is needed for absolute location (the control: 99.99 vs 49.79 %)",
    "Table 3",
    paper_value=50.2,
  ),
  _table(
    "direction",
    "rel_attn_2d",
    "embed_1d",
    "relative attention beats a learned table on direction (99.92 vs 99.43 %)",
    "Table 1",
    paper_value=0.49,
  ),
  _table(
    "distance",
    "sine_2d",
    "embed_1d",
    "fixed sinusoids beat a learned table on distance (R² 0.96 vs 0.92)",
    "Table 1",
    paper_value=0.04,
  ),
  _table(
    "distance",
    "fourier",
    "embed_1d",
    "learnable Fourier beats a learned table on distance (R² 0.94 vs 0.92)",
    "Table 1",
    paper_value=0.02,
  ),
  _table(
    "distance",
    "sine_2d",
    "rel_attn_2d",
    "fixed sinusoids beat relative attention on distance (R² 0.96 vs 0.84)",
    "Table 1",
    paper_value=0.12,
  ),
  _table(
    "absolute",
    "embed_1d",
    "rel_attn_2d",
    "relative attention cannot tell absolute location (learned table 99.85 vs relative 54.02 %)",
    "Table 3",
    paper_value=45.83,
    b_fails=True,
  ),
  _table(
    "absolute",
    "rel_attn_2d",
    "none",
    "relative attention stays near chance on absolute location (54.02 vs 49.79 %): the arm "
    "the thesis says fails, against no position",
    "Table 3",
    direction=0,
    control=("absolute/fourier", "absolute/none"),
    paper_value=4.23,
  ),
  _table(
    "color_shift",
    "fourier",
    "sine_2d",
    "under a colour shift learnable Fourier beats fixed sinusoids (98.49 vs 57.03 %)",
    "Table 4",
    paper_value=41.46,
  ),
  _table(
    "color_shift",
    "embed_1d",
    "sine_2d",
    "under a colour shift a learned table beats fixed sinusoids (97.46 vs 57.03 %)",
    "Table 4",
    paper_value=40.43,
  ),
  Tested(
    "003",
    "Fig. 3",
    "with 250 training images fixed sinusoids beat a learned table on "
    "distance (sinusoids are the most data-efficient)",
    "curves",
    "distance/sine_2d/250",
    "distance/embed_1d/250",
  ),
  Tested(
    "003",
    "Fig. 3",
    "with 250 training images fixed sinusoids beat learnable Fourier on distance",
    "curves",
    "distance/sine_2d/250",
    "distance/fourier/250",
  ),
  Tested(
    "004",
    "Table 8",
    "a position embedding helps (1-D at the stem vs none: 64.2 vs 61.4 % 5-shot)",
    "ablation",
    "embed_1d/stem",
    "none/stem",
  ),
  Tested(
    "004",
    "Table 8",
    "2-D and 1-D embeddings at the stem do about equally well (64.0 vs 64.2 %)",
    "ablation",
    "embed_2d/stem",
    "embed_1d/stem",
    direction=0,
    control=("embed_1d/stem", "none/stem"),
  ),
  Tested(
    "000",
    "Tables 3-4",
    "Gabor + edge positions added to q, k beat a learned table at the stem (70.29 vs 70.02 %)",
    "gabor_plus",
    "Plus q, k: gabor_edge (parts 2-4)",
    "APE: embed_1d at the stem",
  ),
  Tested(
    "000",
    "Table 1",
    "refitting positions only on a frozen body, Gabor + edge beats its learned table "
    "(ViT-B: 77.0 vs 75.4 %; DeiT-B: 81.6 vs 81.8 %)",
    "gabor_refit",
    "gabor_edge",
    "embed_1d",
  ),
  Tested(
    "000",
    "Table 1",
    "refitting positions only on a frozen body, Gabor alone beats its learned table "
    "(ViT-B: 76.4 vs 75.4 %; DeiT-B: 80.7 vs 81.8 %)",
    "gabor_refit",
    "gabor",
    "embed_1d",
    source="table",
  ),
  Tested(
    "000",
    "Table 1",
    "refitting positions only, Gabor + edge beats Gabor alone (77.0 vs 76.4 %)",
    "gabor_refit",
    "gabor_edge",
    "gabor",
  ),
  Tested(
    "000",
    "Table 1",
    "refitting positions only, Gabor + edge beats edge markers alone (77.0 vs 60.5 %)",
    "gabor_refit",
    "gabor_edge",
    "edge",
  ),
)


def metric(key: str, part: str) -> tuple[str, float, float]:
  """(metric name, scale, ceiling) of a cell: R² for `distance` and 000/004's parts (at most
  1), else accuracy in points (at most 100)."""
  regression = part in ("ablation", "gabor_plus", "gabor_refit") or key.startswith("distance")
  return ("test R²", 1.0, 1.0) if regression else ("test accuracy (points)", 100.0, 100.0)


def _by_seed(cell: dict) -> dict[int, float]:
  """A cell's `{seed: test score}` (seeds 0, 1, ... where a cell does not list them)."""
  return dict(zip(cell.get("seeds", range(len(cell["test"]))), cell["test"], strict=True))


def claims(results: dict) -> list[dict]:
  """claims.json of a study's results: every tested claim whose two cells were run."""
  out = []
  for t in TESTED:
    cells = results.get(t.part, {})
    if t.a not in cells or t.b not in cells:
      continue
    # paired on the seeds both cells ran (seed s of both shares its data and init stream)
    a_values, b_values, paired = stats.seed_paired(*(_by_seed(cells[x]) for x in (t.a, t.b)))
    name, scale, ceiling = metric(t.a, t.part)
    out.append(
      stats.claim(
        paper=t.paper,
        item=t.item,
        text=t.text,
        metric=name,
        a=t.a,
        b=t.b,
        a_values=a_values,
        b_values=b_values,
        direction=t.direction,
        control_gap=_gap(cells, t.control),
        paired=paired,
        scale=scale,
        ceiling=ceiling,
        tuned=TUNED,
        paper_value=t.paper_value,
        source=t.source,
        b_fails=t.b_fails,
      )
    )
  return out


def _gap(cells: dict, control: tuple[str, str] | None) -> float | None:
  """Mean score of the control's first cell minus its second (None without a control)."""
  if control is None:
    return None
  a, b = (np.mean(cells[key]["test"]) for key in control)
  return float(a - b)
