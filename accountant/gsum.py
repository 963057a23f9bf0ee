"""Deprecated alias of ``shuffledp.accountant.engines.gsum`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.gsum`` instead.
"""

from shuffledp.accountant.engines.gsum import *  # noqa: F403
