"""Accounting over rounds: a listed dominating pair composed through its privacy-loss
distribution (pair_pld.py), the PLD of a one-round privacy profile (profile_pld.py), the PLDs
by bound name (privacy_loss.py) and the composed bracket (composition_bracket.py).

The package re-exports pair_pld.py, so ``from shuffledp.accountant.composition import
compose`` keeps working from when pair_pld.py was the module accountant/composition.py (that
path is deprecated: code inside the accountant imports
``shuffledp.accountant.composition.pair_pld``). Importing it loads dp_accounting.
"""

from shuffledp.accountant.composition.pair_pld import *  # noqa: F403
