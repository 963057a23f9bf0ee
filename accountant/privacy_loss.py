"""Deprecated alias of ``shuffledp.accountant.composition.privacy_loss`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.composition.privacy_loss`` instead.
"""

from shuffledp.accountant.composition.privacy_loss import *  # noqa: F403
