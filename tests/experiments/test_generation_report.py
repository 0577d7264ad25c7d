"""experiments/generation/report.py's claims, on made-up curves whose differences are known."""

import numpy as np
import pytest

from experiments.generation import report

STEPS = [250 * k for k in range(1, 13)]  # the record's evaluations: 250, ..., 3000


def _results(offsets: dict[str, float], early: dict[str, float] | None = None) -> dict:
  """Three seeds per encoding; bits/dim = a shared curve + the encoding's offset + seed noise;
  `early` adds to the evaluations in the first 30 % of training only."""
  early = early or {}
  base = np.linspace(1.3, 0.9, len(STEPS))
  out = {"provenance": {}}
  for posemb, offset in offsets.items():
    for seed in range(3):
      noise = 0.001 * (seed - 1)
      curve = [
        [s, float(b + offset + noise + (early.get(posemb, 0.0) if s <= 900 else 0.0))]
        for s, b in zip(STEPS, base, strict=True)
      ]
      out[f"lsh/{posemb}/{seed}"] = {"final": curve[-1][1], "curve": curve}
  return out


OFFSETS = {
  "fourier": 0.0,
  "fourier_no_mlp": 0.05,
  "mlp": 0.08,
  "embed_2d": 0.03,
  "embed_1d": 0.06,
  "sine_2d": 0.04,
  "sine_1d": 0.07,
  "none": 0.5,
}


def _by_claim(entries: list[dict]) -> dict[tuple[str, str, str], dict]:
  return {(e["a"], e["b"], e["metric"]): e for e in entries}


def test_the_early_window_is_the_first_30_percent_of_training():
  assert report.early_steps(STEPS) == [250, 500, 750]
  assert report.early_steps([3, 6]) == [3]  # --quick: at least the first evaluation


def test_learnable_fourier_alone_is_judged_on_the_mean_of_its_early_evaluations():
  # Alone it trails by 0.05 at the end; early it is 0.045 better than that: 0.005 behind.
  entries = _by_claim(report.claims(_results(OFFSETS, early={"fourier_no_mlp": -0.045})))
  metric = "held-out bits/dim at steps 250-750 (mean)"
  early = entries[("lsh/fourier_no_mlp", "lsh/fourier", metric)]
  assert early["difference"] == pytest.approx(0.005, abs=1e-6)
  assert early["verdict"] == "reproduced"  # within ±0.02 bits/dim
  final = entries[("lsh/fourier", "lsh/fourier_no_mlp", "held-out bits/dim at the end")]
  assert final["difference"] == pytest.approx(-0.05, abs=1e-6)
  assert final["verdict"] == "reproduced" and final["paired"]


def test_faster_convergence_is_read_at_the_first_evaluation_only():
  # Embed-2D is 0.1 better than Fourier at step 250 only: "converges faster" is contradicted
  # there while the final ordering still holds.
  results = _results(OFFSETS)
  for seed in range(3):
    results[f"lsh/embed_2d/{seed}"]["curve"][0][1] -= 0.13
  entries = _by_claim(report.claims(results))
  first = entries[("lsh/fourier", "lsh/embed_2d", "held-out bits/dim at step 250")]
  assert first["difference"] == pytest.approx(0.1, abs=1e-6) and first["verdict"] == "contradicted"
  final = entries[("lsh/fourier", "lsh/embed_2d", "held-out bits/dim at the end")]
  assert final["verdict"] == "reproduced"


def test_the_control_pits_the_best_encoding_against_no_position():
  entries = report.claims(_results(OFFSETS))
  (control,) = [e for e in entries if e["item"] == "control"]
  assert (control["a"], control["b"]) == ("lsh/fourier", "lsh/none")
  assert control["difference"] == pytest.approx(-0.5, abs=1e-6)
  assert control["verdict"] == "reproduced"
  assert len(entries) == 1 + len(report.ORDERINGS) + 4 + 1
