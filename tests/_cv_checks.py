"""Shared checks of the cross-validating estimators' tests."""

from __future__ import annotations

import numpy as np


def assert_same_search(a, b):
    """Two fitted ``KMP*CV`` searches agree bit for bit: widths, every held-out score, every
    ``cv_results_`` entry but the pursuits' seconds, the choice and the refit's basis."""
    np.testing.assert_array_equal(a.gammas_, b.gammas_)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    for key, value in a.cv_results_.items():
        if "fit_time" not in key:  # the pursuits' seconds
            assert value == b.cv_results_[key] if key == "params" else np.array_equal(value, b.cv_results_[key]), key
    assert a.best_params_ == b.best_params_
    np.testing.assert_array_equal(a.best_estimator_.basis_indices_, b.best_estimator_.basis_indices_)
