"""Deprecated alias of ``shuffledp.accountant.bounds.biswas_literal`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.bounds.biswas_literal`` instead.
"""

from shuffledp.accountant.bounds.biswas_literal import *  # noqa: F403
