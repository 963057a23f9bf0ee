"""Deprecated alias of ``shuffledp.accountant.bounds.largest_group`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.bounds.largest_group`` instead.
"""

from shuffledp.accountant.bounds.largest_group import *  # noqa: F403
