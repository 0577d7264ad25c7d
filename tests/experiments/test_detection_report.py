"""The detection report's ablation table: per-run AP of two records, differences, pooling."""

import json

from experiments.detection import report


def _record(aps: dict) -> dict:
  """results.json of runs `{(protocol, posemb): [AP per seed]}`."""
  return {
    f"{protocol}/{posemb}/{seed}": {"eval": dict.fromkeys(report.METRICS, ap), "by_size": {}}
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


def test_write_compares_with_each_earlier_record_found(tmp_path):
  new = _record({("all", "fourier"): [0.10, 0.12, 0.14]})
  for name, ap in zip(report.EARLIER, (0.02, 0.05), strict=True):
    (tmp_path / name).write_text(json.dumps(_record({("all", "fourier"): [ap] * 3})))
  report.write(new, str(tmp_path))
  text = (tmp_path / "tables.md").read_text()
  for name in report.EARLIER:
    assert f"`{name}`" in text
  assert "+10.0" in text and "+7.0" in text  # 12.0 - 2.0 and 12.0 - 5.0
  assert (tmp_path / "ap_by_size.png").exists()
