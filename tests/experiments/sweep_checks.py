"""What a `--quick` record's sweep must have trained: two base values and one widening."""

from experiments import runs, sweeps


def widened_keys(
  results: dict, arm: str, base: tuple, score, higher_is_better: bool, knob=lambda g: f"gamma={g}"
) -> list:
  """The sweep keys (the first sweep seed, `runs.SWEEP_FIRST_SEED`: detection and generation
  begin there) of `arm` under the edge rule: with two base values the better is always at an
  edge, so the grid gains the value one `WIDEN_FACTOR` beyond it. `knob` writes a value's
  key part."""
  by_gamma = sweeps.scores(results, score)[arm]
  base_scores = {arm: {g: by_gamma[g] for g in base}}
  best = sweeps.choose(base_scores, higher_is_better=higher_is_better)[arm]
  beyond = best / sweeps.WIDEN_FACTOR if best == min(base) else best * sweeps.WIDEN_FACTOR
  return [f"sweep/{arm}/{knob(g)}/{runs.SWEEP_FIRST_SEED}" for g in sorted((*base, beyond))]
