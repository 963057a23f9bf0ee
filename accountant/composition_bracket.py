"""Deprecated alias of ``shuffledp.accountant.composition.composition_bracket`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.composition.composition_bracket`` instead.
"""

from shuffledp.accountant.composition.composition_bracket import *  # noqa: F403
