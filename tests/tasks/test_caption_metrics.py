"""Caption metrics against pycocoevalcap's scorers, on perfect captions, and decoding.

METEOR starts a JVM (~10 s here): it runs twice, once through `caption_scores` and once
directly, in module fixtures that the METEOR tests share.
"""

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge

from lfpe.tasks import caption_metrics
from lfpe.tasks.caption_metrics import METRICS, caption_scores, decode_tokens

NO_JAVA = ("BLEU-1", "BLEU-2", "ROUGE-L", "CIDEr")

# Mixed case and spacing: caption_scores lower-cases and re-joins on single spaces.
REFERENCES = {
  3: ["Click the  red button", "press red button"],
  7: ["open the settings menu", "settings"],
  "exact": ["go back to home screen"] * 3,  # the candidate is every reference
  "one_of": ["submit the form", "send", "confirm order now"],  # the candidate is one of them
}
CANDIDATES = {3: "click the red button", 7: "open Settings", "exact": "Go back to home screen"}
CANDIDATES["one_of"] = "submit the form"


def _lower(captions):
  return {i: [" ".join(c.lower().split()) for c in caps] for i, caps in captions.items()}


GTS = _lower(REFERENCES)
RES = _lower({i: [c] for i, c in CANDIDATES.items()})


@pytest.fixture(scope="module")
def scored():
  """caption_scores with per-example scores, and the Meteor scorers it created."""
  created = []

  class RecordingMeteor(Meteor):
    def __init__(self):
      super().__init__()
      created.append(self)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(caption_metrics, "Meteor", RecordingMeteor)
    corpus, per_example = caption_scores(REFERENCES, CANDIDATES, per_example=True)
  return corpus, per_example, created


@pytest.fixture(scope="module")
def direct():
  """pycocoevalcap's scorers called directly: {metric: (corpus, per-example)}."""
  bleu, bleu_each = Bleu(2).compute_score(GTS, RES, verbose=0)
  meteor = Meteor()
  out = {
    "BLEU-1": (bleu[0], bleu_each[0]),
    "BLEU-2": (bleu[1], bleu_each[1]),
    "ROUGE-L": Rouge().compute_score(GTS, RES),
    "CIDEr": Cider().compute_score(GTS, RES),
    "METEOR": meteor.compute_score(GTS, RES),
  }
  process = meteor.meteor_p
  del meteor  # its __del__ kills the JVM but leaves two pipes open
  process.stdout.close()
  process.stderr.close()
  return out


def test_equal_to_pycocoevalcap(scored, direct):
  corpus, per_example, _ = scored
  assert list(corpus) == list(METRICS)
  for metric in METRICS:
    assert corpus[metric] == pytest.approx(direct[metric][0], abs=1e-12), metric
    np.testing.assert_allclose(per_example[metric], direct[metric][1], atol=1e-12)
  assert 0 < corpus["CIDEr"] < 10 and 0 < corpus["METEOR"] < 1


def test_meteor_perfect_and_closed(scored):
  """METEOR 1.5 drops its fragmentation penalty on an exact match: 1.0, not ~0.99."""
  _, per_example, created = scored
  order = list(CANDIDATES)
  for i in ("exact", "one_of"):
    assert per_example["METEOR"][order.index(i)] == 1.0
  assert len(created) == 1 and created[0].meteor_p.poll() is not None
  assert created[0].meteor_p.stdout.closed and not created[0].lock.locked()


def test_perfect_captions():
  """BLEU and ROUGE-L 1; CIDEr-D 10 min(L, 4) / 4 for L words, divided by the references.

  A caption of L words has min(L, 4) of the orders 1..4 of n-grams, each a cosine of 1
  against an identical reference; CIDEr-D averages the orders, times 10, and averages over
  the references (a reference sharing no n-gram adds 0). Needs n-grams of nonzero IDF: not
  in every image's references.
  """
  references = {"long": ["go back to home screen"] * 3, "two": ["tap ok"] * 2, "three": ["a b c"]}
  candidates = {i: refs[0] for i, refs in references.items()}
  corpus, per_example = caption_scores(references, candidates, metrics=NO_JAVA, per_example=True)
  assert corpus["BLEU-1"] == pytest.approx(1.0) and corpus["BLEU-2"] == pytest.approx(1.0)
  assert corpus["ROUGE-L"] == 1.0
  np.testing.assert_allclose(per_example["CIDEr"], [10.0, 5.0, 7.5])

  references["three"] = ["a b c", "x y", "z"]  # the candidate is one of three references
  corpus, per_example = caption_scores(references, candidates, metrics=NO_JAVA, per_example=True)
  assert corpus["BLEU-1"] == pytest.approx(1.0) and corpus["BLEU-2"] == pytest.approx(1.0)
  assert corpus["ROUGE-L"] == 1.0
  np.testing.assert_allclose(per_example["CIDEr"], [10.0, 5.0, 7.5 / 3])


def test_cider_idf_from_whole_set():
  """A subset scored with the whole set's IDF is the subset's mean of whole-set scores."""
  _, whole = caption_scores(REFERENCES, CANDIDATES, metrics=("CIDEr",), per_example=True)
  subset = [3, "one_of"]
  references = {i: REFERENCES[i] for i in subset}
  candidates = {i: CANDIDATES[i] for i in subset}
  shared = caption_scores(references, candidates, metrics=("CIDEr",), idf_references=REFERENCES)
  alone = caption_scores(references, candidates, metrics=("CIDEr",))
  order = list(CANDIDATES)
  expected = np.mean([whole["CIDEr"][order.index(i)] for i in subset])
  assert shared["CIDEr"] == pytest.approx(expected, abs=1e-12)
  assert alone["CIDEr"] != pytest.approx(expected)


def test_errors(monkeypatch):
  with pytest.raises(ValueError, match="SPICE is unavailable"):
    caption_scores(REFERENCES, CANDIDATES, metrics=("SPICE",))
  with pytest.raises(ValueError, match="same ids"):
    caption_scores(REFERENCES, {3: "a"}, metrics=NO_JAVA)
  with pytest.raises(ValueError, match="idf_references"):
    caption_scores(REFERENCES, CANDIDATES, metrics=("CIDEr",), idf_references={3: ["a"]})
  monkeypatch.setattr(caption_metrics.shutil, "which", lambda _: None)
  with pytest.raises(RuntimeError, match="default-jre-headless"):
    caption_scores(REFERENCES, CANDIDATES, metrics=("METEOR",))


def test_decode_tokens():
  vocabulary = ["<pad>", "<bos>", "<eos>", "click", "the", "button"]
  ids = np.array([1, 3, 0, 4, 5, 2, 3, 3, 0, 0])
  assert decode_tokens(ids, vocabulary, eos_id=2, pad_id=0, bos_id=1) == "click the button"
  assert decode_tokens([3, 5, 0, 0], vocabulary, eos_id=2, pad_id=0) == "click button"
  assert decode_tokens([2, 3], vocabulary, eos_id=2, pad_id=0) == ""
