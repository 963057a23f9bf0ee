"""``python -m shuffledp``: the same entry point as the ``shuffledp`` console script."""

from shuffledp.launcher import run

run()
