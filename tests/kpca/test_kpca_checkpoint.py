"""Sparse kernel PCA and sparse KCCA's checkpoints beyond the contract every family meets
(tests/test_resume_contract.py: resumed = uninterrupted, a complete checkpoint, a fresh start, no
overwrite, refusals, SIGKILL, a process cluster): a fit interrupted after chosen point t and resumed
gives the identical model for exact, sampled and bound-stopped fits, a fit stopped by the rank, and
KCCA with exact and sampled candidates."""

from __future__ import annotations

import numpy as np
import pytest
from _contracts import interrupted_then_resumed
from _contracts import same_kcca as _same_kcca
from _contracts import same_kpca as _same_kpca

from kmp_dask import SparseKCCA, SparseKernelPCA
from kmp_dask.exceptions import DegenerateFitWarning
from kmp_dask.greedy._sparse_kpca import KPCARun


def _data(n=700, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.5 * X[:, 0] ** 2
    return X


def _interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every):
    return interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every, begin=[(KPCARun, "begin")])


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


@pytest.mark.parametrize("reg", [np.inf, -np.inf, np.nan, -0.5, "0.1", True])
def test_kcca_reg_is_validated_before_anything_runs(reg):
    X = _data(n=50)
    with pytest.raises(ValueError, match=r"reg must be a finite float >= 0 .*; got"):
        SparseKCCA(n_components=3, reg=reg).fit(X[:, :2], X[:, 2:])
