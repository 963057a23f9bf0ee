"""Deprecated alias of ``shuffledp.accountant.engines.k2_fft`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.k2_fft`` instead.
"""

from shuffledp.accountant.engines.k2_fft import *  # noqa: F403
