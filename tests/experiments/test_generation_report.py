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


def _embed_2d_ahead_at_first(by: float) -> dict:
  """Claims by key when Embed-2D's first evaluation is `by` lower than its offset gives."""
  results = _results(OFFSETS)
  for seed in range(3):
    results[f"lsh/embed_2d/{seed}"]["curve"][0][1] -= by
  return _by_claim(report.claims(results))


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
  entries = _embed_2d_ahead_at_first(0.13)
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


def test_each_margin_is_sized_by_the_best_encoding_on_the_claims_own_metric():
  # Fourier ends best, but Embed-2D leads at the first evaluation by 0.2 beyond its offset:
  # there the gap is Embed-2D's (0.03 - 0.2 - 0.5 = -0.67), not Fourier's (-0.5).
  entries = _embed_2d_ahead_at_first(0.2)
  first = entries[("lsh/fourier", "lsh/sine_2d", "held-out bits/dim at step 250")]
  assert abs(first["control_gap"]) == pytest.approx(0.67, abs=1e-6)
  final = entries[("lsh/fourier", "lsh/sine_2d", "held-out bits/dim at the end")]
  assert abs(final["control_gap"]) == pytest.approx(0.5, abs=1e-6)


def test_gamma_rule_takes_the_lowest_mean_validation_bits_per_dim_ties_to_the_smaller():
  entry = lambda bpd: {"final": bpd, "curve": [[1500, bpd]]}
  results = {
    "sweep/lsh/fourier/gamma=1.0/0": entry(0.90),
    "sweep/lsh/fourier/gamma=1.0/1": entry(0.70),  # mean 0.80
    "sweep/lsh/fourier/gamma=0.25/0": entry(0.78),
    "sweep/lsh/fourier/gamma=0.25/1": entry(0.80),  # mean 0.79: chosen
    "sweep/lsh/fourier_no_mlp/gamma=1.0/0": entry(0.85),
    "sweep/lsh/fourier_no_mlp/gamma=0.0625/0": entry(0.85),  # a tie: the smaller γ
    **_results({"fourier": 0.0, "none": 0.5}),
  }
  assert report.sweep(results)["lsh/fourier"] == {1.0: [0.90, 0.70], 0.25: [0.78, 0.80]}
  assert report.chosen(results) == {"lsh/fourier": 0.25, "lsh/fourier_no_mlp": 0.0625}
  table = "\n".join(report.sweep_table(results))
  row = "| Learnable-Fourier+MLP (gamma), lsh attention | 0.25 | 0.790 ± 0.127 (n = 2) | **yes** |"
  assert row in table
  # Sweep runs are no record runs: no attention called "sweep", no claim about them.
  assert report._attentions(results) == ["lsh"]
  assert all("sweep" not in e["a"] + e["b"] for e in report.claims(results))


def _args(**kw):
  import argparse  # noqa: PLC0415

  from experiments.generation import run  # noqa: PLC0415

  base = dict(quick=False, steps=3000, eval_every=250, attentions=["lsh"], seeds=3, out="/o")
  base.update(sweep_seeds=2, sweep_steps=1500, values=3, swept=run.ENCODINGS, widenings=2)
  return argparse.Namespace(**{**base, "encodings": list(run.ENCODINGS), **kw})


def test_every_encoding_with_a_knob_is_swept_alike_on_validation_digits():
  """The same budget for all: each encoding but `none` over 3 values of its own knob around
  the config's, 2 seeds (100 and 101: `SWEEP_FIRST_SEED`, apart from the record's), trained
  without the validation digits and scored on them; then the record trains each at defaults
  and at its choice (the defaults run when that is the default)."""
  from experiments.generation import run  # noqa: PLC0415

  sweep = {r.key: r.config for r in run.planned_sweep(_args(), {})}
  swept = {k.split("/")[2] + "/" + k.split("/")[3].split("=")[0] for k in sweep}
  assert swept == {"embed_2d/init_std", "embed_1d/init_std", "sine_2d/temperature",
                   "sine_1d/temperature", "fourier/gamma", "fourier_no_mlp/gamma",
                   "mlp/input_scale"}  # fmt: skip
  assert len(sweep) == 2 * 7 * 3  # seeds x encodings with a knob x values
  config = sweep["sweep/lsh/fourier_no_mlp/gamma=0.25/101"]
  assert (config.data.train_split, config.data.eval_split) == ("train[300:]", "train[:300]")
  assert (config.total_steps, config.eval_every, config.seed) == (1500, 1500, 101)
  assert str(config.model.posemb) == "fourier_no_mlp(gamma=0.25)"
  assert str(sweep["sweep/lsh/mlp/input_scale=4/100"].model.posemb) == "mlp(input_scale=4.0)"
  chosen = {"lsh/fourier": 0.0625, "lsh/sine_2d": 10000.0}
  record = {r.key: r.config for r in run.planned(_args(), chosen)}
  assert str(record["lsh/fourier/gamma=0.0625/2"].model.posemb) == "fourier(gamma=0.0625)"
  assert str(record["lsh/fourier/2"].model.posemb) == "fourier(gamma=1.0)"  # its defaults
  assert not any(k.startswith("lsh/sine_2d/temperature") for k in record)  # the default won
  assert len(record) == 3 * (len(run.ENCODINGS) + 1)
  for config in record.values():  # the dataset's own splits: all training digits, the test ones
    assert config.data.train_split is None and config.data.eval_split is None


def test_the_leak_table_pairs_strict_and_recorded_bits_per_dim_by_seed():
  results = _results({"fourier": 0.0, "embed_2d": 0.03})
  for seed, extra in enumerate((0.010, 0.012, 0.014)):
    results[f"lsh/fourier/{seed}"]["strict"] = results[f"lsh/fourier/{seed}"]["final"] + extra
  rows = "\n".join(report.leak(results))
  assert "| Learnable-Fourier+MLP |" in rows and "+0.012 ± 0.005 (n = 3)" in rows
  assert "Embed-2D" not in rows  # not re-scored: no row


def test_the_seeds_table_reads_the_final_orderings_against_the_control_gap():
  entries = report.claims(_results(OFFSETS))  # Fourier best; the control gap is 0.5 bits/dim
  text = report.claims_table.power_markdown(entries)
  assert "seeds for a true difference of 0.05, a tenth of the control gap 0.5" in text
  rows = [line for line in text.splitlines() if line.startswith("| ") and "[lsh" in line]
  final = [e for e in entries if "the end" in e["metric"] and e["item"] != "control"]
  assert len(rows) == len([e for e in final if e["direction"] != 0]) > 0
  assert not any("first evaluation" in row for row in rows)  # no control at step 250
