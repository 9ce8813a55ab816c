"""A compressed KMP model that is worse on the labelled pool than the KMP fit's own prefix of the
same size is replaced by that prefix, with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from kmp_dask import KMPClassifier
from kmp_dask.reduced import PrefixKeptWarning, ReducedSetCompressor


@pytest.fixture(scope="module")
def kmp():
    X, y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0, flip_y=0.05)
    return X, y, KMPClassifier(gamma=0.3, n_basis=60, random_state=0).fit(X, y)


def _error(exp, X, y, classes):
    """Training error of a binary expansion, decided as the KMP classifier decides (F > 0 → classes[1])."""
    F = np.asarray(exp.decision_function(X)).reshape(len(X), -1)[:, 0]
    return float(np.mean(np.where(F > 0, classes[1], classes[0]) != y))


def test_a_compression_worse_than_the_prefix_keeps_the_prefix(kmp):
    X, y, model = kmp
    with pytest.warns(PrefixKeptWarning, match="keeping that prefix"):
        comp = ReducedSetCompressor(5, random_state=0).fit(model, X, y)
    prefix = model.expansion_at(5)
    compressed = comp.expansion_at(5)  # the compression path's own level of that size
    assert _error(compressed, X, y, model.classes_) > _error(prefix, X, y, model.classes_)
    assert comp.used_prefix_ and comp.n_vectors_ == 5
    assert comp.expansion_.support_vectors.tobytes() == prefix.support_vectors.tobytes()
    assert comp.expansion_.coef.tobytes() == prefix.coef.tobytes()
    assert np.mean(comp.predict(X) != y) == _error(prefix, X, y, model.classes_)
    np.testing.assert_array_equal(X[comp.support_index_], prefix.support_vectors)  # the pool rows of its vectors


def test_a_compression_at_least_as_good_as_the_prefix_is_kept(kmp):
    X, y, model = kmp
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrefixKeptWarning)
        comp = ReducedSetCompressor(12, optimize_threshold=True, random_state=0).fit(model, X, y)
    assert not comp.used_prefix_
    assert _error(comp.expansion_, X, y, model.classes_) <= _error(model.expansion_at(12), X, y, model.classes_)
    assert comp.expansion_.support_vectors.tobytes() != model.expansion_at(12).support_vectors.tobytes()


def test_no_prefix_without_labels_or_for_other_models(kmp):
    X, y, model = kmp
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrefixKeptWarning)
        assert not ReducedSetCompressor(5, random_state=0).fit(model).used_prefix_  # no labels: nothing to compare
        svc = SVC(gamma=0.3).fit(X, y)
        assert not ReducedSetCompressor(5, random_state=0).fit(svc, X, y).used_prefix_
