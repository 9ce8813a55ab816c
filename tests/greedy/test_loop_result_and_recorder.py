"""Every family's result has one base (``LoopResult``: ``stop_reason`` and ``history``, the
reason as a ``StopReason``), and every loop's recorder is a ``PathRecorder`` (KMP's too: its
records reach the callback through the same ``emit``, and a recorder pickled before it was one
still loads)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.svm import SVC

from kmp_dask import CVMClassifier, KMPRegressor, ReducedSetCompressor
from kmp_dask.estimators._progress import iteration_listener
from kmp_dask.greedy._kmp import Pursuit
from kmp_dask.greedy._kpca_config import KPCAConfig
from kmp_dask.greedy._record import PathRecorder, Recorder
from kmp_dask.greedy._result import LoopResult, StopReason
from kmp_dask.greedy._sparse_kpca import sparse_kernel_pca
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def _results():
    X, y = _data()
    kmp = KMPRegressor(gamma=0.5, n_basis=6, random_state=0).fit(X, y.astype(float))
    cvm = CVMClassifier(gamma=0.5, random_state=0).fit(X, y)
    comp = ReducedSetCompressor(6, random_state=0).fit(SVC(gamma=0.5).fit(X, y), X, y)
    with make_engine(None, InMemoryStore(X, chunk_rows=40)) as engine:
        kpca = sparse_kernel_pca(engine, KPCAConfig(get_kernel("rbf", gamma=0.5), len(X), 3, X.dtype, 4))
    return {"kmp": (kmp._path, kmp.stop_reason_), "cvm": (cvm.results_[0], cvm.stop_reason_[0]),
            "hmp": (comp.results_[0], comp.stop_reason_), "kpca": (kpca, kpca.stop_reason)}


def test_every_family_result_is_a_loop_result_with_its_reason():
    for name, (result, reported) in _results().items():
        assert isinstance(result, LoopResult), name
        assert isinstance(result.reason, StopReason) and result.reason.value == reported, name
        assert isinstance(result.history, list) and result.history, name


def test_kmp_records_reach_the_callback_through_the_recorder():
    X, y = _data()
    seen = []
    est = KMPRegressor(gamma=0.5, n_basis=5, random_state=0)
    recorders = []
    original = Pursuit.__init__

    def init(self, *a, **k):
        original(self, *a, **k)
        recorders.append(self.recorder)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Pursuit, "__init__", init)
        with iteration_listener(lambda desc, rec: seen.append(rec)):
            est.fit(X, y.astype(float))
    assert len(recorders) == 1 and isinstance(recorders[0], PathRecorder)
    assert recorders[0].history == est.history_ and [r["iteration"] for r in seen] == \
        [r["iteration"] for r in est.history_]
    assert all(r["residual_norm"] is not None for r in seen)  # completed by the next pass before it was emitted


def test_a_kmp_recorder_pickled_before_it_was_a_path_recorder_loads():
    rec = Recorder(None, False, None, callback=print)
    rec.history.append({"iteration": 0})
    old = {k: v for k, v in vars(rec).items() if k not in ("callback", "paths")}  # the state it had then
    restored = Recorder.__new__(Recorder)
    restored.__setstate__(dict(old))
    assert restored.callback is None and restored.paths == {} and restored.history == [{"iteration": 0}]
    again = pickle.loads(pickle.dumps(rec))
    assert again.callback is None and again.history == rec.history  # the callback is never pickled


def test_a_kmp_recorder_pickled_before_the_standard_errors_loads_with_nan_ones():
    rec = Recorder(None, False, None)
    rec.val_scores.extend([0.5, 0.6])
    old = {k: v for k, v in vars(rec).items() if k not in ("callback", "paths", "val_ses")}  # the state it had then
    restored = Recorder.__new__(Recorder)
    restored.__setstate__(dict(old))
    assert restored.callback is None and restored.paths == {} and restored.val_scores == [0.5, 0.6]
    assert len(restored.val_ses) == 2 and all(v != v for v in restored.val_ses)  # NaN: not measured then
