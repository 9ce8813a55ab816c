"""Checkpoint / resume of sparse kernel PCA and sparse KCCA: a fit interrupted after
chosen point t and resumed from its checkpoint gives the identical model (bit for bit) as an
uninterrupted fit with the same seed — in process, on a process LocalCluster and after a SIGKILL
of the fitting process; a checkpoint of another fit is refused and an existing one is never
overwritten."""

from __future__ import annotations

import numpy as np
import pytest
from _kill_at_line import run_and_kill_at

import kmp_dask.estimators._kpca as est_kpca
from kmp_dask import SparseKCCA, SparseKernelPCA
from kmp_dask.exceptions import DegenerateFitWarning
from kmp_dask.greedy._checkpoint import STATE_FILE, checkpoint_info
from kmp_dask.greedy._sparse_kpca import KPCARun
from kmp_dask.store import create_store


class Interrupted(Exception):
    """Raised from the progress callback: the fit dies mid-loop, as a killed one would."""


def _data(n=700, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.5 * X[:, 0] ** 2
    return X


def _interrupt_at(monkeypatch, iteration):
    """The progress callback raises at chosen point ``iteration`` (after that point's checkpoint)."""
    def progress(verbose, total, **kw):
        def callback(record):
            if record["iteration"] == iteration:
                raise Interrupted(iteration)
        return callback, None

    monkeypatch.setattr(est_kpca, "progress_callback", progress)


def _same_kpca(a, b):
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    for name in ("basis_vectors_", "trace_residual_path_", "eigenvalues_", "explained_variance_"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.expansion_.coef.tobytes() == b.expansion_.coef.tobytes()
    assert a.expansion_.intercept.tobytes() == b.expansion_.intercept.tobytes()
    assert (a.stop_reason_, a.n_passes_, a.n_components_) == (b.stop_reason_, b.n_passes_, b.n_components_)
    if hasattr(b, "bound_path_"):
        assert a.bound_path_.tobytes() == b.bound_path_.tobytes()


def _same_kcca(a, b):
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    assert a.correlations_.tobytes() == b.correlations_.tobytes()
    assert a.trace_residual_path_.tobytes() == b.trace_residual_path_.tobytes()
    for e, f in ((a.expansion_x_, b.expansion_x_), (a.expansion_y_, b.expansion_y_)):
        assert e.coef.tobytes() == f.coef.tobytes() and e.intercept.tobytes() == f.intercept.tobytes()


def _interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every):
    with monkeypatch.context() as m:
        _interrupt_at(m, at)
        with pytest.raises(Interrupted):
            make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every)
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and info["iteration"] == at - (at + 1) % every
    begun = []
    real_begin = KPCARun.begin
    with monkeypatch.context() as m:  # a resumed fit continues the loop: no set-up pass, no first draw
        m.setattr(KPCARun, "begin", lambda self, rng: begun.append(1) or real_begin(self, rng))
        resumed = make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every, resume=True)
    assert not begun and checkpoint_info(ckpt)["complete"]
    return resumed


KPCA_CASES = {
    "exact": {"n_components": 12},
    "sampled": {"n_components": 14, "candidates": 40},
    "bound": {"n_components": "bound", "max_components": 12, "candidates": "auto"},
}


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.BoundAtCapWarning")  # a 12-point cap, on purpose
@pytest.mark.parametrize("case", list(KPCA_CASES))
def test_kpca_resumed_fit_is_identical_in_process(tmp_path, monkeypatch, case):
    X = _data(n=200 if case == "exact" else 700)
    make = lambda: SparseKernelPCA(gamma=0.3, random_state=7, **KPCA_CASES[case])  # noqa: E731
    ref = make().fit(X)
    last = ref.trace_residual_path_.shape[0] - 2 if case != "bound" else 11
    for at, every in [(0, 1), (5, 3), (last, 1)]:
        resumed = _interrupted_then_resumed(monkeypatch, make, (X,), tmp_path / f"ck{at}", at, every)
        _same_kpca(resumed, ref)


def test_kpca_stopped_by_rank_resumes_identically(tmp_path, monkeypatch):
    X = _data(n=300, d=3)
    make = lambda: SparseKernelPCA(n_components=10, kernel="linear", random_state=0)  # noqa: E731
    with pytest.warns(DegenerateFitWarning):
        ref = make().fit(X)
    assert ref.stop_reason_ == "rank" and ref.n_components_ == 3
    with pytest.warns(DegenerateFitWarning):
        resumed = _interrupted_then_resumed(monkeypatch, make, (X,), tmp_path / "ck", 1, 1)
    _same_kpca(resumed, ref)


def test_kcca_resumed_fit_is_identical(tmp_path, monkeypatch):
    X = _data(n=300)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]]) + 0.1 * np.random.default_rng(1).normal(size=(300, 2))
    for params in ({"n_components": 10}, {"n_components": 10, "candidates": 30}):
        make = lambda params=params: SparseKCCA(gamma_x=0.3, gamma_y=0.5, random_state=3, **params)  # noqa: E731
        ref = make().fit(X, Y)
        ckpt = tmp_path / f"ck{len(params)}"
        resumed = _interrupted_then_resumed(monkeypatch, make, (X, Y), ckpt, 6, 4)
        _same_kcca(resumed, ref)
        again = make().fit(X, Y, checkpoint=ckpt, resume=True)  # complete: the same model at once
        _same_kcca(again, ref)


def test_complete_checkpoint_is_kept_and_resuming_it_starts_nothing(tmp_path, monkeypatch):
    X = _data()
    ckpt = tmp_path / "ck"
    first = SparseKernelPCA(n_components=8, candidates=30, random_state=1).fit(X, checkpoint=ckpt)
    info = checkpoint_info(ckpt)
    assert info["complete"] and info["iteration"] == 7 and info["stop_reason"] == "n_components"
    assert sorted(p.name for p in ckpt.iterdir()) == [STATE_FILE]

    def no_cluster(*a, **k):
        raise AssertionError("a complete checkpoint needs no client and no pass")

    monkeypatch.setattr(est_kpca, "engine_session", no_cluster)
    again = SparseKernelPCA(n_components=8, candidates=30, random_state=1).fit(X, checkpoint=ckpt, resume=True)
    _same_kpca(again, first)


def test_resume_without_a_checkpoint_starts_from_scratch(tmp_path):
    X = _data()
    ref = SparseKernelPCA(n_components=6, candidates=30, random_state=2).fit(X)
    fresh = SparseKernelPCA(n_components=6, candidates=30, random_state=2).fit(X, checkpoint=tmp_path / "new",
                                                                             resume=True)
    _same_kpca(fresh, ref)
    assert checkpoint_info(tmp_path / "new")["complete"]


def test_existing_checkpoint_is_never_overwritten_and_other_fits_are_refused(tmp_path):
    X = _data()
    ckpt = tmp_path / "ck"
    SparseKernelPCA(n_components=5, gamma=0.3, random_state=0).fit(X, checkpoint=ckpt)
    before = (ckpt / STATE_FILE).read_bytes()
    with pytest.raises(FileExistsError, match="pass resume=True to continue it, or remove it"):
        SparseKernelPCA(n_components=5, gamma=0.3, random_state=0).fit(X, checkpoint=ckpt)
    with pytest.raises(ValueError, match=r"parameter gamma: checkpoint 0.3, now 0.5"):
        SparseKernelPCA(n_components=5, gamma=0.5, random_state=0).fit(X, checkpoint=ckpt, resume=True)
    X2 = X.copy()
    X2[350, 2] += 1.0
    with pytest.raises(ValueError, match=r"data rows_sha256: checkpoint '[0-9a-f]+', now '[0-9a-f]+'"):
        SparseKernelPCA(n_components=5, gamma=0.3, random_state=0).fit(X2, checkpoint=ckpt, resume=True)
    with pytest.raises(ValueError, match=r"estimator: checkpoint 'SparseKernelPCA', now 'SparseKCCA'"):
        SparseKCCA(n_components=5, random_state=0).fit(X[:, :2], X[:, 2:], checkpoint=ckpt, resume=True)
    assert (ckpt / STATE_FILE).read_bytes() == before


@pytest.mark.parametrize("reg", [np.inf, -np.inf, np.nan, -0.5, "0.1", True])
def test_kcca_reg_is_validated_before_anything_runs(reg):
    X = _data(n=50)
    with pytest.raises(ValueError, match=r"reg must be a finite float >= 0 .*; got"):
        SparseKCCA(n_components=3, reg=reg).fit(X[:, :2], X[:, 2:])


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
    """Interrupted on a process LocalCluster, resumed on it and in process: the model of an
    uninterrupted in-process fit (partitions rebuilt on fresh actors from the saved journal)."""
    X = _data(n=2400)
    store = create_store(tmp_path / "d.zarr", X, chunk_rows=600)
    make = lambda client: SparseKernelPCA(n_components=10, candidates=50, gamma=0.3, random_state=3,  # noqa: E731
                                          client=client)
    ref = make("sync").fit(store.url)
    for where, client in [("cluster", cluster_client), ("process", "sync")]:
        ckpt = tmp_path / f"ck-{where}"
        with monkeypatch.context() as m:
            _interrupt_at(m, 5)
            with pytest.raises(Interrupted):
                make(cluster_client).fit(store.url, checkpoint=ckpt, checkpoint_every=2)
        resumed = make(client).fit(store.url, checkpoint=ckpt, resume=True)
        _same_kpca(resumed, ref)


_SCRIPT = """
import sys
import kmp_dask.estimators._kpca as est_kpca
from kmp_dask import SparseKernelPCA

def progress(verbose, total, **kw):
    def callback(record):
        print("iteration", record["iteration"], flush=True)
    return callback, None

est_kpca.progress_callback = progress
SparseKernelPCA(**PARAMS).fit(sys.argv[1], checkpoint=sys.argv[2], checkpoint_every=1)
print("done", flush=True)
"""


@pytest.mark.slow
def test_sigkilled_fit_resumes_to_the_identical_model(tmp_path):
    """A fit process SIGKILLed mid-loop (maybe mid-write) resumes from its checkpoint."""
    X = _data(n=3000)
    store = create_store(tmp_path / "d.zarr", X, chunk_rows=750)
    params = {"n_components": 60, "gamma": 0.3, "random_state": 11, "candidates": 100, "client": "sync"}
    ckpt = tmp_path / "ck"
    seen = run_and_kill_at(tmp_path, _SCRIPT, params, [store.url, ckpt], timeout=180)
    assert "iteration 5" in seen and "done" not in seen, seen
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and 5 <= info["iteration"] < 59
    resumed = SparseKernelPCA(**params).fit(store.url, checkpoint=ckpt, resume=True)
    ref = SparseKernelPCA(**params).fit(store.url)
    _same_kpca(resumed, ref)
