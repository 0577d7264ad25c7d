"""lfpe: positional encodings for attention models, in JAX/Flax."""

__version__ = "0.1.0"
