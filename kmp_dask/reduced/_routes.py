"""The compressor's routes: where and how a compression path is computed.

Each route takes the fit's :class:`~kmp_dask.reduced._state.RouteState` (``route``: the
parameters), returns ``(levels, wsq)`` — the path as :class:`~kmp_dask.reduced._level._Level`
objects and ``‖w_j‖²`` — and records the pursuits in the state (``results``, ``history``,
``stop_reason``), from which the estimator takes its ``results_``, ``history_`` and
``stop_reason_``:

* **dense, in process** (:func:`dense_levels`): a numpy pool, no cluster, a small enough
  P × n_vectors — the pivoted-Cholesky pursuit ``greedy._hmp.dense_hyperplane_pursuit``;
* **engine** (:func:`engine_pursuit`): the pool partitioned on an engine — the in-process engine
  for a numpy pool, one actor per worker for a store or a cluster — one pass per vector
  (``greedy._hmp_setup.compress_on_pool``); with exchanges on a store pool the engine stays open
  for them (``route.xengine``, closed by ``fit``'s exit stack);
* **chunked** (inside :func:`hmp_levels`): the chunking method (§3.6) — the tree on the workers
  (``chunking="tree"``) or the paper's cycle through the pieces in this process
  (``"cyclic"``, ``_cyclic.py``) — then, with ``refine``, a pursuit against the full ``w`` over
  the vectors it kept;
* **baselines** (:func:`baseline_levels`): the dense ℓ0 / ℓ1 paths on the pool Gram.

:func:`hmp_levels` picks among the first three (and resumes a checkpointed pursuit where it
began).
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..estimators._progress import progress_callback
from ..greedy._hmp import dense_hyperplane_pursuit
from ..greedy._hmp_config import HMPConfig
from ..greedy._hmp_setup import chunked_compression, compress_on_pool
from ..greedy._sampling import resolve_candidates
from ..parallel._session import client_session, engine_on, engine_session, task_session
from ..store import InMemoryStore
from ._cyclic import cyclic_chunking
from ._level import _Level, levels_from_fixed, levels_from_pursuits, pursuit_history
from ._saves import PursuitSaver

__all__ = ["DENSE_HMP_LIMIT", "DENSE_POOL_LIMIT", "baseline_levels", "hmp_levels", "pool_values"]

#: ``dense="auto"`` runs the pursuit in this process (no engine) when the pool is a numpy array,
#: no cluster is asked for and its P × n_vectors float64 work array stays below this many values
DENSE_HMP_LIMIT = 32_000_000

#: the dense baselines build the pool Gram (P × P float64): refuse pools above this size
DENSE_POOL_LIMIT = 20_000


def hmp_levels(route, exp, store, rows, pool_coef, in_memory, n_vectors, groups, fit_stack=None, ckpt=None):
    """Hyperplane matching pursuit's path: in process, on the engine, or after the chunking tree.

    ``n_vectors``: the compressed size asked for (the path runs to it, or with ``select="rkhs_tol"``
    to at least one vector, capped by the pool); ``fit_stack``: fit's exit stack (None outside a fit)."""
    seed = _pursuit_seed(route)
    saved = None if ckpt is None else ckpt.restore_payload()
    saver = None if ckpt is None else PursuitSaver(ckpt, {} if saved is None or "tree" not in saved
                                                   else {"tree": saved["tree"]})
    if saved is not None and saved["stage"] == "path":  # the pursuit had ended
        return _resume_path(route, saved, store, in_memory, groups, exp.n_outputs, fit_stack)
    in_pursuit = saved if saved is not None and saved["stage"] == "pursuit" else None
    cb, bar = progress_callback(route.verbose, n_vectors * len(groups), desc="reduced set", unit="vector")
    if route.select != "n_vectors":
        n_vectors = min(store.n_rows, max(n_vectors, 1))
    run = _PursuitRun(exp, groups, seed, cb, bar, saver, in_pursuit)
    if _starts_dense(route, rows, store, n_vectors, in_pursuit):  # in process, no client needed
        return dense_levels(route, run, rows, pool_coef, min(n_vectors, store.n_rows))
    # exchange on a store pool: the client and the engine outlive this call (closed by fit's stack)
    on_engine = bool(route.exchange) and rows is None and fit_stack is not None
    with contextlib.ExitStack() as local:
        owner = fit_stack if on_engine else local
        if route.chunk_vectors is not None:
            tasks = owner.enter_context(task_session(route.client, in_memory=in_memory))
            vecs, tree_coef = _tree_vectors(route, tasks, exp, n_vectors, saver, ckpt)
            if not route.refine:
                wsq = exp.rkhs_sqnorm()
                route.stop_reason = "chunk_tree" if route.chunking == "tree" else "chunk_cyclic"
                return levels_from_fixed(exp, vecs, tree_coef, wsq), wsq
            store, rows, pool_coef = InMemoryStore(np.ascontiguousarray(vecs)), np.ascontiguousarray(vecs), None
            client = None  # the refinement pool is small: in this process
        else:
            client = owner.enter_context(client_session(route.client, in_memory=in_memory))
        use_dense = _use_dense(route, client, rows, min(n_vectors, store.n_rows), route.chunk_vectors is not None)
        if in_pursuit is not None:
            use_dense = in_pursuit["dense"]
        if use_dense:
            return dense_levels(route, run, rows, pool_coef, min(n_vectors, store.n_rows))
        return engine_pursuit(route, run, client, store, pool_coef, n_vectors, owner, on_engine)


class _PursuitRun:
    """What every pursuit route shares: the expansion, the output groups, the seed, the progress
    callback and bar, the checkpoint saver and a saved pursuit state to resume (or None)."""

    def __init__(self, exp, groups, seed, cb, bar, saver, saved):
        self.exp, self.groups, self.seed, self.cb, self.bar = exp, groups, seed, cb, bar
        self.saver, self.saved = saver, saved

    def close_bar(self):
        if self.bar is not None:
            self.bar.close()


def _record(route, results, groups, m):
    """The pursuits' results and their per-iteration records in the route state; the path's levels."""
    route.results = results
    route.history = pursuit_history(results)
    route.stop_reason = results[0].stop_reason if len(results) == 1 else [r.stop_reason for r in results]
    return levels_from_pursuits(results, groups, m)


def _pursuit_seed(route) -> int:
    """The pursuit's seed, drawn from ``random_state``."""
    return int(np.random.RandomState(route.random_state).randint(0, 2**31 - 1)) if not isinstance(
        route.random_state, np.random.RandomState) else int(route.random_state.randint(0, 2**31 - 1))


def _starts_dense(route, rows, store, n_vectors, in_pursuit) -> bool:
    """Whether the pursuit runs in this process from the start (no client, no chunking tree);
    a resumed pursuit runs where it began."""
    dense_first = route.chunk_vectors is None and route.client is None and _use_dense(
        route, None, rows, min(n_vectors, store.n_rows), False)
    if in_pursuit is not None and route.chunk_vectors is None:
        dense_first = in_pursuit["dense"]  # a resumed pursuit runs where it began (client is not checked)
    return dense_first


def _use_dense(route, client, rows, n_vectors, refining) -> bool:
    ok = rows is not None and bool(route.backfit) and (client is None or refining)
    if route.dense is True:
        if not ok:
            raise ValueError("dense=True needs a numpy pool, backfit=True and no cluster (client=None)")
        return True
    return route.dense == "auto" and ok and len(rows) * max(n_vectors, 1) <= DENSE_HMP_LIMIT


def _tree_vectors(route, tasks, exp, n_vectors, saver, ckpt):
    """The chunking method's vectors and coefficients (the tree on the workers, or the paper's
    cyclic form in this process): from the checkpoint when it had finished, else computed (and
    saved)."""
    if saver is not None and "tree" in saver.extra:  # the tree had finished: not run again
        return saver.extra["tree"]
    if route.chunking == "cyclic":  # the paper's cycle through the pieces, in this process
        res = cyclic_chunking(exp, piece_vectors=int(route.chunk_vectors), keep=n_vectors, criterion=route.criterion)
        vecs, tree_coef = res.vectors, res.coef
    else:
        vecs, tree_coef = chunked_compression(tasks, exp, piece_vectors=int(route.chunk_vectors),
                                              keep=n_vectors, criterion=route.criterion)
    if saver is not None:
        saver.extra["tree"] = (vecs, tree_coef)
        ckpt.save_payload({"stage": "tree", "tree": (vecs, tree_coef)}, stage="tree")
    return vecs, tree_coef


def hmp_config(route, kernel, n_rows, n_vectors, backfit=None) -> HMPConfig:
    """The pursuit's configuration from the compressor's parameters (built once per route):
    ``rkhs_tol`` only with ``select="rkhs_tol"``, ``candidates`` resolved ("all" → None); without
    backfitting ``criterion="decrease"`` is eq. 13's score (the basic step's exact decrease)."""
    backfit = bool(route.backfit) if backfit is None else backfit
    return HMPConfig(kernel, n_rows, n_vectors, backfit,
                     resolve_candidates(route.candidates), float(route.rkhs_tol) if route.select == "rkhs_tol" else 0.0,
                     criterion=route.criterion if backfit else "eq13")


def engine_pursuit(route, run, client, store, pool_coef, n_vectors, owner, on_engine):
    """The pursuit on the engine over ``store``; ``owner`` closes the engine (fit's stack when
    exchanges will run on it, which it then keeps in ``route.xengine``)."""
    config = hmp_config(route, run.exp.kernels[0], store.n_rows, min(n_vectors, store.n_rows))
    engine = owner.enter_context(engine_on(client, store))
    try:
        wsq, results = compress_on_pool(engine, run.exp, pool_coef, outputs_groups=run.groups, seed=run.seed,
                                        callback=run.cb, checkpoint=run.saver, saved=run.saved, config=config)
    finally:
        run.close_bar()
    if on_engine:
        route.xengine = (engine, store.n_rows)
    if run.saver is not None:
        run.saver.save_path(wsq, results, dense=False, engine=engine)
    return _record(route, results, run.groups, run.exp.n_outputs), wsq


def _resume_path(route, saved, store, in_memory, groups, m, fit_stack):
    """A checkpoint saved when the pursuit had ended: its path; with exchanges on a store pool
    the engine is rebuilt (journal replayed) so that they run on the pursuit's partitions."""
    if route.exchange and saved.get("journal") is not None and fit_stack is not None:
        engine = fit_stack.enter_context(engine_session(route.client, store, in_memory=in_memory))
        engine.run(None, None, saved["journal"])  # fresh partitions → their state when the pursuit ended
        route.xengine = (engine, store.n_rows)
    return _record(route, list(saved["results"]), groups, m), saved["wsq"]


def pool_values(route, exp, rows) -> np.ndarray:
    """``f(z)`` (P, m) of the expansion without intercept at the numpy pool rows (cached in
    ``route.F_pool``, which the estimator keeps as ``_F_pool``)."""
    if route.F_pool is None or len(route.F_pool) != len(rows):
        X64 = np.asarray(rows, dtype=np.float64)
        route.F_pool = np.asarray(exp.with_coef(exp.coef, 0.0).decision_function(X64), dtype=np.float64)
    return route.F_pool.reshape(len(rows), -1)


def dense_levels(route, run, rows, pool_coef, n_vectors):
    """The in-process pursuit's levels (the progress bar closed either way)."""
    try:
        wsq, results = _dense_hmp(route, run, rows, pool_coef, n_vectors)
    finally:
        run.close_bar()
    if run.saver is not None:
        run.saver.save_path(wsq, results, dense=True)
    return _record(route, results, run.groups, run.exp.n_outputs), wsq


def _dense_hmp(route, run, rows, pool_coef, n_vectors):
    exp = run.exp
    config = hmp_config(route, exp.kernels[0], len(rows), n_vectors, backfit=True)
    F = pool_values(route, exp, rows)
    own = pool_coef is not None and np.array_equal(np.asarray(rows, dtype=np.float64),
                                                   np.asarray(exp.support_vectors, dtype=np.float64))
    wsq = np.einsum("ij,ij->j", np.asarray(pool_coef, dtype=np.float64), F) if own else exp.rkhs_sqnorm()
    rng = np.random.default_rng(run.seed)
    results, first, state = [], 0, None
    if run.saved is not None:  # a checkpointed pursuit: its finished groups, its RNG, the group's state
        rng.bit_generator.state = run.saved["rng"]
        results, first, state = list(run.saved["results"]), int(run.saved["group"]), run.saved["loop"]
    for i in range(first, len(run.groups)):
        g = list(run.groups[i])
        hook = None if run.saver is None else run.saver.bind(wsq=wsq, group=i, results=results)
        results.append(dense_hyperplane_pursuit(rows, F=F[:, g], wsq=wsq[g], random_state=rng, callback=run.cb,
                                                checkpoint=hook, run=state if i == first else None, config=config))
    return wsq, results


def baseline_levels(route, exp, rows, pool_coef, coupled):
    """The dense ℓ0 / ℓ1 baselines' path on the pool Gram (O(P³); numpy pools only)."""
    from ._sparse import l0_path, l1_path

    if rows is None:
        raise ValueError(f"method={route.method!r} builds the dense pool Gram: X_pool must be a numpy array "
                         "(a store pool needs method='hmp')")
    if len(rows) > DENSE_POOL_LIMIT:
        raise ValueError(f"method={route.method!r} needs the {len(rows)} x {len(rows)} pool Gram (O(P³) time); "
                         f"use method='hmp' for pools above {DENSE_POOL_LIMIT} rows")
    kernel = exp.kernels[0]
    X64 = rows.astype(np.float64)
    Kzz = kernel(X64, X64)
    f = exp.with_coef(exp.coef, 0.0).decision_function(X64)
    own = pool_coef is not None and np.array_equal(X64, exp.support_vectors.astype(np.float64))
    wsq = np.einsum("ij,ij->j", pool_coef, f) if own else exp.rkhs_sqnorm()
    if route.method == "l1":
        sparse = l1_path(Kzz, f, wsq, coupled=coupled, alphas=route.l1_alphas, n_levels=None)
    else:
        sparse = l0_path(Kzz, f, wsq, coupled=coupled, gammas=route.l0_gammas, n_levels=None, max_iter=300,
                         step=route.l0_step)
    levels = [_Level(lv.support, lv.coef, lv.rkhs_error) for lv in sparse if lv.n_vectors > 0]
    if not levels:
        raise ValueError(f"method={route.method!r} found no non-empty level; widen its parameter grid")
    return levels, wsq
