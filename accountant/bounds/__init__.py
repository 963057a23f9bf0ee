"""Each labelled bound, one module per bound (blanket, largest_group, renyi_girgis,
biswas_literal), and their common base (base.py: ``Bound``, its kinds and records, the
clones bounds).

The package re-exports base.py, so ``from shuffledp.accountant.bounds import Bound`` keeps
working from when base.py was the module accountant/bounds.py (that path is deprecated:
code inside the accountant imports ``shuffledp.accountant.bounds.base``).
"""

from shuffledp.accountant.bounds.base import *  # noqa: F403
