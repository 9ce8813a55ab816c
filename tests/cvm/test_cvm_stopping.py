"""The core-set loop's stopping rules: ``stopping="paper"`` (every row certified within (1+ε)R, Tsang
et al.) and ``stopping="sample"`` / an int (the full passes certify a fixed random sample of rows).

The sample rule is checked against an exact L2-SVM computed without the solver under test (scipy's
SLSQP on the MEB dual of the certified rows and the core set, certified by its Frank–Wolfe gap):
the fitted ball is within the paper's (1+ε) guarantee of that exact ball, every certified row lies
within (1+ε)R, and the decision function is the exact L2-SVM's within the tolerance the guarantee
allows. Below the sample's size the sample rule is the paper's loop, bit for bit; a fit with the
sample rule killed inside its loop and resumed gives the identical model.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from test_cvm_checkpoint import Interrupted, _interrupt_in_loop, _same_cvm, _same_mmda
from test_cvm_kkt import _fw_gap, _meb_matrix, _slsqp_meb

import kmp_dask.greedy._cvm_problems as par_cvm
from kmp_dask import MMDA, CVMClassifier
from kmp_dask.greedy._cvm import certified_rows, sample_size
from kmp_dask.kernels import get_kernel

GAMMA, C, EPS = 0.3, 10.0, 1e-3


def _noisy(n, seed=0):
    return make_classification(n, n_features=5, n_informative=4, n_redundant=0, flip_y=0.05, random_state=seed)


def test_certified_rows_are_a_seeded_sample_or_every_row():
    assert certified_rows(100, None, 1) is None and certified_rows(100, 100, 1) is None
    a = certified_rows(1000, 200, 7)
    assert len(a) == 200 == len(np.unique(a)) and np.all(np.diff(a) > 0) and 0 <= a[0] and a[-1] < 1000
    assert np.array_equal(a, certified_rows(1000, 200, 7)) and not np.array_equal(a, certified_rows(1000, 200, 8))


def _certified(kw, n_rows):
    """The rows the loop called with ``kw`` certifies: its generator's first draw is the sample's
    seed (:meth:`~kmp_dask.greedy._cvm._CoreSetLoop.start`)."""
    rng = np.random.default_rng()
    rng.bit_generator.state = kw["random_state"].bit_generator.state
    return certified_rows(n_rows, kw["config"].certify_rows, int(rng.integers(0, 2**63 - 1)))


def assert_exact_l2_svm_of(est, res, X, y, rows):
    """The fitted CVM is the exact L2-SVM of ``rows`` (by scipy's SLSQP on the MEB dual) within the
    paper's (1+ε) guarantee: every one of ``rows`` within (1+ε)R and some row outside them not, R²
    within (1+ε)² of the exact ball's, and the decision function within the tolerance that allows."""
    C, EPS = float(est.C), float(est.eps)  # an explicit C, eps and gamma: the fit's own
    k = get_kernel("rbf", gamma=est.gamma)
    Qall, yy = _meb_matrix(X, y, k, C)
    kt = 1.0 + 1.0 + 1.0 / C
    alpha = np.zeros(len(X))
    alpha[res.core_index] = res.alpha
    dist2 = alpha @ Qall @ alpha - 2 * Qall @ alpha + kt
    limit = (1 + EPS) ** 2 * res.R2 * (1 + 1e-9)
    assert dist2[rows].max() <= limit             # every row the fit answers for within (1+ε)R
    assert dist2.max() > limit                    # rows outside them are not certified: some lie out
    Q = Qall[np.ix_(rows, rows)]                  # the exact L2-SVM of those rows, by scipy
    ref = _slsqp_meb(Q)
    f_hi = ref @ Q @ ref
    f_lo = f_hi - _fw_gap(Q, ref)
    assert 0.0 <= f_hi - f_lo <= 1e-7 * kt
    R2_hi = kt - f_lo
    assert res.R2 <= R2_hi * (1 + 1e-9) and R2_hi <= (1 + EPS) ** 2 * res.R2  # the paper's (1+ε) guarantee
    # the decision function against the exact one: both centres lie in the exact ball's feasible set,
    # ‖c − c*‖² ≤ (1+ε)²R² − R*² (c is within (1+ε)R of every point, c* the MEB's centre), and
    # |f(x) − f*(x)| = |⟨c − c*, φ̃(x)⟩| ≤ ‖c − c*‖ · √κ̃
    F = est.decision_function(X)
    F_ref = k(X, X[rows]) @ (ref * yy[rows]) + np.sum(ref * yy[rows])
    bound = np.sqrt(max((1 + EPS) ** 2 * res.R2 - (kt - f_hi), 0.0) * kt)
    assert np.abs(F - F_ref).max() <= bound * (1 + 1e-6), (np.abs(F - F_ref).max(), bound)


def test_sample_rule_against_the_exact_l2_svm_of_the_certified_rows(monkeypatch):
    X, y = _noisy(1200)
    seen = {}
    real = par_cvm.core_vector_machine

    def spy(engine, **kw):
        seen["cert"] = _certified(kw, len(X))  # before the loop advances the generator
        return real(engine, **kw)

    monkeypatch.setattr(par_cvm, "core_vector_machine", spy)
    est = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=0, stopping=300).fit(X, y)
    res = est.results_[0]
    assert res.stop_reason == "converged" and len(seen["cert"]) == 300
    T = np.union1d(res.core_index, seen["cert"])  # the rows the fit answers for
    assert_exact_l2_svm_of(est, res, X, y, T)


def test_sample_rule_is_the_paper_loop_bit_for_bit_below_the_sample_size():
    X, y = _noisy(400, seed=2)
    paper = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3, stopping="paper").fit(X, y)
    for stopping in ("sample", 400, 5000):
        _same_cvm(CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3, stopping=stopping).fit(X, y), paper, X)
    assert CVMClassifier().stopping == "auto" and MMDA().stopping == "sample"
    assert sample_size(1e-4) == 100_000 and sample_size(1e-3) == 10_000 and sample_size(3e-5) == 333_334
    # and a sample smaller than the data changes the loop (the rule is in effect)
    X, y = _noisy(2500, seed=2)
    a = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3, stopping="paper").fit(X, y)
    b = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3, stopping=1000).fit(X, y)
    assert a.results_[0].core_index.tolist() != b.results_[0].core_index.tolist()


@pytest.mark.parametrize("bad", ["all", 99, 0, True, 1.5e5, None])
def test_bad_stopping_is_refused_before_any_work(bad):
    X, y = _noisy(100)
    with pytest.raises(ValueError, match=r"stopping must be .*got"):
        CVMClassifier(stopping=bad).fit(X, y)


def test_sample_rule_killed_and_resumed_is_identical(tmp_path, monkeypatch):
    X, y = _noisy(2500, seed=4)
    make = lambda: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5, stopping=1000)  # noqa: E731
    ref = make().fit(X, y)
    assert ref.n_iter_[0] > 9 and ref.n_full_passes_[0] >= 1
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_in_loop(m, 0, 9)
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=ckpt, checkpoint_every=2)
    _same_cvm(make().fit(X, y, checkpoint=ckpt, checkpoint_every=2, resume=True), ref, X)


def test_mmda_with_the_sample_rule_killed_and_resumed_is_identical(tmp_path, monkeypatch):
    X, y = _noisy(2000, seed=6)
    make = lambda: MMDA(n_components=2, C=C, eps=EPS, gamma=GAMMA, random_state=1, stopping=1000)  # noqa: E731
    ref = make().fit(X, y)
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_in_loop(m, 1, 3)  # inside the second feature
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=ckpt, checkpoint_every=1)
    _same_mmda(make().fit(X, y, checkpoint=ckpt, checkpoint_every=1, resume=True), ref, X)


@pytest.mark.slow
def test_on_label_noise_the_sample_rule_keeps_the_accuracy_the_paper_rule_loses():
    """The defect the rule removes, at 1/25 of the benchmark's size (eps 1e-3 instead of 1e-4):
    1 % of labels random, 4·10⁴ training rows, a sample of 5·10³ (the paper's loop is best near
    there); the paper's rule then loses several points on the same held-out rows
    (benchmarks/notes/cvm_measurements.md, "Stopping at large N")."""
    X, y = make_classification(60_000, n_features=54, n_informative=20, flip_y=0.01, random_state=1)
    X = ((X - X[:40_000].mean(0)) / X[:40_000].std(0)).astype(np.float32)
    tr, te = slice(0, 40_000), slice(40_000, None)
    acc = {s: CVMClassifier(eps=1e-3, random_state=0, stopping=s).fit(X[tr], y[tr]).score(X[te], y[te])
           for s in ("paper", 5000)}
    assert acc[5000] >= acc["paper"] + 0.02, acc
