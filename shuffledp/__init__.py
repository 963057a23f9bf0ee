"""shuffledp: the shuffle model of differential privacy with k-randomized response."""

__version__ = "0.1.0"
