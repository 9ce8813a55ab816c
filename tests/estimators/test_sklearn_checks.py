"""scikit-learn's own estimator checks on every public estimator."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import KMPClassifier, KMPRegressor

_REPEATED_ROWS = (
    "check_sample_weight_equivalence_on_dense_data fits 15 rows with n_basis close to or above the number "
    "of distinct rows: {why}. tests/estimators/test_sample_weight.py asserts the equivalence where the "
    "pursuit does not run out of distinct rows."
)
_EXPECTED = {
    # the held-out rows are a hash of the global row index: repeating rows changes which are held out
    "validation": "validation_fraction > 0 holds out rows by a hash of their index, so the repeated data set "
                  "has a different validation split than the weighted one (by design: the split is chunking-free).",
    # fit_mode='basic' may pick a copy of a row already in the basis (another index, the same function)
    "basic": _REPEATED_ROWS.format(why="in fit_mode='basic' the repeated data set offers copies of a basis row "
                                       "as new candidates and the pursuit re-selects them, while a weighted row "
                                       "is selected at most once"),
    # near-interpolating bases: rounding differences amplified, and Newton refits stop at a tolerance
    "exhaust": _REPEATED_ROWS.format(why="the basis interpolates the data, the Gram matrix is ill-conditioned and "
                                         "rounding differences (or the Newton refits' stopping tolerance) "
                                         "move predictions by more than rtol=1e-7"),
}


PROBA_ARGMAX = (
    "predict is the model's own rule (the sign / argmax of the decision values); probability=True maps those "
    "values through a calibration fitted on held-out rows (Platt's sigmoid with its intercept), which may move "
    "the 0.5 point, so argmax(predict_proba) can differ from predict on rows near the boundary — as for "
    "scikit-learn's SVC(probability=True).")


def _expected_failures(est):
    held_out = est.n_basis == "auto" if est.validation_fraction == "auto" else est.validation_fraction > 0
    probability = getattr(est, "probability", False)
    calibrated = probability is True or (probability == "auto" and held_out and est.loss != "logistic")
    if probability is True:
        return {"check_classifiers_train": PROBA_ARGMAX}
    proba = {"check_classifiers_train": PROBA_ARGMAX} if calibrated else {}
    if held_out:  # n_basis="auto" holds out validation_fraction="auto" of the rows
        why = _EXPECTED["validation"]
    elif est.fit_mode == "basic":
        why = _EXPECTED["basic"]
    elif est.fit_mode == "prefit" or est.loss == "logistic":  # the two that exhaust the 15 rows here
        why = _EXPECTED["exhaust"]
    else:
        return proba
    return {**proba, "check_sample_weight_equivalence_on_dense_data": why}


# scikit-learn's checks fit a few dozen random rows, often with random labels: n_basis="auto" may
# rightly keep no basis function there, and says so (DegenerateFitWarning, "kept no basis function").
@pytest.mark.filterwarnings("ignore:.*kept no basis function:kmp_dask.exceptions.DegenerateFitWarning")
@parametrize_with_checks([
    KMPRegressor(),  # the defaults: n_basis="auto"
    KMPClassifier(),
    KMPRegressor(validation_fraction=0),  # "auto" with the size chosen by GCV
    KMPClassifier(validation_fraction=0),
    KMPRegressor(n_basis=30),
    KMPClassifier(n_basis=30),
    KMPRegressor(n_basis=20, fit_mode="prefit", candidates="all"),
    KMPClassifier(n_basis=20, fit_mode="basic", validation_fraction=0.2, n_iter_no_change=3),
    KMPClassifier(n_basis=15, loss="logistic"),
    KMPClassifier(n_basis=15, probability=True),
    KMPClassifier(n_basis=15, loss="tanh", fit_mode="basic", gamma=[0.1, 1.0]),
    KMPRegressor(n_basis=15, loss="huber"),
], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)
