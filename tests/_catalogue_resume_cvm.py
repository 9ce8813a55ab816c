"""Failure catalogue rows of area "resume_cvm": the checkpoint / resume arguments of
CVMClassifier and MMDA.

``WORKSPACE`` puts checkpoint directories into the workspace, written once per test session in a
temporary directory and copied byte for byte: ``cvm_ckpt`` (a complete CVMClassifier fit),
``cvm_damaged_ckpt`` (its payload with one byte flipped), ``cvm_old_ckpt`` (its header claiming
another kmp_dask version), ``cvm_part_ckpt`` (only a one-vs-rest problem's part file, the main
file removed by hand) and ``cvm_evil_ckpt`` (a valid header over a pickle that would call
``os.system`` to create a file in the workspace). The rows check that a refused fit or resume
leaves all of them — and everything else — unchanged (and that nothing ran).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
from _catalogue import Case

from kmp_dask import MMDA, CVMClassifier
from kmp_dask.greedy._checkpoint import STATE_FILE

_RNG = np.random.default_rng(2929)
X = _RNG.normal(size=(60, 3))
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
_MAGIC = b"kmp_dask checkpoint\n"


def _cvm(**kw):
    return CVMClassifier(C=10.0, eps=1e-3, gamma=0.5, random_state=0, **kw)


class _Evil:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return os.system, (f"touch {self.target}",)


def _split(data: bytes) -> tuple[dict, bytes]:
    head, blob = data[len(_MAGIC):].split(b"\n", 1)
    return json.loads(head), blob


def _join(head: dict, blob: bytes) -> bytes:
    return _MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + blob


@lru_cache(maxsize=1)
def _template() -> bytes:
    """The bytes of a complete CVMClassifier checkpoint of (X, Y) (made once)."""
    with tempfile.TemporaryDirectory() as tmp:
        _cvm().fit(X, Y, checkpoint=Path(tmp, "cvm"))
        return Path(tmp, "cvm", STATE_FILE).read_bytes()


def WORKSPACE(root: Path, ws) -> None:  # noqa: N802 (the hook's name)
    good = _template()
    head, blob = _split(good)
    damaged = bytearray(good)
    damaged[-10] ^= 0xFF
    evil = pickle.dumps({"result": _Evil(root / "PWNED")})
    files = {
        "cvm_ckpt": (STATE_FILE, good),
        "cvm_damaged_ckpt": (STATE_FILE, bytes(damaged)),
        "cvm_old_ckpt": (STATE_FILE, _join({**head, "kmp_dask_version": "0.0.1"}, blob)),
        "cvm_part_ckpt": ("problem-00000.ckpt", good),
        "cvm_evil_ckpt": (STATE_FILE, _join({**head, "payload_bytes": len(evil),
                                             "payload_sha256": hashlib.sha256(evil).hexdigest()}, evil)),
    }
    for attr, (name, data) in files.items():
        d = root / attr.replace("_", "-")
        d.mkdir()
        (d / name).write_bytes(data)
        setattr(ws, attr, str(d))


CASES = [
    Case("CVMClassifier-resume-without-checkpoint", lambda ws: _cvm().fit(X, Y, resume=True), ValueError,
         ("resume=True needs checkpoint=<directory>",)),
    Case("MMDA-checkpoint_every=0",
         lambda ws: MMDA(2, gamma=0.5).fit(X, Y, checkpoint=ws.root / "new-ckpt", checkpoint_every=0), ValueError,
         ("checkpoint_every must be a positive int", "got 0")),
    Case("CVMClassifier-checkpoint-exists", lambda ws: _cvm().fit(X, Y, checkpoint=ws.cvm_ckpt), FileExistsError,
         ("a checkpoint already exists at", "cvm-ckpt", "pass resume=True to continue it, or remove it")),
    Case("CVMClassifier-checkpoint-leftover-part", lambda ws: _cvm().fit(X, Y, checkpoint=ws.cvm_part_ckpt),
         FileExistsError, ("a checkpoint already exists at", "problem-00000.ckpt", "pass resume=True")),
    Case("CVMClassifier-resume-other-C",
         lambda ws: CVMClassifier(C=1.0, eps=1e-3, gamma=0.5, random_state=0).fit(X, Y, checkpoint=ws.cvm_ckpt,
                                                                                  resume=True),
         ValueError, ("is of another fit", "parameter C: checkpoint 10.0, now 1.0", "remove it")),
    Case("MMDA-resume-a-CVMClassifier-checkpoint",
         lambda ws: MMDA(2, C=10.0, eps=1e-3, gamma=0.5, random_state=0).fit(X, Y, checkpoint=ws.cvm_ckpt,
                                                                             resume=True),
         ValueError, ("estimator: checkpoint 'CVMClassifier', now 'MMDA'",)),
    Case("CVMClassifier-resume-other-labels",
         lambda ws: _cvm().fit(X, 1 - Y, checkpoint=ws.cvm_ckpt, resume=True), ValueError,
         ("is of another fit", "data rows_sha256: checkpoint")),
    Case("CVMClassifier-resume-damaged-checkpoint",
         lambda ws: _cvm().fit(X, Y, checkpoint=ws.cvm_damaged_ckpt, resume=True), ValueError,
         ("is damaged", "SHA-256", "remove it to start again")),
    Case("CVMClassifier-resume-other-version",
         lambda ws: _cvm().fit(X, Y, checkpoint=ws.cvm_old_ckpt, resume=True), ValueError,
         ("written by kmp_dask 0.0.1", "Resume it with that version, or remove it")),
    Case("CVMClassifier-resume-planted-pickle",
         lambda ws: _cvm().fit(X, Y, checkpoint=ws.cvm_evil_ckpt, resume=True), ValueError,
         ("cannot be resumed", "refusing to load", "system", "do not resume from it")),
]

COMMANDS: list = []
