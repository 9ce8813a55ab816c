"""The engine passes per iteration that docs/engine.md documents, asserted with the call counter.

Squared loss: one scoring pass + one commit pass per atom (backfit, prefit; basic pursuit has no
commit pass), plus the set-up passes (stats, init + first candidates), the intercept column's
commit (backfit / prefit) and one final pass that measures the final model. A pass is one round
trip to every worker, so this is the latency model of a fit.
"""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.kernels import get_kernel
from kmp_dask.losses import get_loss
from kmp_dask.parallel import InProcessEngine, partition_specs
from kmp_dask.store import InMemoryStore


def _fit(n_basis, **kw):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    y = np.sign(np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=500))
    eng = InProcessEngine(partition_specs(InMemoryStore(X, y, chunk_rows=128)))
    kw = {"targets": {"kind": "regression"}, "candidates": 30, "random_state": 0, "ridge": 1e-8, **kw}
    res = kernel_matching_pursuit(eng, kernel=get_kernel("rbf", gamma=1.0), n_rows=len(X), n_features=3,
                                  dtype=X.dtype, n_basis=n_basis, **kw)
    return eng, res


@pytest.mark.parametrize("mode, intercept_commit", [("backfit", 1), ("prefit", 1)])
def test_squared_loss_two_passes_per_atom(mode, intercept_commit):
    for n_basis in (5, 20):
        eng, res = _fit(n_basis, fit_mode=mode)
        assert len(res.basis_indices) == n_basis
        # stats + init, intercept commit, (score + commit) per atom, final measuring pass
        assert eng.n_calls == 2 + intercept_commit + 2 * n_basis + 1


def test_basic_pursuit_one_pass_per_atom():
    """Basic pursuit takes ⟨d,R⟩ and ‖d‖² of the chosen candidate from the scoring pass; its
    column is computed by the next pass's effects (no commit pass)."""
    for n_basis in (5, 20):
        eng, res = _fit(n_basis, fit_mode="basic")
        assert len(res.basis_indices) == n_basis
        # stats + init, one scoring pass per atom, final pass (pends, accepts and measures the last)
        assert eng.n_calls == 2 + n_basis + 1


def test_other_losses_bounded_passes_per_atom():
    """Line search: at most ``line_search_steps`` extra passes per atom (basic mode, no refits)."""
    loss = get_loss("logistic", kind="classification")
    eng, res = _fit(20, fit_mode="basic", loss=loss, targets={"kind": "ovr", "classes": [-1.0, 1.0]},
                    line_search_steps=3)
    n = len(res.history)
    assert n == 20
    assert 2 + 2 * n + 1 <= eng.n_calls <= 2 + (2 + 3) * n + 1
