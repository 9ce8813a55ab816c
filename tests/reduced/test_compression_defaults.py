"""The compressor's defaults: the model's own thresholds and the exact-decrease selection.

A compression should decide as the model does. Re-choosing a classifier's threshold for the
lowest error on the (training) pool, the paper's step and the earlier default, moves it away from
the model's wherever the model does not minimise its own training error (an SVC's margin trades
training errors for a wider margin): even a compression that reproduces the decision function
then predicts differently on new rows (docs/reduced.md, "Thresholds").
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kmp_dask.reduced import ReducedSetCompressor


@pytest.fixture(scope="module")
def noisy():
    """A scaled SVC pipeline on noisy, unbalanced labels (training accuracy well below 1) and wildly
    different feature scales, with fresh rows from the same distribution."""
    rng = np.random.default_rng(0)
    scales = np.array([1.0, 300.0, 0.01, 5.0, 40.0])

    def draw(n):
        Z = rng.normal(size=(n, 5))
        return Z * scales, (Z[:, 0] + 0.8 * rng.normal(size=n) > 0.6).astype(int)

    X, y = draw(300)
    Xt, _ = draw(2000)
    pipe = make_pipeline(StandardScaler(), SVC(gamma=0.5)).fit(X, y)
    return pipe, X, y, Xt


def test_default_keeps_the_models_threshold_and_predicts_as_it_does(noisy):
    pipe, X, y, Xt = noisy
    svc = pipe[-1]
    assert svc.score(pipe[0].transform(X), y) < 0.95  # the margin is not the training-error optimum
    n = len(svc.support_)
    comp = ReducedSetCompressor(n).fit(pipe, X, y)  # defaults; the labelled pool as a user passes it
    assert comp.optimize_threshold is False and comp.criterion == "decrease"
    assert comp.rkhs_error_.sum() <= 1e-2 * comp.wsq_.sum()  # the decision function is reproduced
    np.testing.assert_array_equal(comp.expansion_.intercept, svc.intercept_)
    assert np.mean(comp.predict(Xt) == pipe.predict(Xt)) >= 0.99
    # the paper's threshold re-optimisation on the training labels (the earlier default) is reachable
    # and, on the same vectors, no longer predicts as the model does
    paper = ReducedSetCompressor(n, optimize_threshold=True).fit(pipe, X, y)
    np.testing.assert_array_equal(paper.support_index_, comp.support_index_)
    assert paper.expansion_.intercept[0] != svc.intercept_[0]
    assert np.mean(paper.predict(Xt) == pipe.predict(Xt)) <= 0.95


def _greedy_exact_decrease(K, f, steps):
    """Brute force: each step adds the pool row whose joining (coefficients ``K_SS⁻¹ f(S)``) explains
    the most of ``‖w‖²``, i.e. maximises ``f(S)ᵀ K_SS⁻¹ f(S)``."""
    chosen = []
    for _ in range(steps):
        best, best_gain = None, -np.inf
        for z in range(len(f)):
            if z in chosen:
                continue
            S = chosen + [z]
            gain = f[S] @ np.linalg.solve(K[np.ix_(S, S)], f[S])
            if gain > best_gain:
                best, best_gain = z, gain
        chosen.append(best)
    return chosen


def test_default_selection_is_the_exact_greedy_decrease(noisy):
    pipe, X, y, _ = noisy
    svc = pipe[-1]
    Z = pipe[0].transform(X)
    f = svc.decision_function(Z) - svc.intercept_[0]
    K = np.exp(-0.5 * ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    comp = ReducedSetCompressor(8).fit(pipe, X, y)
    assert list(comp.support_index_) == _greedy_exact_decrease(K, f, 8)
    # its coefficients are the RKHS optimum on those vectors (refit="rkhs")
    S = list(comp.support_index_)
    np.testing.assert_allclose(comp.expansion_.coef[:, 0], np.linalg.solve(K[np.ix_(S, S)], f[S]), rtol=1e-8,
                               atol=1e-10)
    eq13 = ReducedSetCompressor(8, criterion="eq13").fit(pipe, X, y)  # the paper's score, still reachable
    assert list(eq13.support_index_) != list(comp.support_index_)
