"""Deprecated alias of ``shuffledp.accountant.engines.k2_waves`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.k2_waves`` instead.
"""

from shuffledp.accountant.engines.k2_waves import *  # noqa: F403
