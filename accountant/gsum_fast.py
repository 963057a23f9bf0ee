"""Deprecated alias of ``shuffledp.accountant.engines.gsum_fast`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.gsum_fast`` instead.
"""

from shuffledp.accountant.engines.gsum_fast import *  # noqa: F403
