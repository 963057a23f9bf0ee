"""Deprecated alias of ``shuffledp.accountant.bounds.renyi_girgis`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.bounds.renyi_girgis`` instead.
"""

from shuffledp.accountant.bounds.renyi_girgis import *  # noqa: F403
