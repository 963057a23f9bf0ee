"""Deprecated alias of ``shuffledp.accountant.engines.k2_exact`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.engines.k2_exact`` instead.
"""

from shuffledp.accountant.engines.k2_exact import *  # noqa: F403
from shuffledp.accountant.engines.k2_exact import _Coefs as _Coefs
from shuffledp.accountant.engines.k2_exact import _gamma as _gamma
from shuffledp.accountant.engines.k2_exact import _guesses as _guesses
from shuffledp.accountant.engines.k2_exact import _walk as _walk
