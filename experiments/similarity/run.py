"""002 Fig. 2: the similarity of the centre of a 32x32 grid to every position, measured.

  python -m experiments.similarity.run --quick --out=/tmp/similarity_quick  # CI, seconds
  python -m experiments.similarity.run --out=experiments/similarity         # the record

(a) Sine-2D: sinusoidal encodings of y and x concatenated, so the dot product is a sum of
    one kernel per axis and depends on the direction of an offset, not only its length.
(b) Learnable-Fourier at init (Eq. 2, W_r ~ N(0, γ⁻²)): random Fourier features, whose dot
    product approximates ½·exp(−‖x−y‖²/(2γ²)), a Gaussian in L2 distance, isotropic.

Nothing trains: each seed is one draw of the Fourier projection at init, at D = 64 and at
the figure's D = 768 (γ = 4, index coordinates). Per seed, `measure` records how far the map
is from the analytic kernel (RMS over the grid) and its anisotropy (similarity at the
distance-5 offsets along the axes minus that at the distance-5 offsets (3, 4), as a share
of the similarity at 0); Sine-2D is deterministic, measured once. `report.py` writes
`results.json` (with provenance), `claims.json`, the README's verdict table and
`fig2_similarity.png` (seed 0). There is no no-position control: no task is learnt.
"""

from __future__ import annotations

import sys

import jax
import numpy as np

from experiments import cli
from experiments.provenance import provenance
from experiments.similarity import report
from lfpe import encodings
from lfpe.analysis import similarity_map

SHAPE = (32, 32)
GAMMA = 4.0
DIMS = (64, 768)  # 768: the figure's
SEEDS = 20
AXIS = ((0, 5), (0, -5), (5, 0), (-5, 0))  # offsets of length 5 along the axes ...
DIAGONAL = tuple((s * a, t * b) for a, b in ((3, 4), (4, 3)) for s in (1, -1) for t in (1, -1))


def gaussian_kernel(gamma: float = GAMMA) -> np.ndarray:
  """½·exp(−‖x−y‖²/(2γ²)) from the centre of `SHAPE`, the limit of (b)'s map."""
  yx = np.stack(np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij"), -1)
  dist2 = ((yx - np.array([n // 2 for n in SHAPE])) ** 2).sum(-1)
  return 0.5 * np.exp(-dist2 / (2 * gamma**2))


def similarity(posemb: str, *, dim: int, seed: int = 0, **options) -> np.ndarray:
  """The dot-product similarity map of `posemb`'s encoding (at init) from the grid centre."""
  module = encodings.create(posemb, dim=dim, **options)
  coords = module.grid_coords(SHAPE)
  variables = module.init(jax.random.key(seed), coords)
  return similarity_map(module.apply(variables, coords), SHAPE)


def fourier(dim: int, seed: int) -> np.ndarray:
  return similarity("fourier_no_mlp", dim=dim, seed=seed, gamma=GAMMA, coords_mode="index")


def measure(sim: np.ndarray) -> dict:
  """A map's RMS distance from `gaussian_kernel` and its anisotropy at distance 5."""
  c = np.array([n // 2 for n in SHAPE])
  at = lambda offsets: float(np.mean([sim[tuple(c + o)] for o in offsets]))
  return {
    "kernel_rms": float(np.sqrt(np.mean((sim - gaussian_kernel()) ** 2))),
    "anisotropy": (at(AXIS) - at(DIAGONAL)) / float(sim[tuple(c)]),
  }


def figure_maps(dim: int = 768, seed: int = 0) -> dict[str, np.ndarray]:
  """The maps of 002 Fig. 2 (and the full Learnable-Fourier+MLP at init, and the kernel)."""
  return {
    "(a) Sine-2D (concat)": similarity("sine_2d", dim=dim),
    "(b) Learnable-Fourier, init": fourier(dim, seed),
    "Learnable-Fourier+MLP, init": similarity(
      "fourier", dim=dim, seed=seed, gamma=GAMMA, coords_mode="index"
    ),
    "½·exp(−‖x−y‖²/(2γ²))": gaussian_kernel(),
  }


def main(argv: list[str] | None = None) -> dict:
  argv = sys.argv[1:] if argv is None else argv
  parser = cli.parser(__doc__)
  parser.add_argument("--quick", action="store_true", help="3 seeds: CI")
  parser.add_argument("--out", default="experiments/similarity")
  cli.add_seeds_flag(parser, default=SEEDS)
  parser.add_argument("--status", action="store_true", help="(nothing trains: always done)")
  args = parser.parse_args(argv)
  if args.status:
    print("Nothing trains: the record is computed in seconds.")
    return {}
  cli.settle_mode(args)
  seeds = 3 if args.quick else args.seeds
  results = {
    "provenance": provenance(["python", "-m", __spec__.name, *argv]),
    "gamma": GAMMA,
    "sine_2d": {str(d): measure(similarity("sine_2d", dim=d)) for d in DIMS},
    "fourier": {str(d): [measure(fourier(d, s)) for s in range(seeds)] for d in DIMS},
  }
  report.write(results, figure_maps(), args.out)
  print(f"similarity: {len(DIMS)} widths x {seeds} seeds measured; report in {args.out}/")
  return results


if __name__ == "__main__":
  cli.run(main)
