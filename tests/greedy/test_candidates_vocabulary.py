"""One ``candidates`` vocabulary for every estimator: "all" (None the same), "auto"
(s = ⌈log ε / log q⌉ = 59) or an int — the same model whichever spelling, the same refusal."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from kmp_dask import CVMClassifier, KMPClassifier, ReducedSetCompressor, SparseKCCA, SparseKernelPCA
from kmp_dask.greedy._sampling import resolve_candidates

X, Y = make_classification(300, n_features=5, n_informative=4, n_redundant=0, random_state=0)


def test_resolve_candidates():
    assert resolve_candidates("all") is None and resolve_candidates(None) is None
    assert resolve_candidates("auto") == 59 and resolve_candidates("auto", eps=0.01, q=0.98) == 228
    assert resolve_candidates(7) == 7 and resolve_candidates(np.int64(3)) == 3
    for bad in (0, -1, True, 2.5, "some", "ALL"):
        with pytest.raises(ValueError, match=r"candidates must be 'all'.*got"):
            resolve_candidates(bad)


def _fits():
    svc = SVC(gamma=0.3).fit(X, Y)
    return {
        "cvm": (lambda c: CVMClassifier(gamma=0.3, candidates=c, random_state=0).fit(X, Y), "decision_function"),
        "kpca": (lambda c: SparseKernelPCA(8, gamma=0.3, candidates=c, random_state=0).fit(X), "transform"),
        "kcca": (lambda c: SparseKCCA(3, gamma_x=0.3, gamma_y=0.3, candidates=c, random_state=0).fit(X, X[:, :2] ** 2),
                 "transform"),
        "rs": (lambda c: ReducedSetCompressor(10, candidates=c, random_state=0).fit(svc, X, Y), "decision_function"),
    }


@pytest.mark.parametrize("name", ["cvm", "kpca", "kcca", "rs"])
@pytest.mark.parametrize("word, same", [("all", None), ("auto", 59)])
def test_every_estimator_takes_the_words(name, word, same):
    fit, method = _fits()[name]
    a, b = fit(word), fit(same)
    assert_array_equal(getattr(a, method)(X), getattr(b, method)(X))


@pytest.mark.parametrize("name", ["cvm", "kpca", "kcca", "rs"])
def test_every_estimator_refuses_the_same_way(name):
    fit, _ = _fits()[name]
    with pytest.raises(ValueError, match=r"candidates must be 'all'.*got 'some'"):
        fit("some")


def test_kmp_speaks_the_same_words():
    a = KMPClassifier(gamma=0.3, n_basis=10, candidates="auto", random_state=0).fit(X, Y)
    b = KMPClassifier(gamma=0.3, n_basis=10, candidates=59, random_state=0).fit(X, Y)
    assert_array_equal(a.decision_function(X), b.decision_function(X))
