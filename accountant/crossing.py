"""Deprecated alias of ``shuffledp.accountant.engines.crossing`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.crossing`` instead.
"""

from shuffledp.accountant.engines.crossing import *  # noqa: F403
