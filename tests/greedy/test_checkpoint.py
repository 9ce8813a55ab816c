"""Checkpoints and resume: a fit interrupted at iteration t and resumed from its
checkpoint gives the identical model (bit for bit) as an uninterrupted fit with the same seed —
in process and on a process cluster, for several losses and sampling modes; a checkpoint of
another fit is refused, an existing one is never overwritten, and a failed write leaves the
previous checkpoint valid."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _kill_at_line import run_and_kill_at

import kmp_dask.estimators._kmp as est_kmp
from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.greedy import Pursuit, _checkpoint, kernel_matching_pursuit
from kmp_dask.greedy._checkpoint import STATE_FILE, TMP_FILE, Checkpoint, checkpoint_info, open_checkpoint
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore, create_store


class Interrupted(Exception):
    """Raised from the progress callback: the fit dies mid-loop, as a killed one would."""


def _data(n=1500, d=4, seed=0, classes=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=n)
    if classes:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


def _interrupt_at(monkeypatch, iteration):
    """The estimator's progress callback raises once the record of ``iteration`` arrives (it
    arrives with the scoring pass of the next iteration, after that iteration's checkpoint)."""
    def progress(verbose, total, **kw):
        def callback(record):
            if record["iteration"] == iteration:
                raise Interrupted(iteration)
        return callback, None

    monkeypatch.setattr(est_kmp, "progress_callback", progress)


def _assert_same_model(a, b, X):
    np.testing.assert_array_equal(a.basis_indices_, b.basis_indices_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert np.array_equal(a.predict(X), b.predict(X))
    assert a.stop_reason_ == b.stop_reason_
    drop = lambda h: [{k: v for k, v in r.items() if k != "seconds"} for r in h]  # noqa: E731
    assert drop(a.history_) == drop(b.history_)


def _interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every):
    with monkeypatch.context() as m:
        _interrupt_at(m, at)
        with pytest.raises(Interrupted):
            make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every)
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and info["iteration"] == at - (at + 1) % every
    begun = []
    real_begin = Pursuit._begin
    with monkeypatch.context() as m:  # a resumed fit continues the loop: no set-up, no first draw
        m.setattr(Pursuit, "_begin", lambda self, rng: begun.append(1) or real_begin(self, rng))
        resumed = make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every, resume=True)
    assert not begun and checkpoint_info(ckpt)["complete"]
    return resumed


CASES = {
    "squared-backfit-auto-validation": (KMPRegressor, {"n_basis": 20, "candidates": "auto",
                                                       "validation_fraction": 0.2}, 0),
    "squared-basic-all": (KMPRegressor, {"n_basis": 12, "candidates": "all", "fit_mode": "basic"}, 0),
    "logistic-binary": (KMPClassifier, {"n_basis": 16, "loss": "logistic", "refit_every": 3}, 2),
    "logistic-multiclass-validation": (KMPClassifier, {"n_basis": 14, "loss": "logistic",
                                                      "validation_fraction": 0.2}, 3),
    "squared-multiclass-early-stopping": (KMPClassifier, {"n_basis": 40, "validation_fraction": 0.25,
                                                          "n_iter_no_change": 3, "candidates": 20}, 4),
    # n_basis="auto": the factored ranking scores (rank_only_scores) are part of the saved state
    "n-basis-auto-early-stopping": (KMPClassifier, {}, 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_resumed_fit_is_identical_in_process(tmp_path, monkeypatch, case):
    cls, params, classes = CASES[case]
    X, y = _data(classes=classes)
    make = lambda: cls(gamma=0.5, random_state=7, **params)  # noqa: E731
    ref = make().fit(X, y)
    last = ref.n_iter_ - 1
    for at, every in [(0, 1), (5, 3), (last, 1)]:
        if case.endswith("early-stopping") and at == last:
            continue  # the history was cut back to the best size: its last record is not the loop's last
        resumed = _interrupted_then_resumed(monkeypatch, make, (X, y), tmp_path / f"ck{at}", at, every)
        _assert_same_model(resumed, ref, X)


def test_early_stopping_fit_resumed_before_it_stopped(tmp_path, monkeypatch):
    cls, params, classes = CASES["squared-multiclass-early-stopping"]
    X, y = _data(classes=classes)
    make = lambda: cls(gamma=0.5, random_state=7, **params)  # noqa: E731
    ref = make().fit(X, y)
    assert ref.stop_reason_ == "early_stopping"
    at = len(ref.history_)  # iterations after the best size ran, then were cut back
    resumed = _interrupted_then_resumed(monkeypatch, make, (X, y), tmp_path / "ck", at, 2)
    _assert_same_model(resumed, ref, X)


def test_complete_checkpoint_is_kept_and_resuming_it_returns_the_model(tmp_path, monkeypatch):
    X, y = _data()
    ckpt = tmp_path / "ck"
    first = KMPRegressor(n_basis=10, random_state=1).fit(X, y, checkpoint=ckpt)
    info = checkpoint_info(ckpt)
    assert info["complete"] and info["iteration"] == 9 and info["stop_reason"] == "n_basis"
    assert sorted(p.name for p in ckpt.iterdir()) == [STATE_FILE]

    def no_pass(*a, **k):
        raise AssertionError("a complete checkpoint needs no pursuit")

    monkeypatch.setattr("kmp_dask.greedy._kmp.Pursuit.run", no_pass)
    again = KMPRegressor(n_basis=10, random_state=1).fit(X, y, checkpoint=ckpt, resume=True)
    _assert_same_model(again, first, X)


def test_resume_without_a_checkpoint_starts_from_scratch(tmp_path):
    X, y = _data()
    ref = KMPRegressor(n_basis=8, random_state=2).fit(X, y)
    fresh = KMPRegressor(n_basis=8, random_state=2).fit(X, y, checkpoint=tmp_path / "new", resume=True)
    _assert_same_model(fresh, ref, X)
    assert checkpoint_info(tmp_path / "new")["complete"]


def test_existing_checkpoint_is_never_overwritten(tmp_path):
    X, y = _data()
    KMPRegressor(n_basis=5, random_state=0).fit(X, y, checkpoint=tmp_path / "ck")
    before = (tmp_path / "ck" / STATE_FILE).read_bytes()
    with pytest.raises(FileExistsError, match="pass resume=True to continue it, or remove it"):
        KMPRegressor(n_basis=5, random_state=0).fit(X, y, checkpoint=tmp_path / "ck")
    assert (tmp_path / "ck" / STATE_FILE).read_bytes() == before


@pytest.mark.parametrize("change, match", [
    ({"n_basis": 7}, r"parameter n_basis: checkpoint 6, now 7"),
    ({"gamma": 0.25}, r"parameter gamma: checkpoint 0.5, now 0.25"),
    ({"loss": "huber"}, r"parameter loss: checkpoint 'squared', now 'huber'"),
])
def test_resume_refuses_other_parameters(tmp_path, change, match):
    X, y = _data()
    params = {"n_basis": 6, "gamma": 0.5, "random_state": 0}
    KMPRegressor(**params).fit(X, y, checkpoint=tmp_path / "ck")
    with pytest.raises(ValueError, match=match):
        KMPRegressor(**{**params, **change}).fit(X, y, checkpoint=tmp_path / "ck", resume=True)


def test_resume_ignores_client_and_verbose(tmp_path):
    X, y = _data()
    a = KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=tmp_path / "ck")
    b = KMPRegressor(n_basis=6, random_state=0, client="sync", verbose=3).fit(X, y, checkpoint=tmp_path / "ck",
                                                                          resume=True)
    _assert_same_model(a, b, X)


def test_resume_refuses_other_data_and_other_estimators(tmp_path):
    X, y = _data()
    KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=tmp_path / "ck")
    y2 = y.copy()
    y2[700] += 1.0  # one target in the middle: in-memory data are hashed in full
    with pytest.raises(ValueError, match=r"data rows_sha256: checkpoint '[0-9a-f]+', now '[0-9a-f]+'"):
        KMPRegressor(n_basis=6, random_state=0).fit(X, y2, checkpoint=tmp_path / "ck", resume=True)
    with pytest.raises(ValueError, match=r"data n_rows: checkpoint 1500, now 1499"):
        KMPRegressor(n_basis=6, random_state=0).fit(X[1:], y[1:], checkpoint=tmp_path / "ck", resume=True)
    with pytest.raises(ValueError, match=r"estimator: checkpoint 'KMPRegressor', now 'KMPClassifier'"):
        KMPClassifier(n_basis=6, random_state=0).fit(X, y > 0, checkpoint=tmp_path / "ck", resume=True)


def test_resume_refuses_another_store(tmp_path):
    X, y = _data()
    a = create_store(tmp_path / "a.zarr", X, y, chunk_rows=500)
    X2 = X.copy()
    X2[-1, 0] += 1.0  # the last chunk of the store changed
    b = create_store(tmp_path / "b.zarr", X2, y, chunk_rows=500)
    KMPRegressor(n_basis=6, random_state=0, client="sync").fit(a.url, checkpoint=tmp_path / "ck")
    with pytest.raises(ValueError, match=r"data location: checkpoint .*a\.zarr.*, now .*b\.zarr.*data rows_sha256"):
        KMPRegressor(n_basis=6, random_state=0, client="sync").fit(b.url, checkpoint=tmp_path / "ck", resume=True)


def test_resume_refuses_another_version_and_a_damaged_file(tmp_path, monkeypatch):
    X, y = _data()
    ckpt = tmp_path / "ck"
    KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=ckpt)
    with monkeypatch.context() as m:
        m.setattr(_checkpoint, "__version__", "99.0")
        with pytest.raises(ValueError, match=r"written by kmp_dask .* this is kmp_dask 99\.0"):
            KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=ckpt, resume=True)
    path = ckpt / STATE_FILE
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="is damaged"):
        KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=ckpt, resume=True)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a kmp_dask checkpoint"):
        KMPRegressor(n_basis=6, random_state=0).fit(X, y, checkpoint=ckpt, resume=True)


def test_bad_arguments(tmp_path):
    X, y = _data(n=300)
    with pytest.raises(ValueError, match="resume=True needs checkpoint="):
        KMPRegressor(n_basis=3).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        KMPRegressor(n_basis=3).fit(X, y, checkpoint=tmp_path / "ck", checkpoint_every=0)


def test_failed_write_leaves_the_previous_checkpoint_valid(tmp_path, monkeypatch):
    X, y = _data()
    make = lambda: KMPRegressor(n_basis=12, random_state=4, validation_fraction=0.1)  # noqa: E731
    ref = make().fit(X, y)
    ckpt = tmp_path / "ck"
    real_replace, calls = os.replace, []

    def failing_replace(src, dst):  # the third save dies after writing state.tmp, before the swap
        calls.append(dst)
        if len(calls) == 3:
            raise OSError("disk full")
        real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(_checkpoint.os, "replace", failing_replace)
        with pytest.raises(OSError, match="disk full"):
            make().fit(X, y, checkpoint=ckpt, checkpoint_every=3)
    assert checkpoint_info(ckpt)["iteration"] == 5  # the second save (after iteration 5) is intact
    (ckpt / TMP_FILE).write_bytes(b"half a checkpoint")  # as a write killed midway leaves it
    resumed = make().fit(X, y, checkpoint=ckpt, checkpoint_every=3, resume=True)
    _assert_same_model(resumed, ref, X)
    assert not (ckpt / TMP_FILE).exists()


def test_greedy_level_checkpoint(tmp_path):
    """``kernel_matching_pursuit(checkpoint=...)`` with an engine: the API under the estimators."""
    X, y = _data()
    store = InMemoryStore(X, y, chunk_rows=400)
    kw = dict(kernel=get_kernel("rbf", gamma=0.5), n_rows=len(X), n_features=X.shape[1], dtype=X.dtype,
              targets={"kind": "regression"}, n_basis=15, candidates=30, ridge=1e-10)

    def fit(ckpt=None, callback=None):
        with InProcessEngine(partition_specs(store)) as eng:
            return kernel_matching_pursuit(eng, random_state=np.random.default_rng(5), callback=callback,
                                           checkpoint=ckpt, **kw)

    ref = fit()

    def opened(resume):
        return open_checkpoint(tmp_path / "ck", every=4, resume=resume, estimator="test", params={}, store=store)

    def stop(rec):
        if rec["iteration"] == 9:
            raise Interrupted

    with pytest.raises(Interrupted):
        fit(opened(False), stop)
    ck = opened(True)
    assert isinstance(ck, Checkpoint) and ck.saved["t"] == 7
    res = fit(ck)
    np.testing.assert_array_equal(res.basis_indices, ref.basis_indices)
    assert res.coef.tobytes() == ref.coef.tobytes() and res.intercept.tobytes() == ref.intercept.tobytes()


def test_resumed_on_a_process_cluster_is_identical(tmp_path, monkeypatch, process_client):
    """Interrupted on a process LocalCluster, resumed on it and in process: the same model as an
    uninterrupted in-process fit (partitions rebuilt on fresh actors from the saved journal)."""
    X, y = _data(n=3000, classes=3)
    store = create_store(tmp_path / "d.zarr", X, y, chunk_rows=700)
    for loss, at in [("squared", 6), ("logistic", 3)]:
        make = lambda client, loss=loss: KMPClassifier(  # noqa: E731
            n_basis=12, gamma=0.5, random_state=3, loss=loss, validation_fraction=0.2, client=client)
        ref = make("sync").fit(store.url)
        for where, client in [("cluster", process_client), ("process", "sync")]:
            ckpt = tmp_path / f"ck-{loss}-{where}"
            with monkeypatch.context() as m:
                _interrupt_at(m, at)
                with pytest.raises(Interrupted):
                    make(process_client).fit(store.url, checkpoint=ckpt, checkpoint_every=2)
            resumed = make(client).fit(store.url, checkpoint=ckpt, resume=True)
            _assert_same_model(resumed, ref, X)


_SCRIPT = """
import sys
import kmp_dask.estimators._kmp as est_kmp
from kmp_dask import KMPRegressor

def progress(verbose, total, **kw):
    def callback(record):
        print("iteration", record["iteration"], flush=True)
    return callback, None

est_kmp.progress_callback = progress
KMPRegressor(**PARAMS).fit(sys.argv[1], checkpoint=sys.argv[2], checkpoint_every=1)
print("done", flush=True)
"""


def test_sigkilled_fit_resumes_to_the_identical_model(tmp_path):
    """A fit process SIGKILLed mid-loop (maybe mid-write) resumes from its checkpoint."""
    X, y = _data(n=4000)
    store = create_store(tmp_path / "d.zarr", X, y, chunk_rows=1000)
    params = {"n_basis": 60, "gamma": 0.5, "random_state": 11, "candidates": 100, "client": "sync"}
    ckpt = tmp_path / "ck"
    seen = run_and_kill_at(tmp_path, _SCRIPT, params, [store.url, ckpt], timeout=120)
    assert "iteration 5" in seen and "done" not in seen, seen
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"] and 5 <= info["iteration"] < 59
    resumed = KMPRegressor(**params).fit(store.url, checkpoint=ckpt, resume=True)
    ref = KMPRegressor(**params).fit(store.url)
    _assert_same_model(resumed, ref, X)
