"""Sparse kernel PCA by matching pursuit (Hussain & Shawe-Taylor §3; Smola & Schölkopf's sparse
greedy matrix approximation), the driver side.

Each iteration scores candidate points by the variance along their deflated direction,
``Σ_x K̃(x, z)² / K̃(z, z)``, which is exactly the drop of the trace residual ``tr(K − LLᵀ)`` that
choosing ``z`` brings; the best one becomes a column of the pivoted partial Cholesky factor
(held by the partitions, :mod:`kmp_dask.blockops._kpca`). The driver holds the chosen rows and the
Cholesky factor of their Gram ``K_SS = L_SS L_SSᵀ``, from which any point's coordinates on the
columns are ``L(z) = L_SS⁻¹ k_S(z)`` and its residual ``k(z, z) − ‖L(z)‖²``: the candidates' state
is computed on the driver, never fetched.

One engine pass per selected point: it applies the previous choice (its column and the deflated
diagonal), scores this iteration's candidates, returns the trace residual and the largest residual
(the rank check), and fetches the rows of the next candidates (drawn beforehand from one seeded
generator; exact mode fetches all rows once). After the last choice one more pass returns the
moments ``Σ L``, ``Σ L Lᵀ`` from which the principal directions inside the span are computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ..blockops._kpca import KPCAColumn, KPCAScoreQuery, kpca_effects, kpca_moments, kpca_score
from ..linalg import IncrementalCholesky
from ._candidates import gather_rows
from ._sampling import RandomCandidates

__all__ = ["KPCAResult", "sparse_kernel_pca", "principal_directions"]

MAX_STALLS = 8


@dataclass
class KPCAResult:
    """``index`` (k,) chosen rows in order, ``vectors`` (k, d), ``L`` (k, k) Cholesky factor of
    their Gram, ``trace`` (k + 1,) trace residual after 0..k points (row 0: tr K), ``dmax``
    (k + 1,) largest residual, ``stop_reason``, ``n_passes``, ``seconds``, ``n_rows``;
    ``mean`` (k,) and ``gram`` (k, k): ``Σ L(x)/N`` and ``Σ L(x) L(x)ᵀ`` over the data."""

    index: np.ndarray
    vectors: np.ndarray
    L: np.ndarray
    trace: np.ndarray
    dmax: np.ndarray
    stop_reason: str
    n_passes: int
    seconds: float
    n_rows: int
    mean: np.ndarray | None = None
    gram: np.ndarray | None = None


def _coords(chol: IncrementalCholesky, kernel, S: list, Z: np.ndarray) -> np.ndarray:
    """``L(Z) = L_SS⁻¹ k_S(Z)`` (s, k)."""
    if not S:
        return np.zeros((len(Z), 0))
    KSZ = kernel(np.asarray(S), Z).astype(np.float64)
    return chol.solve_lower(KSZ).T


def sparse_kernel_pca(engine, *, kernel, n_rows: int, n_features: int, dtype, n_components: int,
                      candidates: int | None = None, random_state=None, rank_tol: float = 1e-10,
                      callback=None) -> KPCAResult:
    """Greedy selection of ``n_components`` points over the engine's partitions.

    ``candidates=None``: every row is a candidate in every iteration (exact; the driver holds all
    rows — small data only); an int ``s``: s random rows per iteration (the "59-trick").
    Stops early when the largest residual ``K̃(x, x)`` over all rows falls below
    ``rank_tol · max k(x, x)`` (the kernel matrix's numerical rank is reached).
    """
    t0 = time.perf_counter()
    rng = random_state if random_state is not None else np.random.default_rng(0)
    exact = candidates is None
    sampler = None if exact else RandomCandidates(n_rows, int(candidates))
    capacity = max(1, min(int(n_components), 4096))
    chol = IncrementalCholesky(capacity)
    S_rows: list[np.ndarray] = []
    S_index: list[int] = []
    dead: set[int] = set()
    traces, dmaxes = [], []
    # first pass: init, and the rows of the first candidates
    idx_next = np.arange(n_rows, dtype=np.int64) if exact else sampler.draw(rng, set())
    res = engine.run(kpca_score, KPCAScoreQuery(fetch=idx_next), (kpca_effects.init(kernel, capacity),))
    n_passes = 1
    kmax = max(r["dmax"] for r in res)
    idx, Z = idx_next, gather_rows(res, idx_next, n_features, dtype)
    LZ = np.zeros((len(idx), 0))  # exact mode: kept up to date on the driver
    effects: list = []
    reason, stalls = "n_components", 0
    while True:
        if not exact:
            LZ = _coords(chol, kernel, S_rows, Z)
        dz = np.asarray(kernel.diag(Z), dtype=np.float64) - np.einsum("ij,ij->i", LZ, LZ)
        idx_next = None if exact else sampler.draw(rng, set(S_index) | dead)
        res = engine.run(kpca_score, KPCAScoreQuery(Z, LZ, idx_next), effects)
        n_passes += 1
        effects = []
        traces.append(sum(r["trace"] for r in res))
        dmaxes.append(max(r["dmax"] for r in res))
        if len(S_index) >= n_components:
            break
        if dmaxes[-1] <= rank_tol * kmax:
            reason = "rank"
            break
        sq = np.sum([r["sq"] for r in res], axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(dz > rank_tol * kmax, sq / dz, -np.inf)
        taken = np.isin(idx, np.fromiter(set(S_index) | dead, dtype=np.int64, count=len(S_index) + len(dead)))
        score[taken] = -np.inf
        order = np.lexsort((idx, -score))
        pick = None
        for j in order[:8]:
            if not np.isfinite(score[j]):
                break
            cross = kernel(np.asarray(S_rows), Z[j : j + 1])[:, 0].astype(np.float64) if S_rows else np.zeros(0)
            if chol.append(cross, float(kernel.diag(Z[j : j + 1])[0])):
                pick = int(j)
                break
            dead.add(int(idx[j]))
        if pick is None:
            stalls += 1
            if exact or stalls >= MAX_STALLS:
                reason = "rank"
                break
            idx, Z = idx_next, gather_rows(res, idx_next, n_features, dtype)
            continue
        stalls = 0
        z, lz, d = Z[pick].copy(), LZ[pick].copy(), float(chol.L[-1, -1] ** 2)
        effects = [kpca_effects.add(KPCAColumn(z, lz, d, int(idx[pick])))]
        S_rows.append(z)
        S_index.append(int(idx[pick]))
        if exact:  # every row's coordinates on the new column, on the driver
            new = (kernel(Z, z[None, :])[:, 0].astype(np.float64) - LZ @ lz) / np.sqrt(d)
            LZ = np.hstack([LZ, new[:, None]])
        else:
            idx, Z = idx_next, gather_rows(res, idx_next, n_features, dtype)
        if callback is not None:
            callback({"iteration": len(S_index) - 1, "trace_residual": traces[-1] - score[pick],
                      "residual_norm": (traces[-1] - score[pick]) / traces[0] if traces[0] > 0 else 0.0})
    mom = engine.run(kpca_moments, None, effects)
    n_passes += 1
    n = sum(m["n"] for m in mom)
    k = len(S_index)
    total = np.sum([m["sum"] for m in mom], axis=0) if k else np.zeros(0)
    gram = np.sum([m["gram"] for m in mom], axis=0) if k else np.zeros((0, 0))
    return KPCAResult(np.asarray(S_index, dtype=np.int64), np.asarray(S_rows).reshape(k, n_features),
                      np.array(chol.L), np.asarray(traces), np.asarray(dmaxes), reason, n_passes,
                      time.perf_counter() - t0, n, total / max(n, 1), gram)


def principal_directions(result: KPCAResult):
    """Principal directions inside the span, sorted by variance: ``(eigenvalues, V, coef, offset)``.

    With coordinates ``L(x)`` centred by their mean ``μ``, the covariance ``C = Σ L Lᵀ / N − μμᵀ``
    has eigenpairs ``(λ_i, v_i)``; component i of a point is ``(L(x) − μ)·v_i
    = k_S(x)ᵀ (L_SS⁻ᵀ v_i) − μ·v_i``, a kernel expansion over the chosen points with
    coefficients ``L_SS⁻ᵀ V`` and intercept ``−μᵀV``. ``eigenvalues`` are ``N·λ_i`` (those of the
    centred kernel matrix, as scikit-learn's ``KernelPCA.eigenvalues_``).
    """
    n, mu = result.n_rows, result.mean
    C = result.gram / n - np.outer(mu, mu)
    w, V = np.linalg.eigh((C + C.T) / 2)
    order = np.argsort(w)[::-1]
    w, V = np.maximum(w[order], 0.0), V[:, order]
    coef = solve_triangular(result.L.T, V, lower=False) if len(mu) else np.zeros((0, 0))
    return w * n, V, coef, -(mu @ V)
