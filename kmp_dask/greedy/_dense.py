"""A dense, in-memory kernel matching pursuit: the test oracle.

Written independently of the engine (full kernel matrix, ``numpy.linalg.solve`` on the Gram of
the selected columns, explicit projections), so agreement between the two is evidence, not
tautology. Only for small data: it holds the N × N kernel matrix.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dense_kmp"]


def dense_kmp(K, Y, *, n_basis, fit_mode="backfit", ridge=0.0, candidate_sets=None):
    """Matching pursuit on the columns of ``K`` (N × N) for targets ``Y`` (N × m).

    Parameters
    ----------
    K : ndarray (N, N)
        Kernel matrix over the training rows; column j is the atom centred on row j.
    Y : ndarray (N, m) or (N,)
        Targets (already centred if an intercept is wanted).
    n_basis : int
    fit_mode : {"basic", "backfit", "prefit"}
    ridge : float
        Absolute λ added to the Gram of the selected columns.
    candidate_sets : list of index arrays, optional
        Candidates per iteration (default: all columns every iteration).

    Returns
    -------
    indices : list of int
    coef : ndarray (n, m)
    residual_norms : list of float, after each iteration
    """
    K = np.asarray(K, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    N = K.shape[1]
    chosen: list[int] = []
    coef = np.zeros((0, Y.shape[1]))
    R = Y.copy()
    norms = []
    for t in range(n_basis):
        cand = np.arange(N) if candidate_sets is None else np.asarray(candidate_sets[t])
        cand = np.array([c for c in cand if c not in chosen], dtype=int)
        if len(cand) == 0:
            break
        D = K[:, cand]
        num = ((D.T @ R) ** 2).sum(axis=1)
        if fit_mode == "prefit" and chosen:
            B = K[:, chosen]
            G = B.T @ B + ridge * np.eye(len(chosen))
            P = B @ np.linalg.solve(G, B.T @ D)  # (ridge-)projection of the candidates
            den = (D * (D - P)).sum(axis=0) + ridge
        else:
            den = (D * D).sum(axis=0) + (ridge if fit_mode != "basic" else 0.0)
        score = np.where(den > 1e-12 * np.maximum((D * D).sum(axis=0), 1e-300), num / np.where(den > 0, den, 1), 0.0)
        j = int(cand[int(np.argmax(score))])
        d = K[:, j]
        chosen.append(j)
        if fit_mode == "basic":
            coef = np.vstack([coef, (d @ R / (d @ d))[None, :]])
        else:
            B = K[:, chosen]
            coef = np.linalg.solve(B.T @ B + ridge * np.eye(len(chosen)), B.T @ Y)
        R = Y - K[:, chosen] @ coef
        norms.append(float(np.linalg.norm(R)))
    return chosen, coef, norms
