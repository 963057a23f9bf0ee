"""Deprecated alias of ``shuffledp.accountant.bounds.blanket`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.bounds.blanket`` instead.
"""

from shuffledp.accountant.bounds.blanket import *  # noqa: F403
