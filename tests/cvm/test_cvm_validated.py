"""Validated growth of the core-set loop's sample (``stopping="auto"``, the CVMClassifier default).

The loop runs on nested random samples doubling up to the sample rule's size, warm-started, and after
each counts the model's errors on the rows the next sample adds; it stops growing when they exceed
the best sample's by more than :data:`~kmp_dask.greedy._cvm.VALIDATION_Z` standard errors, and the
best sample's model is returned. Checked here on small data (the smallest sample lowered from
``STAGE_ROWS`` = 5,000 to a few hundred rows): the returned model is an exact L2-SVM of its sample
within the paper's (1+ε) guarantee (scipy's SLSQP on the MEB dual, as for the sample rule), the
pass's error counts are the model's own on the validation rows, below two samples' size it is the
paper's loop bit for bit, and a fit killed inside its loop and resumed gives the identical model.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from test_cvm_checkpoint import Interrupted, _interrupt_in_loop, _same_cvm
from test_cvm_stopping import _noisy, assert_exact_l2_svm_of

import kmp_dask.estimators._cvm as est_cvm
import kmp_dask.greedy._cvm as g_cvm
import kmp_dask.greedy._cvm_problems as par_cvm
from kmp_dask import CVMClassifier
from kmp_dask.greedy._cvm import stage_sizes, staged_order

GAMMA, C, EPS = 0.3, 10.0, 1e-3


def test_stage_sizes_double_up_to_the_sample_and_the_order_is_a_seeded_draw():
    assert stage_sizes(10**6, 100_000, 5000) == [6250, 12500, 25000, 50000, 100000]
    assert stage_sizes(50_000, 100_000, 5000) == [6250, 12500, 25000, 50000]
    assert stage_sizes(9_999, 100_000, 5000) == [9_999] and stage_sizes(10_000, None, 5000) == [5000, 10_000]
    o = staged_order(1000, 300, 4)
    assert len(o) == 600 == len(np.unique(o)) and o.min() >= 0 and o.max() < 1000
    assert np.array_equal(o, staged_order(1000, 300, 4)) and not np.array_equal(o, staged_order(1000, 300, 5))
    assert np.array_equal(np.sort(staged_order(500, 300, 4)), np.arange(500))  # fewer rows: all of them


def _order(kw, n_rows):
    """The validated growth's rows in order of draw for the loop called with ``kw`` (its generator's
    first draw is their seed, :meth:`~kmp_dask.greedy._cvm._CoreSetLoop.start`)."""
    rng = np.random.default_rng()
    rng.bit_generator.state = kw["random_state"].bit_generator.state
    sizes = stage_sizes(n_rows, kw["config"].certify_rows, kw["config"].validate_from)
    return staged_order(n_rows, sizes[-1], int(rng.integers(0, 2**63 - 1)))


def _spy(monkeypatch, n_rows, seen):
    real = par_cvm.core_vector_machine

    def spy(engine, **kw):
        seen["order"] = _order(kw, n_rows)  # before the loop advances the generator
        return real(engine, **kw)

    monkeypatch.setattr(par_cvm, "core_vector_machine", spy)


@pytest.mark.parametrize("n, first, seed, forced", [(2000, 250, 4, False), (1200, 150, 1, True)])
def test_validated_growth_against_the_exact_l2_svm_of_its_sample(monkeypatch, n, first, seed, forced):
    """Samples of ``first``, 2·``first``, … rows. Unforced, this data's errors rise at the third
    sample and the second one's model is restored; ``forced``: every later sample counts as worse
    (``VALIDATION_Z`` → −∞), so the growth stops at the second sample and the first one's model is
    restored."""
    X, y = _noisy(n, seed=seed)
    monkeypatch.setattr(est_cvm, "STAGE_ROWS", first)
    if forced:
        monkeypatch.setattr(g_cvm, "VALIDATION_Z", -1e9)
    seen = {}
    _spy(monkeypatch, len(X), seen)
    est = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5 if seed == 4 else 0).fit(X, y)
    res = est.results_[0]
    assert res.stop_reason == "converged" and est.stopping == "auto"
    assert [v[0] for v in res.validation] == [first, 2 * first] + ([] if forced else [4 * first])
    s = res.sample_rows
    assert s == (first if forced else 2 * first)
    order = seen["order"]
    F = est.decision_function(X)
    for top, wrong, m in res.validation:  # the pass's counts: the model's errors on the next rows
        held = order[top: top + m]
        assert m == top and len(held) == m
        if top == s:  # the returned model is the one validated there
            assert wrong == int(np.sum(np.where(y[held] == 1, 1.0, -1.0) * F[held] < 0))
    if not forced:  # it was restored because the next sample's errors rose beyond the tolerance
        assert g_cvm._worse(res.validation[-1], res.validation[-2])
    sample = np.sort(order[:s])
    assert np.all(np.isin(res.core_index, sample))  # the core set came from the chosen sample
    assert_exact_l2_svm_of(est, res, X, y, sample)  # the sample within (1+ε)R, not every row


def test_auto_is_the_paper_loop_bit_for_bit_below_two_samples():
    X, y = _noisy(400, seed=2)
    paper = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3, stopping="paper").fit(X, y)
    auto = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=3).fit(X, y)
    _same_cvm(auto, paper, X)
    assert auto.results_[0].validation == () and auto.results_[0].sample_rows is None


@pytest.mark.parametrize("forced", [False, True])
def test_validated_growth_killed_and_resumed_is_identical(tmp_path, monkeypatch, forced):
    X, y = _noisy(2000, seed=4)
    monkeypatch.setattr(est_cvm, "STAGE_ROWS", 250)  # samples of 250, 500, 1,000, 2,000 rows
    if forced:
        monkeypatch.setattr(g_cvm, "VALIDATION_Z", -1e9)
    make = lambda: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5)  # noqa: E731
    ref = make().fit(X, y)
    r = ref.results_[0]
    assert len(r.validation) >= 2 and r.n_iter > 12
    for at in (4, r.n_iter - 2):  # early, and late (after the samples grew)
        ckpt = tmp_path / f"ck{at}"
        with monkeypatch.context() as m:
            _interrupt_in_loop(m, 0, at)
            with pytest.raises(Interrupted):
                make().fit(X, y, checkpoint=ckpt, checkpoint_every=2)
        again = make().fit(X, y, checkpoint=ckpt, checkpoint_every=2, resume=True)
        _same_cvm(again, ref, X)
        assert again.results_[0].validation == r.validation and again.results_[0].sample_rows == r.sample_rows


@pytest.mark.slow
def test_validated_growth_on_a_process_cluster_is_the_in_process_model(tmp_path, monkeypatch, process_client):
    """The error counts are summed over the workers' partitions (a binary problem's passes on
    actors; one-vs-rest problems as worker tasks, whose loops get the config with its
    ``validate_from``): the same model as in process, bit for bit."""
    from kmp_dask.store import create_store

    monkeypatch.setattr(est_cvm, "STAGE_ROWS", 250)
    for classes, seed in ((2, 4), (3, 7)):
        X, y = make_classification(2000, n_features=5, n_informative=4, n_redundant=0, n_classes=classes,
                                   n_clusters_per_class=1, flip_y=0.05, random_state=seed)
        store = create_store(tmp_path / f"d{classes}.zarr", X, y, chunk_rows=250)
        local = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5).fit(store.url)
        remote = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5, client=process_client).fit(store.url)
        assert all(len(r.validation) >= 1 for r in local.results_)
        _same_cvm(remote, local, X)
        assert [r.validation for r in remote.results_] == [r.validation for r in local.results_]
