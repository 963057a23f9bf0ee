"""The printed Theorem IV.1 of Biswas, Jung, Palamidessi (``biswas-literal``): not available yet.

The seed paper ("Tight Differential Privacy Guarantees for the Shuffle Model with k-Randomized
Response", arXiv 2205.08858, FPS 2023) prints a closed form for the privacy loss v_s (eq. 15) that
is not log(P0(s)/P1(s)); the delta values it gives (Tables II and IV) are far too small
(ACCOUNTING.md section 1). This bound exists only to reproduce those tables, labelled "not a
valid guarantee".

The printed formula itself is not available in this workplace: the stored copies of the paper
hold only its abstract, the authors' code is not public, and no reconstruction from the correct
model reproduced Table IV (eps0 = 2, n = 100, n_x0 = 80, k = 10: 2.49e-15, 3.25e-22, 2.20e-30,
1.57e-40, 0). Rather than guess a formula and call it "as printed", the bound refuses with
:class:`BoundUnavailableError` until the formula is supplied (see the issue note).
"""

from __future__ import annotations


class BoundUnavailableError(ValueError):
    """A bound cannot be computed here at all (not a question of its conditions)."""


def biswas_literal_delta(n: int, k: int, eps0: float, nx0: int, eps: float) -> float:
    """The printed Theorem IV.1 at (n, k, eps0, nx0, eps): refuses, see the module docstring."""
    raise BoundUnavailableError(
        "biswas-literal: the paper's printed Theorem IV.1 (eq. 15) is not available here, so it "
        "cannot be reproduced honestly; use single-bin for the exact value of the same model"
    )
