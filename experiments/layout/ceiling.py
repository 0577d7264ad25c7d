"""The caption scores' ceiling: each test target's first reference scored against all four.

  python -m experiments.layout.ceiling

A model cannot do better than say one of the references exactly; this prints BLEU-1 and
CIDEr (x100) of that oracle on the 2,000 test screens of `layout_screens/grid` and
`layout_screens/full` (built in memory, the same examples as the TFDS datasets), so the
README can say how far below its ceiling each record sits.
"""

from __future__ import annotations

from lfpe.data import screens
from lfpe.tasks.caption_metrics import caption_scores


def oracle(config: screens.ScreensConfig) -> dict[str, float]:
  """BLEU-1 and CIDEr, x100, of the first reference of every test target."""
  test = screens.generate(config, "test")
  refs = {i: [screens.decode(r) for r in caps] for i, caps in enumerate(test["captions"])}
  scores = caption_scores(refs, {i: r[0] for i, r in refs.items()}, metrics=("BLEU-1", "CIDEr"))
  return {k: 100 * v for k, v in scores.items()}


if __name__ == "__main__":
  for config in screens.LayoutScreens.BUILDER_CONFIGS:
    if config.num_test == 2_000:
      print(config.name, {k: round(v, 1) for k, v in oracle(config).items()})
