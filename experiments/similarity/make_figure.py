"""002 Fig. 2: similarity of the centre of a 32x32 grid to all other positions.

(a) Sine-2D: sinusoidal encodings of y and x concatenated; the dot product decays
    along the axes much faster than along diagonals.
(b) Learnable-Fourier at init (Eq. 2, W_r ~ N(0, γ⁻²)): the dot product approximates
    ½·exp(−‖x−y‖²/(2γ²)), a Gaussian in L2 distance, isotropic in every direction.
Also shown: the full Learnable-Fourier + MLP at init, and the analytic kernel.

  python experiments/similarity/make_figure.py   # writes fig2_similarity.png here
"""

from __future__ import annotations

import argparse
import os

import jax
import numpy as np

from lfpe import encodings
from lfpe.analysis import plot_similarity_maps, similarity_map

SHAPE = (32, 32)


def figure_maps(dim: int = 768, gamma: float = 4.0, seed: int = 0) -> dict[str, np.ndarray]:
  """The similarity maps of 002 Fig. 2 on a 32x32 index grid."""
  rng = jax.random.key(seed)
  sine = encodings.create("sine_2d", dim=dim)
  features = encodings.create("fourier_no_mlp", dim=dim, gamma=gamma, coords_mode="index")
  fourier_mlp = encodings.create("fourier", dim=dim, gamma=gamma, coords_mode="index")
  maps = {}
  for name, module in [
    ("(a) Sine-2D (concat)", sine),
    ("(b) Learnable-Fourier, init", features),
    ("Learnable-Fourier+MLP, init", fourier_mlp),
  ]:
    coords = module.grid_coords(SHAPE)
    variables = module.init(rng, coords)
    maps[name] = similarity_map(module.apply(variables, coords), SHAPE)
  yx = np.stack(np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij"), -1)
  dist2 = ((yx - np.array([n // 2 for n in SHAPE])) ** 2).sum(-1)
  maps["½·exp(−‖x−y‖²/(2γ²))"] = 0.5 * np.exp(-dist2 / (2 * gamma**2))
  return maps


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--out", default=os.path.join(os.path.dirname(__file__), "fig2_similarity.png")
  )
  parser.add_argument("--gamma", type=float, default=4.0)
  args = parser.parse_args()
  maps = figure_maps(gamma=args.gamma)
  plot_similarity_maps(
    maps,
    args.out,
    title=f"002 Fig. 2: similarity of the centre position (32x32 grid, D=768, γ={args.gamma})",
  )
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
