"""Deprecated alias of ``shuffledp.accountant.engines.pairs`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.pairs`` instead.
"""

from shuffledp.accountant.engines.pairs import *  # noqa: F403
