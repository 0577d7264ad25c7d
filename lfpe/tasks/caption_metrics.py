"""Caption metrics of widget captioning (002 Sec. 4.4) with pycocoevalcap's scorers.

`caption_scores` gives BLEU-1, BLEU-2 (`Bleu(2)`), ROUGE-L (`Rouge()`), CIDEr (`Cider()`,
which is CIDEr-D: clipped n-gram counts and a Gaussian length penalty, times 10) and METEOR
(`Meteor()`, METEOR 1.5 in a Java process) of in-memory captions. SPICE is not computed: it
needs the Stanford CoreNLP models downloaded at first use; it is reported unavailable.

Tokenisation: captions are lower-cased and split on whitespace. pycocoevalcap's
PTBTokenizer (Java, bundled Stanford jar) lower-cases, splits punctuation off and drops it;
our captions are words of a small vocabulary without punctuation, on which it is this same
identity, so it is skipped (no second Java process). A vocabulary with punctuation or
clitics ("don't") would need it.

Corpus scores are pycocoevalcap's: BLEU from n-gram counts summed over the corpus (closest
reference length), METEOR from its summed alignment statistics, ROUGE-L and CIDEr the mean of
the per-example scores. Per-example scores (sentence BLEU with pycocoevalcap's tiny
smoothing, per-segment METEOR) serve paired tests; their mean is the corpus score for
ROUGE-L and CIDEr only.

CIDEr weights n-grams by IDF over the references it is given. A subset (seen vs unseen
widgets) scored alone takes its IDF from the subset's references; `idf_references=` takes it
from a larger set instead, which equals the mean over the subset of the per-example scores
of the whole set. Table 4 uses the whole test set's IDF so that subsets share one weighting.
"""

from __future__ import annotations

import shutil
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge

METRICS = ("BLEU-1", "BLEU-2", "ROUGE-L", "CIDEr", "METEOR")
UNAVAILABLE = {"SPICE": "not computed: pycocoevalcap's SPICE downloads Stanford CoreNLP models"}

Scores = dict[str, float]
PerExample = dict[str, np.ndarray]


def decode_tokens(
  ids: Iterable[int],
  vocabulary: Sequence[str] | Mapping[int, str],
  eos_id: int,
  pad_id: int,
  bos_id: int | None = None,
) -> str:
  """The caption of a token-id sequence: words up to the first `eos_id`, without pad/bos."""
  words = []
  for token in np.asarray(ids).tolist():
    if token == eos_id:
      break
    if token not in (pad_id, bos_id):
      words.append(vocabulary[token])
  return " ".join(words)


def _normalise(caption: str) -> str:
  return " ".join(caption.lower().split())


def _meteor(gts: dict, res: dict) -> tuple[float, list[float]]:
  """METEOR in a Java process that is ended here (the scorer only kills it in `__del__`)."""
  if shutil.which("java") is None:
    raise RuntimeError(
      "METEOR runs meteor-1.5.jar and needs `java` on PATH: install a Java runtime "
      "(e.g. `apt-get install default-jre-headless`) or leave 'METEOR' out of `metrics`."
    )
  scorer = Meteor()
  try:
    return scorer.compute_score(gts, res)
  finally:
    process = scorer.meteor_p
    process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
      pipe.close()
    if scorer.lock.locked():  # left held if compute_score raised; Meteor.__del__ takes it
      scorer.lock.release()


def _cider(gts: dict, res: dict, idf_gts: dict) -> tuple[float, np.ndarray]:
  """CIDEr-D of `res` with document frequencies of `idf_gts` (a superset of `gts`)."""
  if idf_gts is gts:
    return Cider().compute_score(gts, res)
  # Ids outside `gts` get an empty candidate: their score is dropped, their references count.
  _, scores = Cider().compute_score(idf_gts, {i: res.get(i, [""]) for i in idf_gts})
  position = {i: k for k, i in enumerate(idf_gts)}
  scores = scores[[position[i] for i in gts]]
  return float(np.mean(scores)), scores


def caption_scores(
  references: Mapping[Hashable, Sequence[str]],
  candidates: Mapping[Hashable, str],
  *,
  metrics: Sequence[str] = METRICS,
  idf_references: Mapping[Hashable, Sequence[str]] | None = None,
  per_example: bool = False,
) -> Scores | tuple[Scores, PerExample]:
  """Corpus scores {metric: score} of `candidates` against `references` (same ids).

  `idf_references`: CIDEr's IDF from these references (a superset of `references`, e.g. the
  whole test set when scoring a subset); default `references`. With `per_example`, also
  {metric: scores in the order of `candidates`}. METEOR starts a Java process (~10 s) and
  raises RuntimeError without `java`.
  """
  for metric in metrics:
    if metric in UNAVAILABLE:
      raise ValueError(f"{metric} is unavailable ({UNAVAILABLE[metric]})")
    if metric not in METRICS:
      raise ValueError(f"unknown metric {metric!r}; known: {METRICS}")
  if set(references) != set(candidates):
    raise ValueError("references and candidates must have the same ids")
  if not candidates or not all(references.values()):
    raise ValueError("every id needs at least one reference, and there must be one id")
  res = {i: [_normalise(c)] for i, c in candidates.items()}
  gts = {i: [_normalise(r) for r in references[i]] for i in candidates}
  idf_gts = gts
  if idf_references is not None:
    idf_gts = {i: [_normalise(r) for r in refs] for i, refs in idf_references.items()}
    if any(idf_gts.get(i) != refs for i, refs in gts.items()):
      raise ValueError("idf_references must hold every id of references, with equal captions")

  results = {}
  if {"BLEU-1", "BLEU-2"} & set(metrics):
    corpus, sentences = Bleu(2).compute_score(gts, res, verbose=0)
    results["BLEU-1"] = (corpus[0], sentences[0])
    results["BLEU-2"] = (corpus[1], sentences[1])
  if "ROUGE-L" in metrics:
    results["ROUGE-L"] = Rouge().compute_score(gts, res)
  if "CIDEr" in metrics:
    results["CIDEr"] = _cider(gts, res, idf_gts)
  if "METEOR" in metrics:
    results["METEOR"] = _meteor(gts, res)

  scores = {m: float(results[m][0]) for m in metrics}
  if not per_example:
    return scores
  return scores, {m: np.asarray(results[m][1], dtype=np.float64) for m in metrics}
