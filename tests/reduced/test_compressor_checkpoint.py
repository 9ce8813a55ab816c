"""Checkpoint / resume of reduced-set compression: a compression interrupted after
selected vector t (in the in-process pursuit, on the engine, in the second of several
independent pursuits, during the exchanges, in the chunking tree's refinement) and resumed from
its checkpoint gives the identical compressed model and path (bit for bit) as an uninterrupted
fit; also on a process LocalCluster and after a SIGKILL of the fitting process. A checkpoint of
another model, pool, labels or parameters is refused; an existing one is never overwritten."""

from __future__ import annotations

import numpy as np
import pytest
from _kill_at_line import run_and_kill_at
from sklearn.svm import SVC

import kmp_dask.greedy._hmp_setup as par_reduced
import kmp_dask.reduced._build as rb
import kmp_dask.reduced._routes as rr
from kmp_dask import ReducedSetCompressor
from kmp_dask.blockops._safe_pickle import restricted_loads
from kmp_dask.greedy import _hmp
from kmp_dask.greedy._checkpoint import STATE_FILE, checkpoint_info
from kmp_dask.store import create_store


class Interrupted(Exception):
    """Raised from the progress callback: the fit dies mid-pursuit, as a killed one would."""


RNG = np.random.default_rng(0)
X = RNG.normal(size=(500, 4))
Y = (X[:, 0] * X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0] + 0.3 * X[:, 2], [-0.5, 0.5])
SVC2 = SVC(C=10.0, gamma=0.5).fit(X, Y)
SVC3 = SVC(C=10.0, gamma=0.5).fit(X, Y3)


def _interrupt_after(monkeypatch, calls):
    """The progress callback raises at its ``calls``-th record (after that vector's checkpoint)."""
    def progress(verbose, total, **kw):
        seen = []

        def callback(record):
            seen.append(record)
            if len(seen) == calls:
                raise Interrupted(calls)
        return callback, None

    monkeypatch.setattr(rr, "progress_callback", progress)


def _same(a, b):
    ea, eb = a.expansion_, b.expansion_
    assert ea.support_vectors.tobytes() == eb.support_vectors.tobytes()
    assert ea.coef.tobytes() == eb.coef.tobytes() and ea.intercept.tobytes() == eb.intercept.tobytes()
    np.testing.assert_array_equal(a.support_index_, b.support_index_)
    assert a.rkhs_error_.tobytes() == b.rkhs_error_.tobytes() and a.wsq_.tobytes() == b.wsq_.tobytes()
    assert a.path_ == b.path_ and a.stop_reason_ == b.stop_reason_


def _interrupted_then_resumed(monkeypatch, make, model, args, ckpt, calls, every, saved_at=None, starts=()):
    with monkeypatch.context() as m:
        _interrupt_after(m, calls)
        with pytest.raises(Interrupted):
            make().fit(model, *args, checkpoint=ckpt, checkpoint_every=every)
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and info["stage"] == "pursuit"
    assert info["iteration"] == (saved_at if saved_at is not None else (calls - 1) - calls % every)
    started = []
    with monkeypatch.context() as m:  # a resumed pursuit continues: no new dense state, no init pass
        real_dense, real_norms = _hmp._DensePursuit.__init__, par_reduced.pool_rkhs_norms
        m.setattr(_hmp._DensePursuit, "__init__", lambda self, *a: started.append("dense") or real_dense(self, *a))
        m.setattr(par_reduced, "pool_rkhs_norms", lambda *a: started.append("init") or real_norms(*a))
        resumed = make().fit(model, *args, checkpoint=ckpt, checkpoint_every=every, resume=True)
    assert started == list(starts)  # pursuits begun anew: only those after the interrupted one
    assert checkpoint_info(ckpt)["complete"]
    return resumed


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
    with monkeypatch.context() as m:
        _interrupt_after(m, 6)
        with pytest.raises(Interrupted):
            make().fit(SVC2, X, Y, checkpoint=ckpt, checkpoint_every=2)
    with monkeypatch.context() as m:
        m.setattr(rr, "chunked_compression", None)
        _same(make().fit(SVC2, X, Y, checkpoint=ckpt, resume=True), ref)


def test_dense_state_is_saved_without_the_pool_and_unused_capacity(tmp_path, monkeypatch):
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_after(m, 4)
        with pytest.raises(Interrupted):
            ReducedSetCompressor(n_vectors=200).fit(SVC2, X, Y, checkpoint=ckpt, checkpoint_every=4)
    state = restricted_loads((ckpt / STATE_FILE).read_bytes().split(b"\n", 2)[2])["loop"]  # allow-listed classes
    assert state.Q.shape == (len(X), 200) and state.Z is None and state.F is None
    assert (ckpt / STATE_FILE).stat().st_size < len(X) * 8 * 12  # R, δ, Q's 4 columns; not P × 200


def test_resume_refuses_another_model_pool_labels_or_parameters(tmp_path):
    ckpt = tmp_path / "ck"
    ReducedSetCompressor(n_vectors=5).fit(SVC2, X, Y, checkpoint=ckpt)
    before = (ckpt / STATE_FILE).read_bytes()
    with pytest.raises(FileExistsError, match="pass resume=True to continue it, or remove it"):
        ReducedSetCompressor(n_vectors=5).fit(SVC2, X, Y, checkpoint=ckpt)
    other = SVC(C=1.0, gamma=0.5).fit(X, Y)
    with pytest.raises(ValueError, match=r"parameter model: checkpoint '[0-9a-f]{64}', now '[0-9a-f]{64}'"):
        ReducedSetCompressor(n_vectors=5).fit(other, X, Y, checkpoint=ckpt, resume=True)
    with pytest.raises(ValueError, match=r"parameter labels: checkpoint .*, now "):
        ReducedSetCompressor(n_vectors=5).fit(SVC2, X, 1 - Y, checkpoint=ckpt, resume=True)
    with pytest.raises(ValueError, match=r"data n_rows: checkpoint 500, now 499"):
        ReducedSetCompressor(n_vectors=5).fit(SVC2, X[1:], Y[1:], checkpoint=ckpt, resume=True)
    with pytest.raises(ValueError, match=r"parameter n_vectors: checkpoint 5, now 6"):
        ReducedSetCompressor(n_vectors=6).fit(SVC2, X, Y, checkpoint=ckpt, resume=True)
    assert (ckpt / STATE_FILE).read_bytes() == before


@pytest.fixture(scope="module")
def cluster_client():
    """A process LocalCluster of 2 workers, with generous start timeouts (a loaded machine)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", memory_limit="2GiB", timeout=180) as cluster:
        with distributed.Client(cluster, set_as_default=False, timeout=180) as client:
            client.wait_for_workers(2, timeout=180)
            yield client


@pytest.mark.slow
def test_resumed_on_a_process_cluster_is_identical(tmp_path, monkeypatch, cluster_client):
    """A store pool on a process LocalCluster, interrupted, resumed on it and in process: the
    compressed model of an uninterrupted in-process fit."""
    store = create_store(tmp_path / "pool.zarr", X, Y, chunk_rows=125)
    make = lambda client: ReducedSetCompressor(n_vectors=15, candidates=60, criterion="decrease",  # noqa: E731
                                               random_state=2, client=client)
    ref = make("sync").fit(SVC2, store.url)
    for where, client in [("cluster", cluster_client), ("process", "sync")]:
        ckpt = tmp_path / f"ck-{where}"
        with monkeypatch.context() as m:
            _interrupt_after(m, 6)
            with pytest.raises(Interrupted):
                make(cluster_client).fit(SVC2, store.url, checkpoint=ckpt, checkpoint_every=2)
        _same(make(client).fit(SVC2, store.url, checkpoint=ckpt, resume=True), ref)


_SCRIPT = """
import sys
import numpy as np
from sklearn.svm import SVC
import kmp_dask.reduced._routes as rr
from kmp_dask import ReducedSetCompressor
from kmp_dask.store import open_store

def progress(verbose, total, **kw):
    def callback(record):
        print("iteration", record["iteration"], flush=True)
    return callback, None

rr.progress_callback = progress
X, y = open_store(sys.argv[1]).read_range(0, 500)
svc = SVC(C=10.0, gamma=0.5).fit(X, y)
ReducedSetCompressor(**PARAMS).fit(svc, sys.argv[1], checkpoint=sys.argv[2], checkpoint_every=1)
print("done", flush=True)
"""


@pytest.mark.slow
def test_sigkilled_compression_resumes_to_the_identical_model(tmp_path):
    """A compressing process SIGKILLed mid-pursuit (maybe mid-write) resumes from its checkpoint."""
    store = create_store(tmp_path / "pool.zarr", X, Y, chunk_rows=125)
    params = {"n_vectors": 80, "random_state": 4, "client": "sync", "criterion": "decrease"}
    ckpt = tmp_path / "ck"
    seen = run_and_kill_at(tmp_path, _SCRIPT, params, [store.url, ckpt], timeout=180)
    assert "iteration 5" in seen and "done" not in seen, seen
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and 5 <= info["iteration"] < 79
    resumed = ReducedSetCompressor(**params).fit(SVC2, store.url, checkpoint=ckpt, resume=True)
    ref = ReducedSetCompressor(**params).fit(SVC2, store.url)
    _same(resumed, ref)


def test_fit_then_compress_estimators_pass_the_checkpoint_on(tmp_path, monkeypatch):
    """ReducedSetClassifier refits its SVC (deterministic) and resumes the compression."""
    from kmp_dask.reduced import ReducedSetClassifier

    make = lambda: ReducedSetClassifier(SVC(C=10.0, gamma=0.5), n_vectors=20, random_state=0)  # noqa: E731
    ref = make().fit(X, Y)
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_after(m, 8)
        with pytest.raises(Interrupted):
            make().fit(X, Y, checkpoint=ckpt, checkpoint_every=4)
    assert checkpoint_info(ckpt)["iteration"] == 7
    _same(make().fit(X, Y, checkpoint=ckpt, resume=True).compressor_, ref.compressor_)
    with pytest.raises(ValueError, match="parameter model: checkpoint"):
        ReducedSetClassifier(SVC(C=1.0, gamma=0.5), n_vectors=20, random_state=0).fit(X, Y, checkpoint=ckpt,
                                                                                      resume=True)
