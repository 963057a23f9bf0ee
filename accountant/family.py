"""Deprecated alias of ``shuffledp.accountant.worst_case.family`` (the accountant's layout by role);
to be removed in the next release. Import ``shuffledp.accountant.worst_case.family`` instead.
"""

from shuffledp.accountant.worst_case.family import *  # noqa: F403
from shuffledp.accountant.worst_case.family import _atoms_all_x0 as _atoms_all_x0
from shuffledp.accountant.worst_case.family import _atoms_all_x2 as _atoms_all_x2
