"""What the position study runs: its configurations per part, its modes, the papers' numbers.

Parts (each a list of `sweep.Config`s, trained S seeds at a time):
* `pretrain`: Fourier positions pretrained on `direction4`, then `distance` (003 Sec. 5.1).
* `tables`:   9 encodings x {direction, distance, absolute, color_shift} (003 Tables 1, 3, 4),
              with probes (Table 2) and similarity maps (Fig. 5) of the absolute encodings.
* `curves`:   learning curves against the training-set size (003 Fig. 3).
* `ablation`: no / 1-D / 2-D / relative positions at the stem, every layer, every layer
              shared (004, the ViT paper's Table 8), on `distance` with a 2-block ViT.
* `defaults`: `direction` with lfpe's default initial scales (`position_init={}`) for the
              encodings whose seeds then stay at chance, and with γ = 0.25 (see README,
              "Initialisations"): why the study draws larger position signals.
* `gabor`:    000's studies on `distance`: positions added to q / k / v (Tables 3-4), 2-32
              position channels concatenated to q and k (Eq. 13, Fig. 11), positions in the
              first k blocks of a 3-block ViT (Table 5), and Table 1's refit of a trained
              `embed_1d` model with `gabor`, `edge`, `gabor_edge` positions (`Mode.refit`).
"""

from __future__ import annotations

import dataclasses

from lfpe import encodings
from lfpe.studies.sweep import Config, TrainSpec

PARTS = ("pretrain", "tables", "curves", "ablation", "gabor", "defaults")
TASKS = ("direction", "distance", "absolute", "color_shift")
ENCODINGS = (
  "none",
  "rel_attn_2d",
  "embed_1d",
  "sine_2d",
  "fourier",
  "learnable_sine",
  "fourier_pretrained",
  "gabor_edge",
  "rope_mixed",
)
ROWS = (*ENCODINGS, "rel_attn_2d_cls")  # rows of the tables
PROBED = ("embed_1d", "sine_2d", "fourier", "learnable_sine", "fourier_pretrained", "gabor_edge")
MAPPED = ("embed_1d", "sine_2d", "fourier", "learnable_sine", "fourier_pretrained")
CURVE_ENCODINGS = ("embed_1d", "sine_2d", "fourier")
STUDY_ARMS = {  # the rows that are not an encoding of their own
  "fourier_pretrained": "Learnable-Fourier+MLP, pretrained (003 Sec. 5.1)",
  "rel_attn_2d_cls": "Relative attention (2-D), class-token pooling",
}
LABELS = {row: STUDY_ARMS.get(row) or encodings.display_name(row) for row in ROWS}


@dataclasses.dataclass(frozen=True)
class Mode:
  """Sizes of one run of the study."""

  seeds: int  # seeds of the tables and the pretraining (003: 10)
  few_seeds: int  # seeds of the other parts
  spec: TrainSpec
  train_size: int | None  # None: all 5,000 training images
  curve_sizes: tuple[int, ...]
  encodings: tuple[str, ...]
  tasks: tuple[str, ...]
  curve_encodings: tuple[str, ...]
  concat_channels: tuple[int, ...]
  deep: int  # depth of the Table 5 model
  refit: tuple[str, ...]
  refit_epochs: int  # positions alone, under a frozen body, fit slowly (10 epochs: R² 0.6)


FULL = Mode(
  seeds=10,
  few_seeds=5,
  spec=TrainSpec(epochs=10, batch_size=32, lr=1e-3, warmup_epochs=1),
  train_size=None,
  curve_sizes=(250, 500, 1000, 2500),
  encodings=ENCODINGS,
  tasks=TASKS,
  curve_encodings=CURVE_ENCODINGS,
  concat_channels=(2, 4, 8, 16, 32),
  deep=3,
  refit=("gabor", "edge", "gabor_edge"),
  refit_epochs=40,
)
QUICK = Mode(
  seeds=2,
  few_seeds=2,
  spec=TrainSpec(epochs=1, batch_size=32, lr=1e-3, warmup_epochs=0),
  train_size=256,
  curve_sizes=(64,),
  encodings=("rel_attn_2d", "embed_1d", "fourier_pretrained"),
  tasks=("direction", "distance", "color_shift"),
  curve_encodings=("embed_1d",),
  concat_channels=(2,),
  deep=2,
  refit=("gabor_edge",),
  refit_epochs=1,
)


def table_configs(mode: Mode) -> list[tuple[str, Config]]:
  """(label, config) of Tables 1, 3, 4; `fourier_pretrained` is `fourier` started pretrained.

  Also `rel_attn_2d` with a class token instead of average pooling (the ViT default),
  where no position reaches the class token of a 1-block model (see the README).
  """
  out = [
    (enc, Config(task, enc, train_size=mode.train_size))
    for task in mode.tasks
    for enc in mode.encodings
  ]
  if mode is FULL:
    out += [
      ("rel_attn_2d_cls", Config(task, "rel_attn_2d", {"pool": "token"}))
      for task in ("direction", "absolute")
    ]
  return out


def curve_configs(mode: Mode) -> list[tuple[Config, int]]:
  """(config, epochs): a size n trains min(5000 / n, 4) times the epochs (003 Fig. 3)."""
  out = []
  for task in ("direction", "distance"):
    for enc in mode.curve_encodings:
      for n in mode.curve_sizes:
        epochs = round(mode.spec.epochs * min(5000 / n, 4)) if mode is FULL else 1
        out.append((Config(task, enc, train_size=n), epochs))
  return out


def ablation_configs(mode: Mode) -> list[Config]:
  """004 Table 8 on `distance`, depth 2: (posemb, injection) pairs."""
  cells = [("none", "stem"), ("rel_attn_2d", "attention")]
  cells += [
    (enc, inj)
    for enc in ("embed_1d", "embed_2d")
    for inj in ("stem", "every_layer", "every_layer_shared")
  ]
  if mode is QUICK:
    cells = [("embed_1d", "every_layer"), ("embed_2d", "every_layer_shared")]
  return [
    Config("distance", enc, {"depth": 2, "pos_injection": inj}, train_size=mode.train_size)
    for enc, inj in cells
  ]


def _attn(hook: str, **kw) -> dict:
  return {"pos_injection": "attention", "pos_hook": hook, **kw}


def gabor_configs(mode: Mode) -> dict[str, list[tuple[str, Config]]]:
  """000's studies on `distance`: {study: [(row label, config)]}."""
  n = mode.train_size
  plus = [
    ("none", Config("distance", "none", train_size=n)),
    ("APE: embed_1d at the stem", Config("distance", "embed_1d", train_size=n)),
    ("APE: gabor_edge at the stem", Config("distance", "gabor_edge", train_size=n)),
    ("Plus v: edge", Config("distance", "edge", _attn("v"), n)),
    ("Plus k: gabor_edge (part 3)", Config("distance", "gabor_edge", _attn("k"), n)),
    ("Plus q, k: embed_1d", Config("distance", "embed_1d", _attn("qk"), n)),
    ("Plus q, k: gabor_edge (parts 2-4)", Config("distance", "gabor_edge", _attn("qk"), n)),
    ("Plus q, k, v: gabor_edge", Config("distance", "gabor_edge", _attn("qkv"), n)),
  ]
  concat = [
    (f"{c} channels", Config("distance", "gabor_edge", _attn("concat", concat_channels=c), n))
    for c in mode.concat_channels
  ]
  deep = [
    ("none", Config("distance", "none", {"depth": mode.deep}, n)),
    ("APE: embed_1d at the stem", Config("distance", "embed_1d", {"depth": mode.deep}, n)),
  ]
  deep += [
    (
      f"blocks 1-{k}",
      Config("distance", "gabor_edge", _attn("qkv", depth=mode.deep, pos_layers=k), n),
    )
    for k in range(1, mode.deep + 1)
  ]
  if mode is QUICK:
    plus, deep = plus[4:6], deep[-1:]
  return {"plus": plus, "concat": concat, "deep": deep}


def defaults_configs(mode: Mode) -> list[tuple[str, Config]]:
  """(label, config): `direction` at lfpe's default initial scales, and Fourier at γ = 0.25."""
  n = mode.train_size
  rows = [
    ("fourier, lfpe defaults", Config("direction", "fourier", train_size=n, position_init={})),
    (
      "fourier(gamma=0.25), lfpe defaults",
      Config("direction", "fourier(gamma=0.25)", train_size=n, position_init={}),
    ),
    (
      "gabor_edge, lfpe defaults",
      Config("direction", "gabor_edge", train_size=n, position_init={}),
    ),
    ("embed_1d, lfpe defaults", Config("direction", "embed_1d", train_size=n, position_init={})),
  ]
  return rows[:1] if mode is QUICK else rows


def curve_key(config: Config) -> str:
  return f"{config.task}/{config.posemb}/{config.train_size}"


def ablation_key(config: Config) -> str:
  return f"{config.posemb}/{config.model['pos_injection']}"


SPEED_STRATEGIES = ("vmap", "loop")  # config.seeds = S, or S plain runs one after another


def expected(mode: Mode) -> dict[str, list[str]]:
  """Every result key a full run of `mode` records, per results.json section."""
  keys = {
    "speed": list(SPEED_STRATEGIES),
    "pretrain": ["direction4", "distance", "probes"],
    "tables": [f"{c.task}/{enc}" for enc, c in table_configs(mode)],
    "curves": [curve_key(c) for c, _ in curve_configs(mode)],
    "ablation": [ablation_key(c) for c in ablation_configs(mode)],
  }
  for name, rows in gabor_configs(mode).items():
    keys[f"gabor_{name}"] = [label for label, _ in rows]
  keys["gabor_refit"] = ["embed_1d", *mode.refit]
  keys["defaults"] = [label for label, _ in defaults_configs(mode)]
  return keys


# The papers' numbers (mean ± std where given).
PAPER = {
  "direction": {
    "none": "52.72 ± 1.08",
    "rel_attn_2d": "99.92 ± 0.06",
    "embed_1d": "99.43 ± 0.36",
    "sine_2d": "99.81 ± 0.16",
    "fourier": "99.64 ± 0.32",
  },
  "distance": {
    "none": "-0.01 ± 0.01",
    "rel_attn_2d": "0.84 ± 0.04",
    "embed_1d": "0.92 ± 0.06",
    "sine_2d": "0.96 ± 0.01",
    "fourier": "0.94 ± 0.03",
  },
  "absolute": {
    "none": "49.79 ± 1.86",
    "sine_2d": "99.94 ± 0.10",
    "embed_1d": "99.85 ± 0.13",
    "rel_attn_2d": "54.02 ± 7.12",
    "fourier": "99.99 ± 0.03",
  },
  "color_shift": {
    "none": "50.06 ± 0.16",
    "sine_2d": "57.03 ± 14.90",
    "embed_1d": "97.46 ± 3.26",
    "rel_attn_2d": "49.70 ± 0.60",
    "fourier": "98.49 ± 3.97",
  },
  # 003 Table 2 (and Sec. 5.1 for the pretrained Fourier table): before / after training.
  "probes": {
    "embed_1d": {
      "left_right": ("51.47", "99.99"),
      "up_down": ("50.69", "49.61"),
      "distance": ("0.00", "0.93"),
    },
    "sine_2d": {
      "left_right": ("100.00", "100.00"),
      "up_down": ("100.00", "100.00"),
      "distance": ("1.0", "1.0"),
    },
    "fourier": {
      "left_right": ("92.41", "99.71"),
      "up_down": ("92.47", "92.55"),
      "distance": ("0.91", "0.96"),
    },
    "fourier_pretrained": {
      "left_right": ("99", ""),
      "up_down": ("99", ""),
      "distance": ("0.98", ""),
    },
  },
  # 004 Table 8 (ViT-B/16, ImageNet 5-shot linear accuracy).
  "ablation": {
    ("none", "stem"): "0.61382",
    ("embed_1d", "stem"): "0.64206",
    ("embed_1d", "every_layer"): "0.63964",
    ("embed_1d", "every_layer_shared"): "0.64292",
    ("embed_2d", "stem"): "0.64001",
    ("embed_2d", "every_layer"): "0.64046",
    ("embed_2d", "every_layer_shared"): "0.64022",
    ("rel_attn_2d", "attention"): "0.64032",
  },
  # 000 Tables 3-5 (DeiT-T on ImageNet, top-1 %), Table 1 (ViT-B, top-1 %, #params).
  "plus": {
    "none": "68.10",
    "APE: embed_1d at the stem": "70.02",
    "Plus v: edge": "68.95",
    "Plus q, k: embed_1d": "70.19",
    "Plus q, k: gabor_edge (parts 2-4)": "70.29 / 70.80",
    "Plus q, k, v: gabor_edge": "70.75",
    "Plus k: gabor_edge (part 3)": "-",
  },
  "deep": {"none": "68.10", "APE: embed_1d at the stem": "70.02"},
  "refit": {
    "embed_1d": "75.4 (151K)",
    "gabor_edge": "77.0 (10.7K)",
    "gabor": "76.4 (7.6K)",
    "edge": "60.5 (4.6K)",
  },
}
