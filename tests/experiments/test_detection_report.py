"""The detection report's ablation table: per-run AP of two records, differences, pooling."""

from experiments.detection import report


def _record(aps: dict) -> dict:
  """results.json of runs `{(protocol, posemb): [AP per seed]}`."""
  return {
    f"{protocol}/{posemb}/{seed}": {"eval": {"AP": ap}, "by_size": {}}
    for (protocol, posemb), values in aps.items()
    for seed, ap in enumerate(values)
  }


def test_ablation_differences_and_pooled_row():
  new = _record({("all", "fourier"): [0.10, 0.12, 0.14], ("heldout", "mlp"): [0.05, 0.05, 0.08]})
  old = _record({("all", "fourier"): [0.02, 0.04, 0.03], ("heldout", "mlp"): [0.01, 0.02, 0.03]})
  lines = report.ablation(new, old)
  assert len(lines) == 2 + 2 + 1  # header, two (protocol, encoding) rows, pooled
  fourier = lines[2].split(" | ")
  assert fourier[:2] == ["| all", "Learnable-Fourier+MLP"]
  assert fourier[2].startswith("3.0 ± ") and fourier[3].startswith("12.0 ± ")
  assert fourier[4].startswith("+9.0 ± ")
  pooled = lines[-1].split(" | ")
  assert pooled[:2] == ["| both", "all runs"] and pooled[4].startswith("+6.5 ± ")  # 9.0 - 2.5
  assert "embed_2d" not in "".join(lines) and "Embed-2D" not in "".join(lines)  # no runs, no row
