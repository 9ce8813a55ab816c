"""kmp_dask's own pickles (checkpoints, paged partition state) are read with a restricted
unpickler: a tampered checkpoint naming ``os.system`` (with a header recomputed to match) is
refused before anything runs; the state of every family still round-trips."""

from __future__ import annotations

import hashlib
import json
import os
import pickle

import numpy as np
import pytest

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.blockops._safe_pickle import UnsafePickleError, restricted_loads
from kmp_dask.greedy._checkpoint import STATE_FILE


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _tamper(path, payload_obj):
    """Replace the checkpoint's payload and recompute the header's length and SHA-256 (what an
    attacker who can write the file can do)."""
    raw = path.read_bytes()
    magic, head, _ = raw.split(b"\n", 2)
    blob = pickle.dumps(payload_obj)
    header = json.loads(head)
    header.update(payload_bytes=len(blob), payload_sha256=hashlib.sha256(blob).hexdigest())
    path.write_bytes(magic + b"\n" + json.dumps(header, sort_keys=True).encode() + b"\n" + blob)


def test_tampered_checkpoint_is_refused_before_it_runs(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    ck = tmp_path / "ck"
    KMPRegressor(n_basis=4, random_state=0).fit(X, y, checkpoint=ck)
    marker = tmp_path / "pwned"
    _tamper(ck / STATE_FILE, {"result": _Evil(marker)})
    with pytest.raises(ValueError,
                       match=r"cannot be resumed: refusing to load posix\.system|refusing to load os\.system"):
        KMPRegressor(n_basis=4, random_state=0).fit(X, y, checkpoint=ck, resume=True)
    assert not marker.exists()


@pytest.mark.parametrize("obj", [eval, getattr, __import__("subprocess").Popen, pickle.loads])
def test_dangerous_globals_are_refused(obj):
    with pytest.raises(UnsafePickleError, match="refusing to load"):
        restricted_loads(pickle.dumps(obj))


def test_kmp_dask_functions_outside_blockops_are_refused():
    from kmp_dask import save
    from kmp_dask.greedy._checkpoint import open_checkpoint

    for fn in (save, open_checkpoint):
        with pytest.raises(UnsafePickleError):
            restricted_loads(pickle.dumps(fn))


def test_fitted_state_round_trips():
    """What checkpoints and the pager write: a finished pursuit result with its expansion,
    kernels, losses and NumPy scalars."""
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(200, 3)), (rng.normal(size=200) > 0).astype(int)
    est = KMPClassifier(n_basis=5, loss="logistic", random_state=0).fit(X, y)
    back = restricted_loads(pickle.dumps((est.expansion_, est.loss_, np.float32(2.5), {1, 2}, slice(1, 3))))
    assert np.array_equal(back[0].decision_function(X), est.expansion_.decision_function(X))
    assert back[2].dtype == np.float32
