"""Analysis of positional encodings: similarity maps and their plots."""

from lfpe.analysis.similarity import plot_similarity_maps, similarity_map

__all__ = ["plot_similarity_maps", "similarity_map"]
