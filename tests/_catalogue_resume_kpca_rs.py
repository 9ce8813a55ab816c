"""Failure catalogue rows of area "resume_kpca_rs": SparseKCCA's ``reg`` and the
checkpoint / resume arguments of SparseKernelPCA, SparseKCCA and ReducedSetCompressor.

``WORKSPACE`` puts two complete checkpoints into the workspace (``kpca_ckpt``: a
SparseKernelPCA fit, ``rs_ckpt``: a ReducedSetCompressor fit), written once per test session in
a temporary directory and copied byte for byte; the rows check that a refused resume or fit leaves
them (and everything else) unchanged.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
from _catalogue import Case
from sklearn.svm import SVC

from kmp_dask import ReducedSetCompressor, SparseKCCA, SparseKernelPCA
from kmp_dask.greedy._checkpoint import STATE_FILE

_RNG = np.random.default_rng(29)
X = _RNG.normal(size=(60, 3))
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
_SVC = SVC(C=10.0, gamma=0.5).fit(X, Y)
_OTHER_SVC = SVC(C=1.0, gamma=0.5).fit(X, Y)


def _kpca(**kw):
    return SparseKernelPCA(n_components=3, gamma=0.5, random_state=0, **kw)


def _rs(**kw):
    return ReducedSetCompressor(n_vectors=4, random_state=0, **kw)


@lru_cache(maxsize=1)
def _templates() -> dict[str, bytes]:
    """The bytes of a complete SparseKernelPCA and ReducedSetCompressor checkpoint (made once)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        _kpca().fit(X, checkpoint=Path(tmp, "kpca"))
        _rs().fit(_SVC, X, Y, checkpoint=Path(tmp, "rs"))
        for name in ("kpca", "rs"):
            out[name] = Path(tmp, name, STATE_FILE).read_bytes()
    return out


def WORKSPACE(root: Path, ws) -> None:  # noqa: N802 (the hook's name)
    for name, data in _templates().items():
        d = root / f"{name}-checkpoint"
        d.mkdir()
        (d / STATE_FILE).write_bytes(data)
        setattr(ws, f"{name}_ckpt", str(d))


CASES = [
    Case("SparseKCCA-reg=inf", lambda ws: SparseKCCA(n_components=2, reg=np.inf).fit(X[:, :2], X[:, 2:]), ValueError,
         ("reg must be a finite float >= 0", "got inf", "0.1 is the default")),
    Case("SparseKCCA-reg=nan", lambda ws: SparseKCCA(n_components=2, reg=float("nan")).fit(X[:, :2], X[:, 2:]),
         ValueError, ("reg must be a finite float >= 0", "got nan")),
    Case("SparseKernelPCA-resume-without-checkpoint", lambda ws: _kpca().fit(X, resume=True), ValueError,
         ("resume=True needs checkpoint=<directory>",)),
    Case("SparseKernelPCA-checkpoint_every=0",
         lambda ws: _kpca().fit(X, checkpoint=ws.root / "new-ckpt", checkpoint_every=0), ValueError,
         ("checkpoint_every must be a positive int", "got 0")),
    Case("SparseKernelPCA-checkpoint-exists", lambda ws: _kpca().fit(X, checkpoint=ws.kpca_ckpt), FileExistsError,
         ("a checkpoint already exists at", "kpca-checkpoint", "pass resume=True to continue it, or remove it")),
    Case("SparseKernelPCA-resume-other-gamma",
         lambda ws: SparseKernelPCA(n_components=3, gamma=0.25, random_state=0).fit(X, checkpoint=ws.kpca_ckpt,
                                                                                    resume=True),
         ValueError, ("is of another fit", "parameter gamma: checkpoint 0.5, now 0.25", "remove it")),
    Case("SparseKCCA-resume-a-SparseKernelPCA-checkpoint",
         lambda ws: SparseKCCA(n_components=3, random_state=0).fit(X[:, :2], X[:, 2:], checkpoint=ws.kpca_ckpt,
                                                                   resume=True),
         ValueError, ("estimator: checkpoint 'SparseKernelPCA', now 'SparseKCCA'",)),
    Case("compress-checkpoint-exists", lambda ws: _rs().fit(_SVC, X, Y, checkpoint=ws.rs_ckpt), FileExistsError,
         ("a checkpoint already exists at", "rs-checkpoint", "pass resume=True to continue it, or remove it")),
    Case("compress-resume-another-model",
         lambda ws: _rs().fit(_OTHER_SVC, X, Y, checkpoint=ws.rs_ckpt, resume=True), ValueError,
         ("is of another fit", "parameter model: checkpoint '", "Fit with the checkpoint's settings, or remove it")),
    Case("compress-resume-other-labels",
         lambda ws: _rs().fit(_SVC, X, 1 - Y, checkpoint=ws.rs_ckpt, resume=True), ValueError,
         ("is of another fit", "parameter labels: checkpoint")),
]

COMMANDS: list = []
