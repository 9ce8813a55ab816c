"""The compressor's level type: one model size of a compression path, with every field declared.

A path is a list of :class:`_Level` (``ReducedSetCompressor._levels``), one per size. A route
(``_routes.py``) makes them from the pursuits' results (:func:`levels_from_pursuits`), the dense
baselines or the chunking tree (:func:`levels_from_fixed`); ``_build.py`` turns a level into a
model, exchanging its vectors first when asked (the exchanged level is kept in ``exchanged``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["_Level", "eval_positions", "exact_rkhs_error", "levels_from_fixed", "levels_from_pursuits"]


@dataclass(eq=False, repr=False)
class _Level:
    """One compression level: pool rows (or explicit vectors), coefficients (n, m), RKHS errors (m,).

    ``_coef`` may be a callable (solved on first use of :attr:`coef`: a path of n levels costs
    O(n³) to expand). The fields after ``vectors`` describe exchanges (``exchange=N``):
    ``exchanged`` is this level after single-vector exchanges (set once, when its model is first
    built); on that exchanged level ``is_exchanged`` is True, ``n_swaps`` counts its swaps,
    ``guarded`` says the exchange guard kept the greedy vectors, and ``built`` caches the kept
    model and its pool error, ``(key, KernelExpansion, error)``, for the fit's pool only (never
    saved: the key holds object ids).
    """

    index: np.ndarray
    _coef: np.ndarray | Callable[[], np.ndarray]
    rkhs_error: np.ndarray
    vectors: np.ndarray | None = None
    exchanged: _Level | None = None
    is_exchanged: bool = False
    n_swaps: int = 0
    guarded: bool = False
    built: tuple[Any, Any, float] | None = None

    def __post_init__(self):
        self.index = np.asarray(self.index, dtype=np.int64)
        if not callable(self._coef):
            self._coef = np.asarray(self._coef, dtype=np.float64)
        self.rkhs_error = np.asarray(self.rkhs_error, dtype=np.float64)

    @property
    def coef(self) -> np.ndarray:
        if callable(self._coef):
            self._coef = np.asarray(self._coef(), dtype=np.float64)
        return self._coef

    @property
    def n_vectors(self) -> int:
        return len(self.index)

    def unchanged(self, *, guarded: bool = False) -> _Level:
        """This level's vectors and coefficients as its own exchanged level (no swap made)."""
        return _Level(self.index, self.coef, self.rkhs_error, self.vectors, is_exchanged=True, guarded=guarded)

    def __getstate__(self):
        """Coefficients solved before a level is saved or pickled (a lazy solve is a closure)."""
        state = dict(self.__dict__)
        state["_coef"] = self.coef
        state.pop("built", None)  # a cache of the fit's pool (keyed by object ids): not saved
        return state

    _persist_state = __getstate__  # the open model format (kmp_dask.persist) asks for this


def pursuit_history(results) -> list:
    """The pursuits' per-iteration records as ``history_`` shows them: one pursuit's own, or every
    group's with its ``group`` (a checkpoint written before records carried none: empty)."""
    hist = [getattr(r, "history", []) for r in results]
    return hist[0] if len(hist) == 1 else [{**rec, "group": g} for g, h in enumerate(hist) for rec in h]


def levels_from_pursuits(results, groups, m) -> list[_Level]:
    """Levels of one coupled path, or of independent per-output paths run in step (level k:
    each output's first k vectors; the union is what a prediction evaluates)."""
    if len(results) == 1 and len(groups[0]) == m:
        return _coupled_levels(results[0])
    longest = max(r.n_levels for r in results)
    return [_union_level(results, groups, m, it) for it in range(1, longest)]


def _coupled_levels(res) -> list[_Level]:
    if res.backfit:  # level k: the first k vectors; coefficients solved when used
        return [_Level(res.index[:it], (lambda it=it: res.prefix_coef(it)[1]), res.rkhs_error[it],
                       res.vectors[:it]) for it in range(1, res.n_levels)]
    out = []
    pos = {i: k for k, i in enumerate(res.index.tolist())}
    for it in range(1, res.n_levels):
        index, coef = res.prefix_coef(it)
        vectors = res.vectors[[pos[i] for i in index.tolist()]]
        out.append(_Level(index, coef, res.rkhs_error[it], vectors))
    return out


def _union_level(results, groups, m, it) -> _Level:
    """Level ``it`` of independent pursuits: each output's first ``it`` vectors, on their union."""
    union, rows, per = [], {}, []
    for res in results:
        lvl = min(it, res.n_levels - 1)
        index, coef = res.prefix_coef(lvl)
        pos = {i: k for k, i in enumerate(res.index.tolist())}
        for i in index.tolist():
            if i not in rows:
                rows[i] = res.vectors[pos[i]]
                union.append(i)
        per.append((index, coef, res.rkhs_error[lvl]))
    where = {i: k for k, i in enumerate(union)}
    coef_all = np.zeros((len(union), m))
    err = np.zeros(m)
    for (index, coef, e), group in zip(per, groups, strict=True):
        for j_local, j in enumerate(group):
            coef_all[[where[i] for i in index.tolist()], j] = coef[:, j_local]
            err[j] = e[j_local]
    return _Level(np.asarray(union), coef_all, err, np.asarray([rows[i] for i in union]))


def exact_rkhs_error(exp, vecs, coef, wsq) -> np.ndarray:
    """``‖w − ŵ‖²`` per output for ``ŵ = Σ β_j φ(v_j)``: ``‖w‖² − 2 Σ β f(v) + βᵀ K_vv β``."""
    kernel = exp.kernels[0]
    vecs = np.asarray(vecs, dtype=np.float64)
    coef = np.asarray(coef, dtype=np.float64).reshape(len(vecs), -1)
    f = np.asarray(exp.with_coef(exp.coef, 0.0).decision_function(vecs)).reshape(len(vecs), -1)
    err = wsq - 2 * np.einsum("ij,ij->j", coef, f) + np.einsum("ij,ik,kj->j", coef, kernel(vecs, vecs), coef)
    return np.maximum(err, 0.0)


def levels_from_fixed(exp, vecs, coef, wsq) -> list[_Level]:
    """The chunking tree's result as one level (no refinement), with its exact RKHS error
    ``‖w‖² − 2 Σ β f(z) + βᵀ K_zz β``."""
    kernel = exp.kernels[0]
    vecs = np.asarray(vecs, dtype=np.float64)
    f = exp.with_coef(exp.coef, 0.0).decision_function(vecs)
    err = wsq - 2 * np.einsum("ij,ij->j", coef, f) + np.einsum("ij,ik,kj->j", coef, kernel(vecs, vecs), coef)
    return [_Level(np.arange(len(vecs)), coef, np.maximum(err, 0.0), vecs)]


def eval_positions(n: int, count: int = 50) -> list[int]:
    """Level positions at which labelled errors are computed: all when few, else ~count spread
    geometrically, always the last."""
    if n <= count:
        return list(range(n))
    pts = {int(round(x)) - 1 for x in np.geomspace(1, n, num=count)}
    pts.add(n - 1)
    return sorted(p for p in pts if 0 <= p < n)
