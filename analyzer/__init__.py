"""shuffledp.analyzer: count, debias and compare (docs/report-schema.md, docs/estimators.md).

Pure cores (no I/O):

* :mod:`.estimators`: the k-RR channel and the estimators of the report: ``shuffle``
  (:func:`raw_normalised`), ``shuffle+INV`` (:func:`shuffle_inv` = :func:`matrix_inversion` then
  :func:`project_to_simplex`), ``IBU`` (:func:`iterative_bayesian_update`, limit :func:`krr_mle`).
* :mod:`.baseline`: the central analytic-Gaussian baseline (:func:`gaussian_baseline`).
* :mod:`.metrics`: :func:`tv_distance`.
"""

from shuffledp.analyzer.baseline import (
    L2_SENSITIVITY_REPLACE_ONE,
    GaussianBaseline,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    gaussian_baseline,
)
from shuffledp.analyzer.estimators import (
    IBUConvergenceError,
    iterative_bayesian_update,
    krr_channel,
    krr_mle,
    krr_probabilities,
    matrix_inversion,
    project_to_simplex,
    raw_normalised,
    shuffle_inv,
)
from shuffledp.analyzer.metrics import tv_distance

__all__ = [
    "L2_SENSITIVITY_REPLACE_ONE",
    "GaussianBaseline",
    "IBUConvergenceError",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "gaussian_baseline",
    "iterative_bayesian_update",
    "krr_channel",
    "krr_mle",
    "krr_probabilities",
    "matrix_inversion",
    "project_to_simplex",
    "raw_normalised",
    "shuffle_inv",
    "tv_distance",
]
