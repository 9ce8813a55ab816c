"""kmp_dask's warnings point at the user's line (the call that fit), not at the package's code,
whatever the depth of the call inside kmp_dask (``exceptions.user_stacklevel``)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import make_classification, make_moons

from kmp_dask import KMPClassifier, KMPClassifierCV, KMPRegressor, ReducedSetCompressor, SparseKernelPCA
from kmp_dask.exceptions import BoundAtCapWarning, KernelWidthWarning, user_stacklevel
from kmp_dask.reduced import PrefixKeptWarning


def _caught(category, call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    got = [w for w in seen if issubclass(w.category, category)]
    assert got, [str(w.message) for w in seen]
    return got


def _here(records):
    """Every record's file is this test file (the user's code)."""
    assert all(w.filename == __file__ for w in records), [(w.filename, w.lineno) for w in records]


def test_user_stacklevel_outside_the_package_is_the_caller():
    def warn():
        warnings.warn("x", UserWarning, stacklevel=user_stacklevel())

    (w,) = _caught(UserWarning, warn)
    assert w.filename == __file__ and w.lineno == warn.__code__.co_firstlineno + 1


def test_kernel_width_warning_points_at_the_fit():
    X, y = make_moons(200, noise=0.1, random_state=0)
    _here(_caught(KernelWidthWarning, lambda: KMPClassifier(gamma=1e6, n_basis=10, random_state=0).fit(X, y)))


def test_bound_at_cap_warnings_point_at_the_fit():
    X = np.random.default_rng(0).normal(size=(300, 5))
    _here(_caught(BoundAtCapWarning, lambda: SparseKernelPCA(n_components="bound", max_components=15,
                                                             random_state=0).fit(X)))
    rng = np.random.default_rng(0)
    Xs = rng.uniform(-3, 3, size=(2000, 1))
    ys = np.sin(2 * Xs[:, 0]) + 0.02 * rng.normal(size=2000)
    _here(_caught(BoundAtCapWarning, lambda: KMPRegressor(n_basis=3, stopping="bound", bound_threshold=0.1,
                                                          random_state=0).fit(Xs, ys)))


def test_prefix_kept_warning_points_at_the_fit():
    X, y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0, flip_y=0.05)
    model = KMPClassifier(gamma=0.3, n_basis=60, random_state=0).fit(X, y)
    _here(_caught(PrefixKeptWarning, lambda: ReducedSetCompressor(5, random_state=0).fit(model, X, y)))


def test_cv_edge_warning_points_at_the_fit():
    X, y = make_moons(300, noise=0.2, random_state=0)
    search = KMPClassifierCV(gammas=[1e-3, 1e-2], n_basis=20, cv=3, random_state=0)
    records = _caught(UserWarning, lambda: search.fit(X, y))
    edge = [w for w in records if "KMPClassifierCV: " in str(w.message)]
    assert edge, [str(w.message) for w in records]
    _here(edge)
