"""ReducedSetCompressor: the issue's oracles on real models, level choice, thresholds, errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification, make_regression
from sklearn.exceptions import NotFittedError
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVC

from kmp_dask import KernelExpansion, KMPRegressor, get_kernel
from kmp_dask.reduced import ReducedSetCompressor, best_threshold, compress


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, random_state=0)
    svc = SVC(C=10.0, gamma=0.3).fit(X[:200], y[:200])
    return svc, X[:200], y[:200], X[200:], y[200:]


def test_all_support_vectors_allowed_gives_back_the_svc(binary):
    svc, X, y, Xte, _ = binary
    n_sv = len(svc.support_)
    comp = ReducedSetCompressor(n_vectors=n_sv, optimize_threshold=False).fit(svc)
    assert comp.path_[-1]["rkhs_error_rel"] < 1e-8
    np.testing.assert_allclose(comp.decision_function(Xte), svc.decision_function(Xte), atol=1e-4)
    np.testing.assert_array_equal(comp.predict(Xte), svc.predict(Xte))


def test_compressing_a_kmp_expansion_gives_back_its_decision_function():
    X, y = make_regression(n_samples=250, n_features=4, noise=0.1, random_state=1)
    kmp = KMPRegressor(n_basis=30, gamma=0.2, random_state=0).fit(X, y)
    exp = kmp.expansion_
    comp = compress(exp, n_vectors=exp.n_vectors)
    np.testing.assert_allclose(comp.decision_function(X), kmp.predict(X), rtol=1e-7, atol=1e-7 * np.abs(y).max())
    assert comp.n_vectors_ == exp.n_vectors


def test_path_is_monotone_and_one_run_gives_every_level(binary):
    svc, X, y, Xte, yte = binary
    comp = ReducedSetCompressor(n_vectors=40).fit(svc, X, y, X_val=Xte, y_val=yte)
    err = [p["rkhs_error"] for p in comp.path_]
    assert np.all(np.diff(err) <= 1e-12 * err[0])
    assert [p["n_vectors"] for p in comp.path_] == list(range(1, 41))
    labelled = [p for p in comp.path_ if "train_error" in p and "val_error" in p]
    assert len(labelled) == 40  # all levels up to 50, then ~50 spread geometrically
    small = comp.expansion_at(10)
    assert small.n_vectors == 10
    np.testing.assert_allclose(small.coef, comp.results_[0].prefix_coef(10)[1])


def test_threshold_reoptimisation_never_raises_the_training_error(binary):
    svc, X, y, _, _ = binary
    kept = ReducedSetCompressor(n_vectors=5, optimize_threshold=False).fit(svc, X, y)
    tuned = ReducedSetCompressor(n_vectors=5).fit(svc, X, y)
    assert tuned.path_[-1]["train_error"] <= kept.path_[-1]["train_error"]
    assert np.mean(tuned.predict(X) != y) == pytest.approx(tuned.path_[-1]["train_error"])


def test_best_threshold_is_exact_on_a_brute_force_grid():
    rng = np.random.default_rng(0)
    F, lab = rng.normal(size=200), np.where(rng.random(200) < 0.6, 1.0, -1.0)
    b = best_threshold(F, lab)
    grid = np.concatenate([np.sort(F) - 1e-9, np.sort(F) + 1e-9, [0.0]])
    best = min(np.sum(np.where(F - t > 0, 1.0, -1.0) != lab) for t in grid)
    assert np.sum(np.where(F + b > 0, 1.0, -1.0) != lab) == best
    assert best_threshold(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([-1, -1, 1, 1])) == 0.0


def test_level_choice_by_rkhs_tolerance_and_by_validation(binary):
    svc, X, y, Xte, yte = binary
    tol = ReducedSetCompressor(n_vectors=60, select="rkhs_tol", rkhs_tol=0.05).fit(svc)
    first = next(p for p in tol.path_ if p["rkhs_error_rel"] <= 0.05)
    assert tol.n_vectors_ == first["n_vectors"]
    val = ReducedSetCompressor(n_vectors=30, select="validation").fit(svc, X, y, X_val=Xte, y_val=yte)
    best = min(val.path_, key=lambda p: (p["val_error"], p["n_vectors"]))
    assert val.n_vectors_ == best["n_vectors"]


def test_multiclass_coupled_shares_vectors_independent_takes_the_union():
    X, y = load_iris(return_X_y=True)
    svc = SVC(C=10.0, gamma=0.5).fit(X, y)
    coupled = ReducedSetCompressor(n_vectors=12).fit(svc, X, y)
    indep = ReducedSetCompressor(n_vectors=12, coupled=False).fit(svc, X, y)
    assert coupled.expansion_.n_outputs == 3 and coupled.n_vectors_ == 12
    assert indep.n_vectors_ <= 12  # n_vectors caps the union: what a prediction evaluates
    per_pair = [np.count_nonzero(indep.expansion_.coef[:, j]) for j in range(3)]
    assert max(per_pair) < indep.n_vectors_ <= sum(per_pair)
    for comp in (coupled, indep):
        assert comp.score(X, y) >= svc.score(X, y) - 0.1


@pytest.mark.parametrize("method", ["l0", "l1"])
def test_dense_baselines_through_the_estimator(binary, method):
    svc, X, y, Xte, yte = binary
    comp = ReducedSetCompressor(n_vectors=30, method=method).fit(svc, X, y, X_val=Xte, y_val=yte)
    assert 1 <= comp.n_vectors_ <= 30
    assert comp.score(Xte, yte) > 0.6


@pytest.mark.parametrize("refine", [True, False])
def test_chunking_tree_in_process(refine):
    X, y = make_regression(n_samples=400, n_features=3, noise=0.1, random_state=2)
    krr = KernelRidge(alpha=1e-2, kernel="rbf", gamma=0.3).fit(X, y)
    single = ReducedSetCompressor(n_vectors=40).fit(krr)
    chunked = ReducedSetCompressor(n_vectors=40, chunk_vectors=100, refine=refine).fit(krr)
    assert chunked.n_vectors_ <= 40
    assert chunked.rkhs_error_.sum() <= 3 * single.rkhs_error_.sum() + 1e-9 * single.wsq_.sum()


def test_kernel_ridge_on_a_store_pool_through_a_cluster(tmp_path, process_client):
    from kmp_dask.store import create_store

    X, y = make_regression(n_samples=3000, n_features=4, noise=0.1, random_state=3)
    krr = KernelRidge(alpha=1e-1, kernel="rbf", gamma=0.2).fit(X, y)
    store = create_store(str(tmp_path / "pool.zarr"), X, y, chunk_rows=500)
    on_cluster = ReducedSetCompressor(n_vectors=30, client=process_client).fit(krr, store)
    local = ReducedSetCompressor(n_vectors=30).fit(krr)  # numpy pool: the same rows, in process
    np.testing.assert_array_equal(on_cluster.support_index_, local.support_index_)
    np.testing.assert_allclose(on_cluster.wsq_, local.wsq_, rtol=1e-10)  # ‖w‖² from the pass (own centres)
    np.testing.assert_allclose(on_cluster.decision_function(X[:50]), local.decision_function(X[:50]), rtol=1e-8)


# -- bad input -----------------------------------------------------------------------------------
def test_unfitted_model_is_named():
    with pytest.raises(NotFittedError, match="SVC"):
        ReducedSetCompressor().fit(SVC())


def test_precomputed_and_callable_kernels_are_refused():
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match="precomputed"):
        ReducedSetCompressor().fit(SVC(kernel="precomputed").fit(X @ X.T, y))
    with pytest.raises(ValueError, match="callable|kernel"):
        ReducedSetCompressor().fit(SVC(kernel=lambda a, b: a @ b.T).fit(X, y))


def test_more_vectors_than_the_pool_and_wrong_width(binary):
    svc, X, _, _, _ = binary
    with pytest.raises(ValueError, match="n_vectors=.*pool has only"):
        ReducedSetCompressor(n_vectors=len(svc.support_) + 1).fit(svc)
    with pytest.raises(ValueError, match="X_pool has 3 features .* 5"):
        ReducedSetCompressor(n_vectors=3).fit(svc, X[:, :3])


@pytest.mark.parametrize("params, match", [
    ({"n_vectors": 0}, "n_vectors must be"), ({"n_vectors": 1.5}, "n_vectors must be"),
    ({"method": "l2"}, "method must be"), ({"select": "best"}, "select must be"),
    ({"candidates": 0}, "candidates must be"), ({"rkhs_tol": -1}, "rkhs_tol must be"),
    ({"chunk_vectors": 10, "method": "l1"}, "chunk_vectors works with method='hmp'"),
    ({"chunk_vectors": 20, "n_vectors": 30}, "chunk_vectors=20 must exceed the compressed size"),
])
def test_bad_parameters_are_named(binary, params, match):
    with pytest.raises(ValueError, match=match):
        ReducedSetCompressor(**params).fit(binary[0])


def test_mixed_kernel_expansion_is_refused():
    rng = np.random.default_rng(0)
    exp = KernelExpansion(rng.normal(size=(4, 2)), rng.normal(size=4), 0.0,
                          (get_kernel("rbf", gamma=1.0), get_kernel("rbf", gamma=2.0)), np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="mixed dictionary"):
        ReducedSetCompressor(n_vectors=2).fit(exp)


def test_validation_select_needs_validation_data(binary):
    with pytest.raises(ValueError, match="X_val and y_val"):
        ReducedSetCompressor(select="validation").fit(binary[0])


def test_progress_lines_with_verbose(binary, capsys):
    svc, X, y, _, _ = binary
    ReducedSetCompressor(n_vectors=6, verbose=3).fit(svc, X, y)
    err = capsys.readouterr().err
    assert "[reduced set] vector 3" in err and "[reduced set] vector 6" in err and "rkhs_error" in err


def test_chunking_tree_pieces_use_the_criterion():
    from kmp_dask.greedy._hmp_setup import chunked_compression, compress_piece
    from kmp_dask.parallel import Tasks, local_engine

    X, y = make_regression(n_samples=300, n_features=3, noise=0.1, random_state=4)
    krr = KernelRidge(alpha=1e-2, kernel="rbf", gamma=0.3).fit(X, y)
    exp = ReducedSetCompressor(n_vectors=1).fit(krr).target_.expansion
    for criterion in ("eq13", "decrease"):
        # one piece: the tree is that piece's pursuit with the criterion asked for
        vecs, coef = chunked_compression(Tasks(None), exp, piece_vectors=400, keep=25, criterion=criterion)
        ref = ReducedSetCompressor(n_vectors=25, criterion=criterion).fit(krr)
        np.testing.assert_array_equal(vecs, ref.expansion_.support_vectors)
        np.testing.assert_allclose(coef, ref.expansion_.coef, rtol=1e-7, atol=1e-9)
    tree = {c: ReducedSetCompressor(n_vectors=25, chunk_vectors=100, refine=False, criterion=c).fit(krr)
            for c in ("eq13", "decrease")}
    assert not np.array_equal(tree["eq13"].expansion_.support_vectors, tree["decrease"].expansion_.support_vectors)
    piece = compress_piece(exp.support_vectors[:100], exp.coef[:100], exp.kernels[0], 25, "decrease", local_engine)
    assert len(piece[0]) == 25
