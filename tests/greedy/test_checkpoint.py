"""KMP's checkpoints and resume beyond the contract every family meets (tests/test_resume_contract.py:
resumed = uninterrupted, a complete checkpoint, a fresh start, no overwrite, refusals, SIGKILL, a
process cluster): a fit interrupted at iteration t and resumed gives the identical model for
several losses, sampling modes, validation and early stopping; the parameters a KMP checkpoint
refuses; a failed write leaves the previous checkpoint valid; the API under the estimators."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _contracts import Interrupted, interrupted_then_resumed
from _contracts import same_kmp as _assert_same_model

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.greedy import Pursuit, _checkpoint, kernel_matching_pursuit
from kmp_dask.greedy._checkpoint import STATE_FILE, TMP_FILE, Checkpoint, checkpoint_info, open_checkpoint
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore, create_store


def _data(n=1500, d=4, seed=0, classes=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=n)
    if classes:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


def _interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every):
    return interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every, begin=[(Pursuit, "_begin")])


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
