"""Reduced-set compression's drivers: the pursuit over an engine's pool and the chunking method's tree.

* :func:`compress_on_pool` — hyperplane matching pursuit over a pool held by an engine (the
  in-process engine for numpy pools without a cluster, one actor per worker otherwise): one
  init pass evaluates the expansion on the pool (the O(pool · n) pass), then one pass per
  selected vector.
* :func:`chunked_compression` — Weston & Bakır §3.6 as a tree: the expansion is cut into pieces
  of ``piece_vectors`` terms, each piece compressed (pool = its own vectors), the reduced pieces
  merged in groups of ``arity`` and compressed again, up a tree; the tree runs through the dask
  layer's :meth:`~kmp_dask.parallel.Tasks.tree_reduce` (on the workers, or in this process).

No dask here: engines and tasks come from the caller.
"""

from __future__ import annotations

import functools

import numpy as np

from ..blockops import Engine, RSSetup, rs_effects, rs_stats
from ..blockops._results import RSStats
from ..expansion import KernelExpansion
from ._configs import config_given
from ._hmp import run_hyperplane_pursuit
from ._hmp_config import HMPConfig

__all__ = ["compress_on_pool", "chunked_compression", "pool_rkhs_norms", "compress_piece"]


def pool_rkhs_norms(engine: Engine, expansion, pool_coef) -> np.ndarray:
    """Send the init effect (``f`` on the pool) and return ``‖w_j‖²`` (m,): from the pool when
    its rows are the expansion's own centres (``pool_coef``: their coefficients), else on the
    driver (O(n²) kernel values, blocked)."""
    setup = RSSetup(expansion.support_vectors, expansion.coef, expansion.kernels[0], pool_coef)
    stats = RSStats.combine(engine.run(rs_stats, None, [rs_effects.init(setup)]))
    if pool_coef is not None and all(stats.own):
        return np.add.reduce(list(stats.wsq))
    return expansion.rkhs_sqnorm()


def compress_on_pool(engine: Engine, expansion, pool_coef, config: HMPConfig | None = None, *, outputs_groups, seed=0,
                     callback=None, checkpoint=None, saved=None, **keywords):
    """Initialise the pool and run one pursuit per group of outputs (coupled: one group with all
    outputs; independent: one group per output). Returns ``(wsq, [HMPResult per group])``.
    ``criterion``: the selection score, ``"eq13"`` or ``"decrease"`` (backfitting only; the
    partitions then also track ``δ(z)``, see :func:`~kmp_dask.greedy._hmp.hyperplane_pursuit`).

    ``checkpoint``: an object whose ``bind(wsq=, group=, results=, engine=)`` gives the hook
    the pursuit calls after each iteration (the compressor's checkpoint, which saves the pursuit
    state with the engine's journal); ``saved``: such a saved state (``wsq``, ``group``, the
    finished groups' ``results``, the ``loop``, ``rng``, ``journal``) — its journal is replayed on
    this engine's fresh partitions (the init pass is not repeated) and the pursuit of its group
    continues: the same results as an uninterrupted run.

    ``config``: an :class:`~kmp_dask.greedy._hmp_config.HMPConfig` built by the caller (the
    compressor's routes), in place of ``n_rows``, ``n_vectors``, ``backfit``, ``candidates``,
    ``rkhs_tol`` and ``criterion`` (the expansion's kernel must be its ``kernel``)."""
    fixed = {"kernel": expansion.kernels[0]} if config is None else None  # the expansion's kernel
    config = config_given(HMPConfig, config, keywords, owner="compress_on_pool", fixed=fixed)
    rng = np.random.default_rng(seed)
    if saved is not None:
        engine.run(None, None, saved["journal"])  # fresh partitions → their state at the save
        rng.bit_generator.state = saved["rng"]
        wsq, results, first, loop = saved["wsq"], list(saved["results"]), int(saved["group"]), saved["loop"]
    else:
        wsq, results, first, loop = pool_rkhs_norms(engine, expansion, pool_coef), [], 0, None
    groups = [list(g) for g in outputs_groups]
    for g in range(first, len(groups)):
        group = groups[g]
        hook = None if checkpoint is None else checkpoint.bind(wsq=wsq, group=g, results=results, engine=engine)
        results.append(run_hyperplane_pursuit(engine, config, wsq=wsq[group], outputs=group, random_state=rng,
                                              callback=callback, checkpoint=hook, loop=loop if g == first else None))
    return wsq, results


def compress_piece(vectors, coef, kernel, n_vectors, criterion="eq13", local_engine=None):
    """Compress the expansion ``(vectors, coef)`` to ``n_vectors`` of its own vectors (coupled,
    backfitted, selected by ``criterion``) on ``local_engine(vectors)`` (an in-process engine over
    the rows: :func:`kmp_dask.parallel.local_engine`). Returns ``(vectors, coef)`` of the reduced
    piece."""
    vectors = np.asarray(vectors)
    if len(vectors) <= n_vectors:
        return vectors, np.asarray(coef)
    exp = KernelExpansion(vectors, coef, 0.0, kernel)
    config = HMPConfig(kernel, len(vectors), n_vectors, criterion=criterion)
    with local_engine(vectors) as engine:
        _, (res,) = compress_on_pool(engine, exp, exp.coef, outputs_groups=[range(exp.n_outputs)], config=config)
    return res.vectors, res.coef


def _merge(*pieces):
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _leaf(piece, kernel, n_vectors, criterion, local_engine):
    return compress_piece(*piece, kernel, n_vectors, criterion, local_engine)


def _merge_and_compress(kernel, n_vectors, criterion, local_engine, *pieces):
    return compress_piece(*_merge(*pieces), kernel, n_vectors, criterion, local_engine)


def chunked_compression(tasks, expansion, *, piece_vectors: int, keep: int, arity: int = 2,
                        timeout: float = 3600.0, criterion: str = "eq13"):
    """The chunking method (§3.6) as a tree of tasks; returns ``(vectors, coef)``.

    Level 0: pieces of ``piece_vectors`` consecutive terms, each compressed to ``keep``
    vectors. Each further level merges ``arity`` reduced pieces and compresses the union to
    ``keep`` again, until one piece is left. ``tasks``: a :class:`~kmp_dask.parallel.Tasks` (its
    tree reduction runs the tree on the cluster, or without a client in this process).
    ``criterion``: the pieces' selection score (as :func:`compress_on_pool`).
    """
    kernel = expansion.kernels[0]
    sv, coef = expansion.support_vectors, expansion.coef
    bounds = list(range(0, len(sv), int(piece_vectors))) + [len(sv)]
    pieces = [(sv[a:b], coef[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    # the kernel (a few numbers) travels inside each task, not as scattered data: a scattered
    # value is not recomputable, so a worker killed while holding a replica cancelled the tree
    # ("lost dependencies", 1 run in 3 of the killed-worker test); every task stays a pure function
    args = (kernel, keep, criterion, tasks.local_engine)
    try:
        return tasks.tree_reduce(functools.partial(_leaf, kernel=kernel, n_vectors=keep, criterion=criterion,
                                                   local_engine=tasks.local_engine),
                                 pieces, functools.partial(_merge_and_compress, *args), arity=arity, timeout=timeout)
    except TimeoutError:
        raise TimeoutError(
            f"chunked compression did not finish within {timeout:.0f} s; raise `timeout` (dask config "
            "kmp_dask.pass-timeout) or use larger pieces / fewer vectors per piece") from None
