"""Core vector machines and MMDA against a dense L2-SVM, invariants, real clusters, sklearn checks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.utils.estimator_checks import parametrize_with_checks
from test_cvm_kkt import _slsqp_meb

from kmp_dask import MMDA, CVMClassifier
from kmp_dask.blockops._cvm import cvm_effects
from kmp_dask.greedy._cvm import core_vector_machine
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore

GAMMA, C, EPS = 0.3, 10.0, 1e-3


def _data(n=400, seed=0):
    return make_classification(n, n_features=5, n_informative=4, n_redundant=0, random_state=seed)


def _dense_meb(X, y, kernel, C):
    """The exact L2-SVM dual as a minimum enclosing ball: min αᵀK̃α over the simplex, all points
    (the guarantee against it for the plain fit: test_cvm_kkt.py)."""
    yy = np.where(y == 1, 1.0, -1.0)
    Q = np.outer(yy, yy) * (kernel(X, X) + 1.0) + np.eye(len(X)) / C
    return Q, _slsqp_meb(Q), yy  # an independent solver (scipy), not the one under test


def test_probabilistic_and_exhaustive_search_reach_the_same_guarantee():
    X, y = _data(n=300, seed=1)
    full = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, candidates=None, random_state=0).fit(X, y)
    fast = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, candidates=59, random_state=0).fit(X, y)
    r1, r2 = full.results_[0], fast.results_[0]
    assert abs(r1.R2 - r2.R2) <= ((1 + EPS) ** 2 - 1) * max(r1.R2, r2.R2)
    assert np.mean(full.predict(X) == fast.predict(X)) > 0.97


def test_multiclass_one_vs_rest_and_class_names():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    est = CVMClassifier(C=C, gamma=0.5, random_state=0).fit(X, names)
    assert est.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    assert est.decision_function(X).shape == (150, 3)
    assert est.score(X, names) > 0.95


def test_mmda_features_are_orthonormal_and_the_first_is_the_svm_direction():
    X, y = _data(n=200, seed=2)
    k = get_kernel("rbf", gamma=GAMMA)
    mmda = MMDA(3, C=C, gamma=GAMMA, random_state=0).fit(X, y)
    Z, U = mmda.expansion_.support_vectors, mmda.expansion_.coef
    G = U.T @ k(Z, Z) @ U  # u_pᵀu_q through the kernel
    np.testing.assert_allclose(np.diag(G), 1.0, atol=1e-6)
    assert np.abs(G - np.diag(np.diag(G))).max() < 1e-6
    svm = CVMClassifier(C=C, gamma=GAMMA, random_state=0).fit(X, y)  # same seed: the same first run
    res = svm.results_[0]
    w_norm = np.sqrt(res.a @ k(res.core_rows, res.core_rows) @ res.a)
    np.testing.assert_allclose(mmda.transform(X)[:, 0], (svm.decision_function(X) - svm.intercept_[0]) / w_norm,
                               rtol=1e-8, atol=1e-10)


def test_mmda_multiclass_concatenates_features_per_problem():
    X, y = load_iris(return_X_y=True)
    mmda = MMDA(3, C=C, gamma=0.5, random_state=0).fit(X, y)
    assert mmda.transform(X).shape == (150, 9) and mmda.components_per_problem_ == [3, 3, 3]
    assert mmda.kernel_evaluations_per_feature_ == len(mmda.expansion_.support_vectors) / 9
    per = mmda.vectors_per_feature_
    assert per.shape == (9,) and np.all(per[1:3] >= per[0]) and np.all(per <= len(mmda.expansion_.support_vectors))


@pytest.mark.parametrize("params, match", [
    ({"C": 0}, "C must be 'auto' .* or a float > 0.*got 0"), ({"C": -1.0}, "or a float > 0.*got -1.0"),
    ({"C": "large"}, "C must be 'auto'.*got 'large'"),
    ({"eps": 0}, r"eps must be a float in \(0, 1\)"), ({"eps": 1.5}, r"eps must be a float in \(0, 1\)"),
    ({"kernel": "polynomial"}, "constant k\\(x, x\\)"), ({"candidates": 0}, "candidates must be"),
])
def test_bad_parameters_are_named(params, match):
    X, y = _data(n=60)
    with pytest.raises(ValueError, match=match):
        CVMClassifier(**params).fit(X, y)


@pytest.mark.parametrize("n_classes, expected", [(2, 1.0), (3, 2.0), (4, 3.0)])
def test_auto_C_is_the_classes_less_one_and_the_same_model_as_that_number(n_classes, expected):
    """C="auto" (CVMClassifier's default) is n_classes − 1: two classes keep the paper's C = 1,
    and the fit is bit for bit the fit with that number given; MMDA's default stays 1."""
    X, y = make_classification(240, n_features=5, n_informative=4, n_redundant=0, n_classes=n_classes,
                               n_clusters_per_class=1, random_state=3)
    auto = CVMClassifier(gamma=GAMMA, eps=EPS, random_state=0).fit(X, y)
    assert CVMClassifier().get_params()["C"] == "auto" and auto.C_ == expected
    given = CVMClassifier(C=expected, gamma=GAMMA, eps=EPS, random_state=0).fit(X, y)
    assert given.C_ == expected
    np.testing.assert_array_equal(auto.decision_function(X), given.decision_function(X))
    assert MMDA().get_params()["C"] == 1.0


def test_single_class_and_continuous_labels_are_refused():
    X, y = _data(n=60)
    with pytest.raises(ValueError, match="at least 2 classes"):
        CVMClassifier().fit(X, np.zeros(60))
    with pytest.raises(ValueError, match="Unknown label type"):
        CVMClassifier().fit(X, np.linspace(0, 1, 60))


def test_one_vs_rest_problems_as_tasks_equal_the_in_process_fit(process_client):
    X, y = load_iris(return_X_y=True)
    local = CVMClassifier(C=C, gamma=0.5, random_state=0).fit(X, y)
    tasks = CVMClassifier(C=C, gamma=0.5, random_state=0, client=process_client).fit(X, y)
    for a, b in zip(local.core_indices_, tasks.core_indices_, strict=True):
        assert a.tolist() == b.tolist()
    np.testing.assert_allclose(tasks.decision_function(X), local.decision_function(X), rtol=1e-9, atol=1e-12)


@parametrize_with_checks([CVMClassifier(C=10.0), MMDA(2, C=10.0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _dense_check(X, y, k, res, eps):
    """Every row within (1+eps)R of the centre (dense), and R² within (1+eps)² of the exact ball."""
    Q, a_star, _ = _dense_meb(X, y, k, C)
    kt = 1.0 + 1.0 + 1.0 / C
    alpha = np.zeros(len(X))
    alpha[res.core_index] = res.alpha
    dist2 = alpha @ Q @ alpha - 2 * Q @ alpha + kt
    assert dist2.max() <= (1 + eps) ** 2 * res.R2 * (1 + 1e-9)
    R2_star = kt - a_star @ Q @ a_star
    assert res.R2 <= R2_star * (1 + 1e-9) and R2_star <= (1 + eps) ** 2 * res.R2


def _run(X, y, k, eps, chunk_rows=100, candidates=59, **kw):
    store = InMemoryStore(X, y, chunk_rows=chunk_rows)
    with InProcessEngine(partition_specs(store)) as eng:
        eng.run(None, None, [cvm_effects.init(k), cvm_effects.targets(1)])
        return core_vector_machine(eng, kernel=k, kappa=1.0, C=C, eps=eps, n_rows=len(X), candidates=candidates,
                                   random_state=np.random.default_rng(0), **kw)


def test_history_is_the_callbacks_records_one_per_iteration():
    X, y = _data(n=200, seed=2)
    k = get_kernel("rbf", gamma=GAMMA)
    seen = []
    res = _run(X, y, k, 1e-2, callback=seen.append, points_per_pass=1)
    assert res.n_iter > 3 and res.history == seen  # the records the loop's PathRecorder kept are the ones handed out
    assert [r["iteration"] for r in seen] == list(range(res.n_iter))
    assert [r["n_core"] for r in seen] == list(range(2, res.n_iter + 2))  # one row joins per iteration
    assert all(r["R2"] <= res.R2 * (1 + 1e-9) for r in seen)  # the ball only grows as rows join


def test_listeners_get_each_problems_history_with_its_problem():
    """What ``--log-json`` writes per core-set iteration is the problem's ``CVMResult.history``."""
    from kmp_dask.estimators._progress import iteration_listener

    X, y = load_iris(return_X_y=True)
    got = []
    with iteration_listener(lambda desc, rec: got.append((desc, rec))):
        est = CVMClassifier(C=C, gamma=0.5, random_state=0).fit(X, y)
    inner = [rec for desc, rec in got if desc.endswith("core set")]
    want = [{**rec, "problem": k, "class": int(est.classes_[k])} for k, res in enumerate(est.results_)
            for rec in res.history]
    assert len(want) == sum(est.n_iter_) > 0 and inner == want


def test_pending_rows_after_a_full_pass_keep_the_guarantee_with_fewer_full_passes():
    X, y = _data(n=300, seed=4)
    k = get_kernel("rbf", gamma=GAMMA)
    eps = 1e-4
    with_refill, without = _run(X, y, k, eps, candidates=4), _run(X, y, k, eps, candidates=4, refill=0)
    for res in (with_refill, without):
        _dense_check(X, y, k, res, eps)
    assert with_refill.n_full_passes < without.n_full_passes


@pytest.mark.parametrize("budget_columns", [0, 7])
def test_kernel_column_cache_does_not_change_the_fit(monkeypatch, budget_columns):
    import kmp_dask.blockops._cvm as B

    X, y = _data(n=300, seed=5)
    k = get_kernel("rbf", gamma=GAMMA)
    ref = _run(X, y, k, 1e-4)
    monkeypatch.setattr(B, "KERNEL_CACHE_BYTES", 8 * 100 * budget_columns)  # 100-row partitions
    res = _run(X, y, k, 1e-4)
    _dense_check(X, y, k, res, 1e-4)
    assert res.core_index.tolist() == ref.core_index.tolist()
    np.testing.assert_allclose(res.alpha, ref.alpha, rtol=1e-9, atol=1e-12)
    assert res.kernel_evaluations > ref.kernel_evaluations  # the cache saved kernel evaluations


def test_a_new_stopping_rule_is_one_method_of_the_core_set_loop(monkeypatch):
    """A subclass of the loop overriding ``stop_rule`` alone stops at k core vectors; as the rule
    decides before asking for the distance passes, the run is the ``max_core=k`` run, bit for bit,
    pass for pass."""
    import kmp_dask.greedy._cvm as G
    from kmp_dask.greedy._result import StopReason

    X, y = _data(n=300, seed=5)
    k = get_kernel("rbf", gamma=GAMMA)
    free = _run(X, y, k, 1e-3, points_per_pass=1)
    assert free.stop_reason == "converged" and len(free.core_index) > 6

    class AtSixCoreVectors(G._CoreSetLoop):
        def stop_rule(self, furthest):
            return StopReason.MAX_CORE if len(self.core_index) >= 6 else super().stop_rule(furthest)

    monkeypatch.setattr(G, "_CoreSetLoop", AtSixCoreVectors)
    res = _run(X, y, k, 1e-3, points_per_pass=1)
    monkeypatch.undo()
    ref = _run(X, y, k, 1e-3, points_per_pass=1, max_core=6)
    assert res.stop_reason == ref.stop_reason == "max_core" and len(res.core_index) == 6
    np.testing.assert_array_equal(res.core_index, free.core_index[:6])
    np.testing.assert_array_equal(res.core_index, ref.core_index)
    np.testing.assert_array_equal(res.alpha, ref.alpha)
    assert (res.n_passes, res.n_full_passes, res.history) == (ref.n_passes, ref.n_full_passes, ref.history)
