"""scikit-learn's own estimator checks on every public estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from kmp_dask import KMPClassifier, KMPRegressor


@parametrize_with_checks([
    KMPRegressor(n_basis=30),
    KMPClassifier(n_basis=30),
    KMPRegressor(n_basis=20, fit_mode="prefit", candidates="all"),
    KMPClassifier(n_basis=20, fit_mode="basic", validation_fraction=0.2, n_iter_no_change=3),
    KMPClassifier(n_basis=15, loss="logistic"),
    KMPClassifier(n_basis=15, loss="tanh", fit_mode="basic", gamma=[0.1, 1.0]),
    KMPRegressor(n_basis=15, loss="huber"),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)
