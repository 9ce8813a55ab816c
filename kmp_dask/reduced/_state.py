"""The compressor's route state: what the reduced/ internals read and write during one compression.

:class:`RouteState` is made by :class:`~kmp_dask.reduced.ReducedSetCompressor` from its parameters
once, at the start of ``fit`` (and, after it, for ``expansion_at``). The checks (``_checks.py``),
the routes (``_routes.py``), the level builder (``_build.py``) and the checkpoint's payloads
(``_saves.py``) take it instead of the estimator: they read the parameters and what the fit
handed over (the target, ``‖w‖²``, the path) from it and write what they find into it — the
pursuits' records, the engine kept open for exchanges on a store pool, the cache of the pool's
values and the chosen model. The estimator then copies its fitted attributes from the state, so
nothing under reduced/ reaches back up into the estimator.
"""

from __future__ import annotations

__all__ = ["PARAMS", "RouteState"]

PARAMS = ("n_vectors", "method", "backfit", "candidates", "coupled", "select", "rkhs_tol", "optimize_threshold",
          "chunk_vectors", "refine", "refit", "criterion", "exchange", "exchange_guard", "dense", "l0_gammas",
          "l1_alphas", "l0_step", "chunking", "random_state", "client", "verbose", "probability")
"""The compressor's parameters (its ``__init__``'s), copied into the state under the same names."""


class RouteState:
    """The parameters of one compression (:data:`PARAMS`, as attributes of the same names) and what
    its steps share.

    Given by the estimator: ``target`` (the :class:`~kmp_dask.reduced.CompressionTarget`),
    ``wsq`` (``‖w_j‖²``), ``path`` (the path's errors, for ``select="validation"``) and
    ``F_pool`` (the cached pool values ``f(z)``, or None). Written by the routes: ``results``,
    ``history`` and ``stop_reason`` (None: not set by this compression), ``xengine`` (the
    ``(engine, n_rows)`` kept open for exchanges on a store pool during ``fit``; None after it)
    and ``F_pool``. Written by the level builder: the chosen ``model`` (a KernelExpansion), its
    ``rkhs_error``, ``support_index`` and ``used_prefix``.
    """

    def __init__(self, params: dict, *, target=None, wsq=None, path=None, F_pool=None):
        for name in PARAMS:
            setattr(self, name, params[name])
        self.target, self.wsq, self.path, self.F_pool = target, wsq, path, F_pool
        self.xengine = None
        self.results = self.history = self.stop_reason = None
        self.model = self.rkhs_error = self.support_index = self.used_prefix = None

    @classmethod
    def of(cls, est, **given) -> RouteState:
        """The state of a compression by ``est`` (its parameters read once), with ``given`` fields."""
        return cls(est.get_params(deep=False), **given)
