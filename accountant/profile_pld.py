"""Deprecated alias of ``shuffledp.accountant.composition.profile_pld`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.composition.profile_pld`` instead.
"""

from shuffledp.accountant.composition.profile_pld import *  # noqa: F403
