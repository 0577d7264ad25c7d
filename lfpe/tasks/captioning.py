"""Widget captioning (002 Sec. 4.4, Tables 3-4): teacher-forced cross-entropy, caption metrics.

Batches (`layout_screens`, lfpe.data.screens, or `widget_caption`, lfpe.data.widget_caption:
the same features) hold per example a screen's objects (`boxes [N, 4]` bins, `types [N]`,
`texts [N, K]`, `num_objects`), the `target` row and `captions [R, L]` (R references, `<bos>
words <eos>` then padding 0; an all-padding row is no reference); eval batches also `unseen`
and `mask` (real rows). The model (`config.model_name='layout'`, lfpe.models.layout) gets its
vocabularies from the data: `caption_vocab` is the dataset's `num_classes` (unless
`config.model.caption_vocab` asks for more, e.g. 002's 10,000), the text and type
vocabularies are those of lfpe.data.screens (`widget_caption`: its types, and texts in the
caption vocabulary). Captions are decoded for the metrics with the vocabulary of the dataset
`data_name` in `data_dir` (a `widget_caption` build's; lfpe.data.screens' otherwise), which
configs link to `config.data` (`config.data.get_ref('name')`).

Training: every reference is a sequence (inputs `captions[:, r, :-1]`, targets
`captions[:, r, 1:]`, the screen encoded once for its R references); cross-entropy masked on
padding targets, the mean over real tokens (`<eos>` included). Metrics: `loss`,
`token_accuracy`.

Evaluation: the same over the split, and one caption per example decoded greedily
(`beam_size=1`) or by beam search (`beam_size`, `length_penalty`), scored against its
references (`widget_caption`: its `references`, every caption with all its words, not the
vocabulary-filtered, cut training captions) with `caption_metrics` (BLEU-1, BLEU-2, ROUGE-L,
CIDEr-D; METEOR with `meteor=True`, ~10 s of Java per evaluation), times 100 as in 002's
tables, and CIDEr on the seen and unseen examples (Table 4) with the whole split's IDF.
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lfpe.data import get_spec, screens, widget_caption
from lfpe.extras import require_extra
from lfpe.models import layout_decode
from lfpe.tasks.base import model_family

FIELDS = ("boxes", "types", "texts", "num_objects", "target", "captions")
WIDGET = "widget_caption/"  # prefix of the released data's names (its own vocabularies)
DATASETS = ("layout_screens/", WIDGET)  # the screen datasets (name prefixes)
METRICS = ("BLEU-1", "BLEU-2", "ROUGE-L", "CIDEr")


def token_losses(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, ...]:
  """Per-token cross-entropy, hit (float 0/1) and real-token weight (targets != 0), `[...]`."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
  hit = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
  return nll, hit, (targets != 0).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class Captioning:
  """The captioning task (see lfpe/tasks/base.py for the interface).

  beam_size: 1 decodes greedily; more runs beam search with `length_penalty` (GNMT's α).
  meteor: also score METEOR (needs `java`).
  data_name, data_dir: the dataset whose vocabulary decodes captions (module doc); must be
    `config.data`'s for `widget_caption` (its vocabulary is built with the data).
  """

  HEADLINE: ClassVar[str] = "CIDEr"
  beam_size: int = 1
  length_penalty: float = 0.6
  meteor: bool = False
  data_name: str = ""
  data_dir: str = ""

  def data_sizes(self, config: Any) -> dict[str, int]:
    """Vocabulary sizes and coordinate bins of `config.data` (its spec's `num_classes` and
    `sizes`; `config.model` may raise them)."""
    spec = get_spec(config.data.name)
    return {"caption_vocab": spec.num_classes, **spec.sizes}

  def vocabulary(self, key: str = "vocabulary") -> tuple[str, ...]:
    """The words of the caption ids (`data_name`'s; lfpe.data.screens' by default); with
    `key="reference_vocabulary"`, of the references scored against (`widget_caption`'s
    `references`: its captions as written; the synthetic screens' are their captions)."""
    if self.data_name.startswith(WIDGET):
      return widget_caption.vocabulary(self.data_name, self.data_dir, key)
    return screens.CAPTION_VOCAB

  def validate(self, config: Any) -> None:
    """The task's fields, the dataset, vocabularies at least the data's, and pycocoevalcap (its
    evaluation's: missing, it is said now, not after training)."""
    require_extra("captioning", "Caption scores")
    if (
      not isinstance(self.beam_size, int) or isinstance(self.beam_size, bool) or self.beam_size < 1
    ):
      raise ValueError(f"config.task.beam_size must be a positive int, got {self.beam_size!r}.")
    if not isinstance(self.length_penalty, (int, float)) or self.length_penalty < 0:
      raise ValueError(
        f"config.task.length_penalty must be a number >= 0, got {self.length_penalty!r}."
      )
    if not isinstance(self.meteor, bool):
      raise ValueError(f"config.task.meteor must be True or False, got {self.meteor!r}.")
    if self.meteor and shutil.which("java") is None:
      raise ValueError(
        "config.task.meteor=True needs `java` on PATH (METEOR 1.5 is a Java program); "
        "install a Java runtime or set config.task.meteor=False."
      )
    model_family(config, "captioning")
    spec = get_spec(config.data.name)
    if not spec.name.startswith(DATASETS) or set(FIELDS) - set(spec.fields):
      raise ValueError(
        f"config.data.name={spec.name!r}: captioning reads screens with the vocabularies of "
        "lfpe.data.screens or lfpe.data.widget_caption; use 'layout_screens/full', "
        "'layout_screens/small' or 'widget_caption/full'."
      )
    data = (config.data.name, config.data.data_dir)
    if spec.name.startswith(WIDGET) and (self.data_name, self.data_dir) != data:
      raise ValueError(
        f"config.task.data_name / data_dir = {(self.data_name, self.data_dir)!r} must be "
        f"config.data's {data!r}: captions are decoded with that build's vocabulary; link them "
        "with config.task.data_name = config.data.get_ref('name') (and 'data_dir')."
      )
    for key, size in self.data_sizes(config).items():
      value = config.model.get(key, size)
      if not isinstance(value, int) or value < size:
        raise ValueError(f"config.model.{key}={value!r} must be an int >= {size} (the data's).")

  def create_model(self, config: Any) -> nn.Module:
    """`Model(**data_sizes, **config.model)`, computing in config.compute_dtype (one hop)."""
    fields = {**self.data_sizes(config), **config.model.to_dict(), "dtype": config.compute_dtype}
    return model_family(config, "captioning")(**fields)

  def example_batch(self, config: Any) -> dict[str, np.ndarray]:
    n, k, r, length = screens.MAX_OBJECTS, screens.MAX_TEXT, screens.NUM_REFS, screens.CAPTION_LEN
    zeros = lambda *shape: np.zeros((1, *shape), np.int32)
    return {
      "boxes": zeros(n, 4),
      "types": zeros(n),
      "texts": zeros(n, k),
      "num_objects": np.ones((1,), np.int32),
      "target": zeros(),
      "captions": zeros(r, length),
    }

  def _inputs(self, batch: dict[str, Any]) -> list:
    return [batch[k] for k in FIELDS[:-1]] + [batch["captions"][:, :, :-1]]

  def init_variables(self, model: nn.Module, rng: jax.Array, batch: dict[str, Any]) -> Any:
    return model.init({"params": rng, "dropout": rng}, *self._inputs(batch), train=False)

  def forward(self, model, variables, batch, *, train: bool, rng: jax.Array | None) -> Any:
    """`{'logits': [B, R, L-1, V]}`; in evaluation also the decoded `tokens` `[B, L-1]`."""
    rngs = {"dropout": rng} if train else {}
    logits = model.apply(variables, *self._inputs(batch), train=train, rngs=rngs)
    if train:
      return {"logits": logits}
    max_len = batch["captions"].shape[-1] - 1
    if self.beam_size == 1:
      tokens = layout_decode.greedy_decode(model, variables, batch, max_len)
    else:
      tokens = layout_decode.beam_decode(
        model, variables, batch, max_len, self.beam_size, self.length_penalty
      )
    return {"logits": logits, "tokens": tokens}

  def loss(self, outputs, batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    nll, hit, real = token_losses(outputs["logits"], batch["captions"][:, :, 1:])
    count = jnp.maximum(jnp.sum(real), 1.0)
    return jnp.sum(nll * real) / count, {"token_accuracy": jnp.sum(hit * real) / count}

  def eval_sums(self, outputs, batch) -> dict[str, jax.Array]:
    """Token sums over real examples, and per example the caption, references (the data's
    `references` where it has them: widget captions as written; else `captions`), `unseen`."""
    mask = batch.get("mask", jnp.ones(batch["target"].shape, jnp.bool_))
    nll, hit, real = token_losses(outputs["logits"], batch["captions"][:, :, 1:])
    real = real * mask[:, None, None]
    return {
      "nll": jnp.sum(nll * real),
      "hits": jnp.sum(hit * real),
      "tokens": jnp.sum(real),
      "count": jnp.sum(mask),
      "mask": mask,
      "predictions": outputs["tokens"],
      "references": batch["references"] if "references" in batch else batch["captions"],
      "unseen": batch.get("unseen", jnp.zeros_like(mask, jnp.int32)),
    }

  def finalize(self, sums: dict[str, Any]) -> dict[str, float]:
    """Loss and token accuracy over real tokens; caption scores (x100) of real examples."""

    require_extra("captioning", "Caption scores")
    from lfpe.tasks import caption_metrics  # noqa: PLC0415 (pycocoevalcap)

    keep = np.asarray(sums["mask"], bool)

    def text(ids, vocab) -> str:
      ids = np.where(np.asarray(ids) < len(vocab), ids, screens.UNK)  # a larger model vocab
      return caption_metrics.decode_tokens(ids, vocab, screens.EOS, screens.PAD, screens.BOS)

    vocab, written = self.vocabulary(), self.vocabulary("reference_vocabulary")
    predictions = np.asarray(sums["predictions"])[keep]
    candidates = {i: text(p, vocab) for i, p in enumerate(predictions)}
    references = {  # all-padding rows (widget_caption nodes with fewer captions) are none
      i: [text(r, written) for r in refs if r[0] != screens.PAD]
      for i, refs in enumerate(np.asarray(sums["references"])[keep])
    }
    unseen = np.asarray(sums["unseen"])[keep].astype(bool)
    tokens = max(float(sums["tokens"]), 1.0)
    metrics = {
      "loss": float(sums["nll"]) / tokens,
      "token_accuracy": float(sums["hits"]) / tokens,
      "count": float(sums["count"]),
      "count_unseen": float(unseen.sum()),
    }
    if not candidates:
      return metrics
    names = METRICS + ("METEOR",) * self.meteor
    scores = caption_metrics.caption_scores(references, candidates, metrics=names)
    metrics.update({k: 100.0 * v for k, v in scores.items()})
    for name, subset in (("seen", ~unseen), ("unseen", unseen)):
      ids = np.flatnonzero(subset).tolist()
      metrics[f"CIDEr_{name}"] = float("nan")
      if ids:
        cider = caption_metrics.caption_scores(
          {i: references[i] for i in ids},
          {i: candidates[i] for i in ids},
          metrics=("CIDEr",),
          idf_references=references,
        )["CIDEr"]
        metrics[f"CIDEr_{name}"] = 100.0 * cider
    return metrics
