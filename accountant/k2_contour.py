"""Deprecated alias of ``shuffledp.accountant.engines.k2_contour`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.k2_contour`` instead.
"""

from shuffledp.accountant.engines.k2_contour import *  # noqa: F403
