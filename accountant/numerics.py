"""Deprecated alias of ``shuffledp.accountant.engines.numerics`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.numerics`` instead.
"""

from shuffledp.accountant.engines.numerics import *  # noqa: F403
