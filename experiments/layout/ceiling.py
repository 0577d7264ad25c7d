"""The caption scores' ceiling: each test target's best reference scored against all four.

  python -m experiments.layout.ceiling

An oracle that says, for every target, whichever of its references scores best (CIDEr-D's
document frequencies come from the references alone, so each example's score depends on its
own caption only and the best reference per example maximises the mean). It bounds what a
model reaches by saying references; a caption that is no reference could score a little
higher, so this is the ceiling of reference-saying, not a proof. This prints BLEU-1 and
CIDEr (x100) of that oracle on the 2,000 test screens of `layout_screens/grid` and
`layout_screens/full` (built in memory, the same examples as the TFDS datasets), so the
README can say how far below its ceiling each record sits.
"""

from __future__ import annotations

import numpy as np

from lfpe.data import screens
from lfpe.tasks.caption_metrics import caption_scores

METRICS = ("BLEU-1", "CIDEr")


def oracle(config: screens.ScreensConfig) -> dict[str, float]:
  """BLEU-1 and CIDEr, x100, of each test target's best reference, per metric."""
  test = screens.generate(config, "test")
  refs = {i: [screens.decode(r) for r in caps] for i, caps in enumerate(test["captions"])}
  per_reference = []
  for k in range(max(map(len, refs.values()))):
    said = {i: r[min(k, len(r) - 1)] for i, r in refs.items()}  # fewer references: the last
    per_reference.append(caption_scores(refs, said, metrics=METRICS, per_example=True)[1])
  return {m: 100 * float(np.max([s[m] for s in per_reference], 0).mean()) for m in METRICS}


if __name__ == "__main__":
  for config in screens.LayoutScreens.BUILDER_CONFIGS:
    if config.num_test == 2_000:
      print(config.name, {k: round(v, 1) for k, v in oracle(config).items()})
