"""Deprecated alias of ``shuffledp.accountant.engines.family_counts`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.family_counts`` instead.
"""

from shuffledp.accountant.engines.family_counts import *  # noqa: F403
