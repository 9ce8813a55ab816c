"""Reduced-set compression's checkpoints beyond the contract every family meets
(tests/test_resume_contract.py: resumed = uninterrupted, a complete checkpoint, a fresh start, no
overwrite, refusals of another model, labels, pool or parameters, SIGKILL, a process cluster): a
compression interrupted after selected vector t (in the in-process pursuit, on the engine, in the
second of several independent pursuits, during the exchanges, in the chunking tree's refinement)
and resumed gives the identical compressed model and path; the dense state is saved without the
pool; the fit-then-compress estimators pass the checkpoint on."""

from __future__ import annotations

import numpy as np
import pytest
from _contracts import Interrupted, interrupt_after, interrupted_then_resumed, same_compressor
from sklearn.svm import SVC

import kmp_dask.greedy._hmp_setup as par_reduced
import kmp_dask.reduced._build as rb
import kmp_dask.reduced._routes as rr
from kmp_dask import ReducedSetCompressor
from kmp_dask.blockops._safe_pickle import restricted_loads
from kmp_dask.greedy import _hmp
from kmp_dask.greedy._checkpoint import STATE_FILE, checkpoint_info
from kmp_dask.store import create_store

RNG = np.random.default_rng(0)
X = RNG.normal(size=(500, 4))
Y = (X[:, 0] * X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0] + 0.3 * X[:, 2], [-0.5, 0.5])
SVC2 = SVC(C=10.0, gamma=0.5).fit(X, Y)
SVC3 = SVC(C=10.0, gamma=0.5).fit(X, Y3)


def _same(a, b):
    same_compressor(a, b)
    # the pursuits' records too (a fit resumed from a complete checkpoint had lost them)
    assert getattr(a, "history_", None) == getattr(b, "history_", None)
    picked = [[r.index.tolist() for r in getattr(est, "results_", [])] for est in (a, b)]
    assert picked[0] == picked[1]


def _interrupted_then_resumed(monkeypatch, make, model, args, ckpt, calls, every, saved_at=None, starts=()):
    """Interrupted at the ``calls``-th record (after that vector's checkpoint), resumed: no new dense
    state, no init pass but for the pursuits begun after the interrupted one (``starts``)."""
    begin = [(_hmp._DensePursuit, "__init__"), (par_reduced, "pool_rkhs_norms")]
    names = {"dense": "__init__", "init": "pool_rkhs_norms"}
    return interrupted_then_resumed(monkeypatch, make, (model, *args), ckpt, calls, every, begin=begin, after=True,
                                    saved=saved_at, stage="pursuit", begun_expected=[names[s] for s in starts])


CASES = {
    "dense": {"n_vectors": 25},
    "dense-decrease-sampled": {"n_vectors": 25, "candidates": 40, "criterion": "decrease"},
    "engine": {"n_vectors": 25, "client": "sync", "dense": False},
    "engine-decrease-sampled": {"n_vectors": 25, "client": "sync", "dense": False, "candidates": 50,
                                "criterion": "decrease"},
    "engine-basic": {"n_vectors": 12, "client": "sync", "dense": False, "backfit": False},
    "dense-exchange-guard": {"n_vectors": 15, "exchange": 3},
}


@pytest.mark.parametrize("case", list(CASES))
def test_resumed_compression_is_identical_in_process(tmp_path, monkeypatch, case):
    make = lambda: ReducedSetCompressor(random_state=5, **CASES[case])  # noqa: E731
    ref = make().fit(SVC2, X, Y)
    for calls, every in [(1, 1), (10, 5)]:
        ckpt = tmp_path / f"ck{calls}"
        resumed = _interrupted_then_resumed(monkeypatch, make, SVC2, (X, Y), ckpt, calls, every)
        _same(resumed, ref)
    with monkeypatch.context() as m:  # a complete checkpoint: the model without any pursuit or exchange
        for module, name in ((rr, "dense_hyperplane_pursuit"), (rr, "compress_on_pool"), (rb, "exchange_vectors"),
                             (rb, "engine_exchange")):
            m.setattr(module, name, None)
        _same(make().fit(SVC2, X, Y, checkpoint=ckpt, resume=True), ref)


@pytest.mark.parametrize("dense", [True, False])
def test_independent_pursuits_resume_in_the_second_one(tmp_path, monkeypatch, dense):
    """coupled=False on a 3-class one-vs-one SVC: three pursuits share one RNG; interrupted in
    the second, the first's result comes from the checkpoint (saves count each pursuit's own
    vectors: the 14th record is the second pursuit's 4th vector, saved after its 3rd)."""
    kw = {} if dense else {"client": "sync", "dense": False}
    make = lambda: ReducedSetCompressor(n_vectors=10, coupled=False, candidates=30, random_state=1, **kw)  # noqa: E731
    ref = make().fit(SVC3, X, Y3)
    resumed = _interrupted_then_resumed(monkeypatch, make, SVC3, (X, Y3), tmp_path / "ck", 14, 3, saved_at=12,
                                       starts=["dense"] if dense else [])
    _same(resumed, ref)


def test_store_pool_with_exchanges_resumes_mid_pursuit_and_mid_exchange(tmp_path, monkeypatch):
    store = create_store(tmp_path / "pool.zarr", X, Y, chunk_rows=125)
    make = lambda: ReducedSetCompressor(n_vectors=12, exchange=2, random_state=1, client="sync")  # noqa: E731
    ref = make().fit(SVC2, store.url)
    _same(_interrupted_then_resumed(monkeypatch, make, SVC2, (store.url,), tmp_path / "ck1", 7, 3), ref)

    ckpt = tmp_path / "ck2"  # killed during the exchanges: the ended path is kept, the engine rebuilt
    with monkeypatch.context() as m:
        m.setattr(rb, "engine_exchange", lambda *a, **k: (_ for _ in ()).throw(Interrupted()))
        with pytest.raises(Interrupted):
            make().fit(SVC2, store.url, checkpoint=ckpt)
    assert checkpoint_info(ckpt)["stage"] == "path"
    with monkeypatch.context() as m:
        m.setattr(rr, "compress_on_pool", None)  # the path is not selected again
        _same(make().fit(SVC2, store.url, checkpoint=ckpt, resume=True), ref)
    with monkeypatch.context() as m:  # complete: the exchanged level is in the checkpoint, no engine
        m.setattr(rb, "engine_exchange", None)
        m.setattr("kmp_dask.parallel._session.make_engine", None)  # every engine comes from a session helper
        _same(make().fit(SVC2, store.url, checkpoint=ckpt, resume=True), ref)


def test_chunking_tree_is_not_run_again_when_its_refinement_resumes(tmp_path, monkeypatch):
    make = lambda: ReducedSetCompressor(n_vectors=10, chunk_vectors=60, random_state=1)  # noqa: E731
    ref = make().fit(SVC2, X, Y)
    ckpt = tmp_path / "ck"
    with interrupt_after(6), pytest.raises(Interrupted):
        make().fit(SVC2, X, Y, checkpoint=ckpt, checkpoint_every=2)
    with monkeypatch.context() as m:
        m.setattr(rr, "chunked_compression", None)
        _same(make().fit(SVC2, X, Y, checkpoint=ckpt, resume=True), ref)


def test_dense_state_is_saved_without_the_pool_and_unused_capacity(tmp_path, monkeypatch):
    ckpt = tmp_path / "ck"
    with interrupt_after(4), pytest.raises(Interrupted):
        ReducedSetCompressor(n_vectors=200).fit(SVC2, X, Y, checkpoint=ckpt, checkpoint_every=4)
    state = restricted_loads((ckpt / STATE_FILE).read_bytes().split(b"\n", 2)[2])["loop"]  # allow-listed classes
    assert state.Q.shape == (len(X), 200) and state.Z is None and state.F is None
    assert (ckpt / STATE_FILE).stat().st_size < len(X) * 8 * 12  # R, δ, Q's 4 columns; not P × 200


def test_fit_then_compress_estimators_pass_the_checkpoint_on(tmp_path, monkeypatch):
    """ReducedSetClassifier refits its SVC (deterministic) and resumes the compression."""
    from kmp_dask.reduced import ReducedSetClassifier

    make = lambda: ReducedSetClassifier(SVC(C=10.0, gamma=0.5), n_vectors=20, random_state=0)  # noqa: E731
    ref = make().fit(X, Y)
    ckpt = tmp_path / "ck"
    with interrupt_after(8), pytest.raises(Interrupted):
        make().fit(X, Y, checkpoint=ckpt, checkpoint_every=4)
    assert checkpoint_info(ckpt)["iteration"] == 7
    _same(make().fit(X, Y, checkpoint=ckpt, resume=True).compressor_, ref.compressor_)
    with pytest.raises(ValueError, match="parameter model: checkpoint"):
        ReducedSetClassifier(SVC(C=1.0, gamma=0.5), n_vectors=20, random_state=0).fit(X, Y, checkpoint=ckpt,
                                                                                      resume=True)
