"""The project's CVMClassifier, MMDA and SparseKernelPCA as compression sources (kmp_dask.reduced._models).

Each is a kernel expansion: its target's decision values must equal the model's own
(``decision_function`` / ``transform``) and its prediction rule the model's ``predict``; a
compression of each keeps the asked number of vectors and approaches the model as it grows.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from kmp_dask import MMDA, CVMClassifier, ReducedSetCompressor, SparseKernelPCA
from kmp_dask.reduced._models import as_compression_target


def _blobs(k, n=240, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, 2))
    labels = np.array(["ant", "bee", "cat", "dog"][:k], dtype=object)
    code = rng.integers(0, k, size=n)
    return centres[code] + rng.normal(size=(n, 2)), labels[code]


@pytest.mark.parametrize("k", [2, 3])
def test_cvm_target_equals_the_model(k):
    X, y = _blobs(k)
    cvm = CVMClassifier(C=10.0, gamma=0.5, random_state=0, client="sync").fit(X, y)
    target = as_compression_target(cvm)
    assert target.kind == ("binary" if k == 2 else "ovr") and target.source == "CVMClassifier"
    assert_array_equal(target.classes, cvm.classes_)
    F = target.expansion.decision_function(X)
    assert_allclose(F[:, 0] if k == 2 else F, cvm.decision_function(X), rtol=1e-12, atol=1e-12)
    assert_array_equal(target.predict(F), cvm.predict(X))
    masks = target.output_labels(y)  # one-vs-rest problems, as the CVM solved them
    assert len(masks) == (1 if k == 2 else k) and all(m.all() for m, _ in masks)


def test_mmda_target_is_its_features():
    X, y = _blobs(3)
    mmda = MMDA(n_components=2, C=10.0, gamma=0.5, random_state=0, client="sync").fit(X, y)
    target = as_compression_target(mmda)
    assert target.kind == "regression" and target.source == "MMDA" and target.classes is None
    F = target.expansion.decision_function(X)
    assert F.shape == (len(X), mmda.n_features_out_)
    assert_allclose(F, mmda.transform(X), rtol=1e-12, atol=1e-12)
    assert_allclose(target.predict(F), mmda.transform(X), rtol=1e-12, atol=1e-12)


def test_cvm_compression_on_string_labels():
    X, y = _blobs(3, n=300)
    cvm = CVMClassifier(C=10.0, gamma=0.5, random_state=0, client="sync").fit(X, y)
    n_full = cvm.expansion_.n_vectors
    comp = ReducedSetCompressor(n_vectors=12, random_state=0).fit(cvm, X, y)
    assert comp.n_vectors_ == 12 < n_full
    assert_array_equal(comp.classes_, cvm.classes_)
    agree = np.mean(comp.predict(X) == cvm.predict(X))
    assert agree >= 0.9, agree
    assert set(np.unique(comp.predict(X))) <= set(cvm.classes_)


def test_mmda_compression_approaches_the_features():
    X, y = _blobs(2, n=300)
    mmda = MMDA(n_components=2, C=10.0, gamma=0.5, random_state=0, client="sync").fit(X, y)
    full = mmda.transform(X)
    errors = []
    for n in (3, 10):
        comp = ReducedSetCompressor(n_vectors=n, random_state=0).fit(mmda)
        approx = comp.predict(X)
        assert approx.shape == full.shape
        errors.append(float(np.sqrt(np.mean((approx - full) ** 2))))
    assert errors[1] < errors[0]
    assert errors[1] < 0.5 * float(np.std(full)), errors


def test_sparse_kpca_target_is_its_features():
    X, _ = _blobs(2, n=200)
    kpca = SparseKernelPCA(n_components=3, gamma=0.5, random_state=0, client="sync").fit(X)
    target = as_compression_target(kpca)
    assert target.kind == "regression" and target.source == "SparseKernelPCA"
    assert_allclose(target.expansion.decision_function(X), kpca.transform(X), rtol=1e-12, atol=1e-12)
    comp = ReducedSetCompressor(n_vectors=2, random_state=0).fit(kpca)
    assert comp.predict(X).shape == (len(X), 3) and comp.n_vectors_ == 2
