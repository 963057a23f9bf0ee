"""Deprecated alias of ``shuffledp.accountant.worst_case.k3_exhaustive`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.worst_case.k3_exhaustive`` instead.
"""

from shuffledp.accountant.worst_case.k3_exhaustive import *  # noqa: F403
