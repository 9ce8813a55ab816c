"""Reduced-set compression of fitted kernel models: :class:`ReducedSetCompressor` and :func:`compress`.

A fitted model (scikit-learn ``SVC``/``NuSVC``/``SVR``/``NuSVR``/``KernelRidge``, a kmp_dask
model, or a :class:`~kmp_dask.KernelExpansion`) is turned into ``w = Σ_i α_i φ(x_i)`` with m
outputs (:func:`~kmp_dask.reduced.as_compression_target`; one-vs-one SVCs give one output per
pair of classes) and approximated by ``ŵ = Σ_{j∈S} β_j φ(z_j)`` over a candidate pool (default:
the model's own support vectors / training points).

Methods (``method=``):

* ``"hmp"`` — hyperplane matching pursuit (:mod:`kmp_dask.greedy._hmp`), on the engine: the pool
  is partitioned like any data set, one pass evaluates ``f`` on it, then one pass per vector.
  ``backfit=True`` re-optimises all coefficients through the incremental Cholesky factor (the
  paper's setting); ``candidates=s`` is the probabilistic search; multi-output models use the
  coupled criterion (eq. 13: one set of vectors for all outputs) unless ``coupled=False``.
  One run gives the whole path: every level's model is exact (``K_ss⁻¹ f(s)``).
* ``"l0"`` / ``"l1"`` — the paper's baselines on the dense pool Gram
  (:mod:`kmp_dask.reduced._sparse`): O(P³), for pools up to a few thousand points.
* ``chunk_vectors=c`` (with ``"hmp"``) — the chunking method (§3.6) as a dask task graph
  (:func:`kmp_dask.greedy._hmp_setup.chunked_compression`), followed, with ``refine=True``, by a
  pursuit against the full ``w`` over the union of the vectors the tree kept.

A level is chosen by size (``n_vectors``), RKHS tolerance (``select="rkhs_tol"``) or validation
error (``select="validation"``, needs ``X_val, y_val``). For classifiers the thresholds are
re-optimised on training error (``optimize_threshold=True``, needs labels ``y`` for the pool
rows), as the paper does. ``path_`` records every level.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..estimators._inputs import is_dask_array, is_store_like
from ..estimators._progress import progress_callback
from ..expansion import KernelExpansion
from ..greedy._checkpoint import open_checkpoint
from ..greedy._exchange import engine_exchange, exchange_vectors
from ..greedy._hmp import dense_hyperplane_pursuit
from ..greedy._hmp_setup import chunked_compression, compress_on_pool
from ..parallel import Tasks, make_engine, resolve_client
from ..store import InMemoryStore, as_store
from ._models import CompressionTarget, _ovr_transform, as_compression_target

__all__ = ["ReducedSetCompressor", "compress", "best_threshold", "METHODS", "SELECT", "REFIT"]

METHODS = ("hmp", "l0", "l1")
SELECT = ("n_vectors", "rkhs_tol", "validation")
REFIT = ("rkhs", "pool")

#: ``dense="auto"`` runs the pursuit in this process (no engine) when the pool is a numpy array,
#: no cluster is asked for and its P × n_vectors float64 work array stays below this many values
DENSE_HMP_LIMIT = 32_000_000

#: the dense baselines build the pool Gram (P × P float64): refuse pools above this size
DENSE_POOL_LIMIT = 20_000


def best_threshold(F: np.ndarray, labels: np.ndarray) -> float:
    """The offset ``b`` minimising the errors of ``sign(F + b)`` against ±1 ``labels``; among
    equally good offsets 0 (the model's own threshold) when it is one of them, else the one
    closest to 0 (a midpoint between two decision values)."""
    F = np.asarray(F, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if len(F) == 0:
        return 0.0
    Fs = np.sort(F, kind="stable")
    ls = labels[np.argsort(F, kind="stable")]
    # cut i: rows with F > t are predicted +1, for t in [lo_i, hi_i) = [Fs[i-1], Fs[i])
    pos_before = np.concatenate([[0], np.cumsum(ls > 0)])
    neg_after = np.sum(ls < 0) - np.concatenate([[0], np.cumsum(ls < 0)])
    errors = (pos_before + neg_after).astype(np.float64)
    lo = np.concatenate([[-np.inf], Fs])
    hi = np.concatenate([Fs, [np.inf]])
    errors[hi <= lo] = np.inf  # no threshold separates equal values
    best = np.flatnonzero(errors == errors.min())
    if np.any((lo[best] <= 0) & (0 < hi[best])):
        return 0.0
    lo_b, hi_b = lo[best], hi[best]
    cuts = np.where(np.isinf(lo_b), hi_b - 1.0, np.where(np.isinf(hi_b), lo_b + 1.0, 0.5 * (lo_b + hi_b)))
    return float(-cuts[np.argmin(np.abs(cuts))])


def _check_int_or_fraction(name, value, *, allow_none):
    if value is None and allow_none:
        return
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < 1:
        return
    raise ValueError(
        f"{name} must be an int >= 1 (a number of vectors) or a float in (0, 1) (a fraction of the "
        f"model's expansion){' or None' if allow_none else ''}; got {value!r}")


class ReducedSetCompressor(BaseEstimator):
    """Compress a fitted kernel model into a few of its (or a pool's) vectors — Weston & Bakır.

    Parameters
    ----------
    n_vectors : int or float, default=0.2
        Size of the compressed model: a number of vectors, or a fraction of the model's
        expansion size. With ``select="rkhs_tol"`` / ``"validation"`` it is the longest path.
    method : {"hmp", "l0", "l1"}, default="hmp"
        Hyperplane matching pursuit (on the engine), or the dense ℓ0 / ℓ1 baselines.
    backfit : bool, default=True
        Re-optimise all coefficients after each selection (eq. 7) — ``"hmp"`` only.
    candidates : int or None, default=None
        Probabilistic search: score this many random pool points per iteration (59 gives, with
        probability 0.95, a point among the best 5%). None: all of them.
    coupled : bool or "auto", default="auto"
        Multi-output models: one shared set of vectors for all outputs (eq. 13), or one set per
        output. "auto": coupled.
    select : {"n_vectors", "rkhs_tol", "validation"}, default="n_vectors"
        How the level is chosen: the size, the first level with ``‖w − ŵ‖² ≤ rkhs_tol · ‖w‖²``,
        or the level with the lowest validation error (needs ``X_val, y_val`` in ``fit``).
    rkhs_tol : float, default=1e-3
        Relative RKHS tolerance for ``select="rkhs_tol"``.
    optimize_threshold : bool, default=True
        Classifiers: re-choose each output's threshold to minimise the training error on the
        labelled pool (``y`` in ``fit``); without ``y`` the model's own thresholds are kept.
    chunk_vectors : int or None, default=None
        The chunking method: compress pieces of this many terms on the workers, merge up a tree.
    refine : bool, default=True
        After the chunking tree, one pursuit against the full ``w`` over the vectors it kept.
    refit : {"rkhs", "pool"}, default="rkhs"
        Coefficients of each level on its selected vectors: ``"rkhs"`` the paper's
        ``β = K_SS⁻¹ f(S)`` (minimises ``‖w − ŵ‖²``); ``"pool"`` least squares of the model's
        values on the pool rows, ``β = argmin Σ_z (f(z) − f̂(z))²`` (matches the decision
        function where the data are rather than in the whole RKHS; needs a numpy pool — pass the
        training rows). The selection is the same; ``rkhs_error`` stays the selection's.
    criterion : {"eq13", "decrease"}, default="eq13"
        ``"hmp"`` selection score: the paper's ``Σ_j r_j(z)² / k(z, z)`` (eq. 13), or
        ``Σ_j r_j(z)² / δ(z)`` — the exact fall of ``‖w − ŵ‖²`` when z joins with backfitting
        (``δ``: the part of φ(z) orthogonal to the chosen vectors). "decrease" needs
        ``backfit=True``; it runs in process and on the engine (store pools, clusters) alike.
    exchange : int, default=0
        ``"hmp"``: at most this many sweeps of single-vector exchanges applied to a level's
        vectors when its model is built (``expansion_``, ``expansion_at``, the path's labelled
        errors): each position is swapped for the pool row that lowers ``‖w − ŵ‖²`` most (all
        coefficients re-optimised) while that strictly lowers it. The greedy path's early
        choices are not the best set of k vectors: on hard expansions this lowers the RKHS error
        of a level by up to ~4× (docs/reduced.md). 0: the greedy path as it is (the paper's).
        A numpy pool is exchanged in this process; a store pool (or zarr path) on the pursuit's
        engine (in process or on the cluster: same swaps), during ``fit`` only — ``expansion_at``
        then refuses a level that was not exchanged in ``fit``. Coupled selection only. A level
        is then no longer the path's first k vectors, and ``path_``'s ``rkhs_error`` stays the
        greedy path's (``rkhs_error_`` is the model's own).
    exchange_guard : bool, default=True
        With ``exchange`` and labels for a numpy pool (``y`` in ``fit``): keep a level's exchanged
        vectors only when its error on the labelled pool (training error with re-fitted
        thresholds; mean squared error for regressors) is not above the greedy level's, else use
        the greedy level. With very few vectors the RKHS optimum can classify worse (image* at
        3 vectors: docs/reduced.md "Exchanges"). False: always the exchanged vectors.
    dense : bool or "auto", default="auto"
        ``"hmp"``: run the pursuit in this process on the pool as one array (a pivoted incomplete
        Cholesky, no engine passes) — same path as the engine to rounding, much less overhead per
        vector on small pools. "auto": when the pool is a numpy array, ``client`` is None and
        P × n_vectors ≤ 3.2·10⁷; False: always the engine.
    l0_gammas, l1_alphas : array-like or None
        Parameter grids of the dense baselines (None: their defaults).
    random_state : int, RandomState or None
        Seeds the probabilistic search.
    client : None, "embedded", "sync", address or distributed.Client
        Where the pool's partitions live (as for the KMP estimators). None with numpy input: in
        this process.
    verbose : int, default=0
        Progress bar over the selected vectors.

    Attributes
    ----------
    expansion_ : KernelExpansion — the compressed model (with its thresholds as intercept)
    target_ : CompressionTarget — the model as an expansion and how its outputs are decided
    n_vectors_ : int — vectors (kernel evaluations per prediction) of the compressed model
    rkhs_error_ : ndarray (m,) — ``‖w_j − ŵ_j‖²`` of the chosen level
    path_ : list of dict — per level: ``n_vectors``, ``rkhs_error`` (summed over outputs),
        ``rkhs_error_rel``, and ``train_error`` / ``val_error`` when labelled data were given
        (error rate for classifiers with re-optimised thresholds, mean squared error otherwise)
    wsq_ : ndarray (m,) — ``‖w_j‖²``
    seconds_ : float — time of the selection itself (the path), excluding error evaluation
    classes_ : ndarray — the model's classes (classifiers)
    """

    def __init__(self, n_vectors=0.2, *, method="hmp", backfit=True, candidates=None, coupled="auto",
                 select="n_vectors", rkhs_tol=1e-3, optimize_threshold=True, chunk_vectors=None, refine=True,
                 refit="rkhs", criterion="eq13", exchange=0, exchange_guard=True, dense="auto", l0_gammas=None, l1_alphas=None, random_state=None, client=None,
                 verbose=0):
        self.n_vectors = n_vectors
        self.method = method
        self.backfit = backfit
        self.candidates = candidates
        self.coupled = coupled
        self.select = select
        self.rkhs_tol = rkhs_tol
        self.optimize_threshold = optimize_threshold
        self.chunk_vectors = chunk_vectors
        self.refine = refine
        self.refit = refit
        self.criterion = criterion
        self.exchange = exchange
        self.exchange_guard = exchange_guard
        self.dense = dense
        self.l0_gammas = l0_gammas
        self.l1_alphas = l1_alphas
        self.random_state = random_state
        self.client = client
        self.verbose = verbose

    # -- parameters and inputs ---------------------------------------------------------------
    def _check_params(self):
        _check_int_or_fraction("n_vectors", self.n_vectors, allow_none=False)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        if self.select not in SELECT:
            raise ValueError(f"select must be one of {SELECT}; got {self.select!r}")
        if self.refit not in REFIT:
            raise ValueError(f"refit must be one of {REFIT}; got {self.refit!r}")
        if self.criterion not in ("eq13", "decrease"):
            raise ValueError(f"criterion must be 'eq13' or 'decrease'; got {self.criterion!r}")
        if self.criterion != "eq13" and (self.method != "hmp" or not self.backfit):
            raise ValueError(f"criterion='decrease' works with method='hmp' and backfit=True; got "
                             f"method={self.method!r}, backfit={self.backfit!r} (use criterion='eq13')")
        if not (isinstance(self.exchange, numbers.Integral) and not isinstance(self.exchange, bool)
                and self.exchange >= 0):
            raise ValueError(f"exchange must be an int >= 0 (sweeps of single-vector exchanges; 0: off); "
                             f"got {self.exchange!r}")
        if not isinstance(self.exchange_guard, (bool, np.bool_)):
            raise ValueError(f"exchange_guard must be True or False; got {self.exchange_guard!r}")
        if self.exchange and (self.method != "hmp" or not self.backfit or self.chunk_vectors is not None):
            raise ValueError("exchange works with method='hmp', backfit=True and no chunking tree "
                             f"(chunk_vectors=None); got method={self.method!r}, backfit={self.backfit!r}, "
                             f"chunk_vectors={self.chunk_vectors!r}")
        if self.dense not in ("auto", True, False):
            raise ValueError(f"dense must be True, False or 'auto'; got {self.dense!r}")
        if self.coupled not in ("auto", True, False):
            raise ValueError(f"coupled must be True, False or 'auto'; got {self.coupled!r}")
        if self.candidates is not None and not (isinstance(self.candidates, numbers.Integral) and self.candidates >= 1):
            raise ValueError(f"candidates must be None or an int >= 1 (random pool points per iteration); "
                             f"got {self.candidates!r}")
        if not (isinstance(self.rkhs_tol, numbers.Real) and 0 <= self.rkhs_tol < 1):
            raise ValueError(f"rkhs_tol must be a float in [0, 1) (relative to ‖w‖²); got {self.rkhs_tol!r}")
        if self.chunk_vectors is not None:
            if self.method != "hmp":
                raise ValueError(f"chunk_vectors works with method='hmp' only; got method={self.method!r}")
            if not (isinstance(self.chunk_vectors, numbers.Integral) and self.chunk_vectors >= 2):
                raise ValueError(f"chunk_vectors must be None or an int >= 2; got {self.chunk_vectors!r}")
        if self.method != "hmp" and self.candidates is not None:
            raise ValueError(f"candidates (probabilistic search) works with method='hmp' only; got method={self.method!r}")

    def _pool(self, target: CompressionTarget, X_pool):
        """(store, numpy rows or None, pool_coef or None, in_memory)"""
        exp = target.expansion
        if X_pool is None:
            rows = np.ascontiguousarray(exp.support_vectors)
            return InMemoryStore(rows), rows, exp.coef, True
        if is_store_like(X_pool):
            store = as_store(X_pool)
            self._check_width(store.n_features, exp)
            # the store may hold the expansion's own centres (a model trained on it): each
            # partition checks, and ‖w‖² is then a pass instead of O(n²) on the driver
            own = exp.coef if store.n_rows == exp.n_vectors else None
            return store, None, own, False
        if is_dask_array(X_pool):
            raise TypeError("X_pool as a dask array: write it to a store first (kmp_dask.store.store_from_dask) "
                            "and pass the store or its path")
        rows = np.asarray(X_pool)
        if rows.ndim != 2:
            raise ValueError(f"X_pool must be 2-D (n_candidates, n_features); got shape {rows.shape}")
        if rows.dtype.kind not in "fiu" or not np.all(np.isfinite(rows)):
            raise ValueError("X_pool must be finite numbers (no NaN / inf, no text)")
        self._check_width(rows.shape[1], exp)
        rows = np.ascontiguousarray(rows, dtype=np.float32 if rows.dtype == np.float32 else np.float64)
        own = exp.coef if len(rows) == exp.n_vectors else None  # checked per partition (as for stores)
        return InMemoryStore(rows), rows, own, True

    @staticmethod
    def _check_width(n_features, exp):
        if n_features != exp.n_features:
            raise ValueError(
                f"X_pool has {n_features} features but the model's support vectors have {exp.n_features}; "
                "pass candidate rows in the model's feature space (the rows it was trained on)")

    def _resolve_size(self, n_terms: int, n_pool: int) -> int:
        n = self.n_vectors
        k = int(n) if isinstance(n, numbers.Integral) else max(1, int(round(n * n_terms)))
        if k > n_pool:
            raise ValueError(
                f"n_vectors={self.n_vectors!r} asks for {k} vectors but the candidate pool has only {n_pool} rows; "
                "pass a smaller n_vectors or a larger X_pool")
        return k

    # -- fit ---------------------------------------------------------------------------------
    def fit(self, model, X_pool=None, y=None, *, X_val=None, y_val=None, checkpoint=None, checkpoint_every=10,
            resume=False):
        """Compress ``model`` (a fitted kernel model or a KernelExpansion).

        Parameters
        ----------
        model : fitted SVC, NuSVC, SVR, NuSVR, KernelRidge, KMPClassifier, KMPRegressor or KernelExpansion
        X_pool : array (P, d), store or path, optional
            Candidate vectors (default: the model's own support vectors / training points).
        y : array (P,), optional
            Labels / targets of the pool rows: threshold re-optimisation and ``train_error``.
        X_val, y_val : arrays, optional
            Held-out data for ``val_error`` along the path and ``select="validation"``.
        checkpoint : str, path or None
            A directory where the compression's state is saved (the pursuit every
            ``checkpoint_every`` vectors and after its last, the path when the pursuit ends, the
            result when the fit ends; the final checkpoint is kept). A checkpoint already there is
            never overwritten: pass ``resume=True`` to continue it (the compressed model is then
            identical to an uninterrupted fit's; a complete checkpoint gives it without any
            pursuit), or remove it. Its header holds the parameters, the pool's fingerprint and
            digests of the model and of ``y`` / ``X_val`` / ``y_val``, checked before the file is
            read. The file is a pickle: resume only your own checkpoints (docs/reduced.md).
        checkpoint_every : int, default=10
            Selected vectors between two saves of the pursuit.
        resume : bool, default=False
            Continue the checkpoint in ``checkpoint``; with none there, the fit starts from scratch.
        """
        self._check_params()
        target = as_compression_target(model)
        exp = target.expansion
        self._check_target(exp, X_pool, y, X_val, y_val)
        store, rows, pool_coef, in_memory, n_keep = self._prepare_pool(target, exp, X_pool, y)
        m = exp.n_outputs
        coupled, groups = self._output_groups(m)
        ckpt = self._open_fit_checkpoint(target, store, X_pool, y, X_val, y_val, checkpoint, checkpoint_every,
                                         resume)
        self.target_ = target
        self.classes_ = target.classes
        # one-vs-one models whose decision_function shows the one-vs-rest view (SVC's default)
        self._ovr_view = target.kind == "ovo" and getattr(model, "decision_function_shape", "ovo") == "ovr"
        t0 = time.perf_counter()
        # a store pool's exchanges run on the engine that ran the pursuit: it (and its client) stay
        # open until the chosen level's model is built, then close (see _exchanged)
        done = None if ckpt is None else ckpt.result
        self.__dict__.pop("results_", None)
        with contextlib.ExitStack() as keep:
            self._xengine = None
            try:
                levels, wsq = self._run_route(done, exp, store, rows, pool_coef, in_memory, n_keep, groups, coupled,
                                              m, keep, ckpt)
                self.seconds_ = done["seconds"] if done is not None else time.perf_counter() - t0
                self._complete_fit(levels, wsq, rows, y, X_val, y_val, n_keep, ckpt, done)
            finally:
                del self._xengine  # never saved or pickled; expansion_at exchanges only levels done here
        return self

    def _check_target(self, exp, X_pool, y, X_val, y_val):
        """fit's checks of the model's expansion and of the labels / held-out data given with it."""
        if len(exp.kernels) != 1:
            raise ValueError(
                f"the model uses {len(exp.kernels)} kernels (a mixed dictionary); reduced-set compression needs one "
                "kernel (one RKHS). Compress each kernel's part separately, or fit with one kernel")
        if exp.n_vectors == 0:
            raise ValueError("the model has no support vectors (a constant model): there is nothing to compress")
        if self.select == "validation" and (X_val is None or y_val is None):
            raise ValueError("select='validation' needs held-out data: pass X_val and y_val to fit")
        if y is not None and X_pool is None and len(np.asarray(y)) != exp.n_vectors:
            raise ValueError(
                f"y has {len(np.asarray(y))} labels but the default pool (the model's support vectors) has "
                f"{exp.n_vectors} rows; pass X_pool with the rows y belongs to")

    def _prepare_pool(self, target, exp, X_pool, y):
        """The candidate pool (store, rows, pool coefficients, in-memory flag) and the compressed
        size, checked against ``refit``, ``y`` and ``chunk_vectors``."""
        store, rows, pool_coef, in_memory = self._pool(target, X_pool)
        if self.refit == "pool" and rows is None:
            raise ValueError("refit='pool' fits the coefficients to the model's values on the pool rows: X_pool must "
                             "be a numpy array (not a store)")
        self._F_pool = None
        if y is not None and len(np.asarray(y)) != store.n_rows:
            raise ValueError(f"y has {len(np.asarray(y))} entries but X_pool has {store.n_rows} rows")
        n_keep = self._resolve_size(exp.n_vectors, store.n_rows)
        if self.chunk_vectors is not None and int(self.chunk_vectors) <= n_keep:
            raise ValueError(
                f"chunk_vectors={self.chunk_vectors} must exceed the compressed size ({n_keep} vectors): each piece "
                "of the expansion is compressed to that size, so smaller pieces are not compressed at all. Use "
                "pieces several times larger than n_vectors, or chunk_vectors=None")
        return store, rows, pool_coef, in_memory, n_keep

    def _output_groups(self, m):
        """Whether the ``m`` outputs share one set of vectors, and the groups of outputs pursued together."""
        coupled = True if self.coupled == "auto" else bool(self.coupled)
        groups = [list(range(m))] if coupled else [[j] for j in range(m)]
        if self.exchange and len(groups) > 1:
            raise ValueError("exchange improves one shared set of vectors: use coupled=True (or 'auto') with a "
                             f"{m}-output model, or exchange=0")
        return coupled, groups

    def _open_fit_checkpoint(self, target, store, X_pool, y, X_val, y_val, checkpoint, checkpoint_every, resume):
        """The fit's checkpoint (None without one); its header holds the parameters and digests."""
        params = {**self.get_params(deep=False), "model": model_digest(target),
                  "labels": {k: _array_digest(v) for k, v in (("y", y), ("X_val", X_val), ("y_val", y_val))}}
        return open_checkpoint(checkpoint, every=checkpoint_every, resume=resume, estimator=type(self).__name__,
                               params=params, store=store, store_is_input=is_store_like(X_pool))

    def _run_route(self, done, exp, store, rows, pool_coef, in_memory, n_keep, groups, coupled, m, keep, ckpt):
        """The path's levels and ``‖w‖²``: from a complete checkpoint, the pursuit, or the dense baselines."""
        if done is not None:  # a complete checkpoint: its path, no pursuit
            return self._restored_levels(done, groups, m)
        if self.method == "hmp":
            return self._fit_hmp(exp, store, rows, pool_coef, in_memory, n_keep, groups, keep, ckpt)
        return self._fit_dense(exp, rows, pool_coef, n_keep, coupled)

    def _complete_fit(self, levels, wsq, rows, y, X_val, y_val, n_keep, ckpt, done):
        """Evaluate the path, choose and build a level, and save the complete checkpoint."""
        self.wsq_ = wsq
        self._levels = levels
        self.path_ = self._evaluate_path(levels, wsq, rows, y, X_val, y_val)
        chosen = self._choose(levels, wsq, n_keep)
        self._pool_rows, self._pool_y = rows, y
        self._finish(chosen, rows, y)
        if ckpt is not None and done is None:
            ckpt.save_payload({"result": self._result_payload(levels, wsq)}, iteration=len(levels) - 1,
                              complete=True, stage="complete")

    def _fit_hmp(self, exp, store, rows, pool_coef, in_memory, n_keep, groups, keep=None, ckpt=None):
        seed = self._pursuit_seed()
        saved = None if ckpt is None else ckpt.restore_payload()
        saver = None if ckpt is None else _PursuitSaver(ckpt, {} if saved is None or "tree" not in saved
                                                        else {"tree": saved["tree"]})
        if saved is not None and saved["stage"] == "path":  # the pursuit had ended
            return self._resume_path(saved, store, in_memory, groups, exp.n_outputs, keep)
        in_pursuit = saved if saved is not None and saved["stage"] == "pursuit" else None
        cb, bar = progress_callback(self.verbose, n_keep * len(groups), desc="reduced set", unit="vector")
        path_len = n_keep if self.select == "n_vectors" else min(store.n_rows, max(n_keep, 1))
        if self._starts_dense(rows, store, path_len, in_pursuit):
            # in process, no client needed
            return self._dense_levels(exp, rows, pool_coef, groups, min(path_len, store.n_rows), seed, cb, bar,
                                      saver, in_pursuit)
        # exchange on a store pool: the client and the engine outlive this call (closed by fit's `keep`)
        on_engine = bool(self.exchange) and rows is None and keep is not None
        with contextlib.ExitStack() as local:
            owner = keep if on_engine else local
            client = owner.enter_context(resolve_client(self.client, in_memory=in_memory))
            if self.chunk_vectors is not None:
                vecs, tree_coef = self._tree_vectors(client, exp, path_len, saver, ckpt)
                if not self.refine:
                    wsq = exp.rkhs_sqnorm()
                    self.stop_reason_ = "chunk_tree"
                    return _levels_from_fixed(exp, vecs, tree_coef, wsq), wsq
                store, rows, pool_coef = InMemoryStore(np.ascontiguousarray(vecs)), np.ascontiguousarray(vecs), None
                client = None  # the refinement pool is small: in this process
            n_path = min(path_len, store.n_rows)
            use_dense = self._use_dense(client, rows, n_path, self.chunk_vectors is not None)
            if in_pursuit is not None:
                use_dense = in_pursuit["dense"]
            if use_dense:
                return self._dense_levels(exp, rows, pool_coef, groups, n_path, seed, cb, bar, saver, in_pursuit)
            wsq, results = self._engine_pursuit(client, store, exp, pool_coef, groups, path_len, seed, cb, bar, saver,
                                                in_pursuit, owner, on_engine)
        self.results_ = results
        self.stop_reason_ = results[0].stop_reason if len(results) == 1 else [r.stop_reason for r in results]
        return _levels_from_pursuits(results, groups, exp.n_outputs), wsq

    def _pursuit_seed(self) -> int:
        """The pursuit's seed, drawn from ``random_state``."""
        return int(np.random.RandomState(self.random_state).randint(0, 2**31 - 1)) if not isinstance(
            self.random_state, np.random.RandomState) else int(self.random_state.randint(0, 2**31 - 1))

    def _starts_dense(self, rows, store, path_len, in_pursuit) -> bool:
        """Whether the pursuit runs in this process from the start (no client, no chunking tree);
        a resumed pursuit runs where it began."""
        dense_first = self.chunk_vectors is None and self.client is None and self._use_dense(
            None, rows, min(path_len, store.n_rows), False)
        if in_pursuit is not None and self.chunk_vectors is None:
            dense_first = in_pursuit["dense"]  # a resumed pursuit runs where it began (client is not checked)
        return dense_first

    def _tree_vectors(self, client, exp, path_len, saver, ckpt):
        """The chunking tree's vectors and coefficients: from the checkpoint when the tree had
        finished, else computed (and saved)."""
        if saver is not None and "tree" in saver.extra:  # the tree had finished: not run again
            return saver.extra["tree"]
        vecs, tree_coef = chunked_compression(Tasks(client), exp, piece_vectors=int(self.chunk_vectors),
                                              keep=path_len, criterion=self.criterion)
        if saver is not None:
            saver.extra["tree"] = (vecs, tree_coef)
            ckpt.save_payload({"stage": "tree", "tree": (vecs, tree_coef)}, stage="tree")
        return vecs, tree_coef

    def _engine_pursuit(self, client, store, exp, pool_coef, groups, path_len, seed, cb, bar, saver, in_pursuit,
                        owner, on_engine):
        """The pursuit on the engine over ``store``; ``owner`` closes the engine (fit's stack when
        exchanges will run on it, which it then keeps in ``_xengine``)."""
        engine = make_engine(client, store)
        owner.callback(engine.close)
        try:
            wsq, results = compress_on_pool(
                engine, exp, pool_coef, n_rows=store.n_rows, outputs_groups=groups,
                n_vectors=min(path_len, store.n_rows), backfit=bool(self.backfit), candidates=self.candidates,
                seed=seed, rkhs_tol=float(self.rkhs_tol) if self.select == "rkhs_tol" else 0.0, callback=cb,
                criterion=self.criterion, checkpoint=saver, saved=in_pursuit)
        finally:
            if bar is not None:
                bar.close()
        if on_engine:
            self._xengine = (engine, store.n_rows)
        if saver is not None:
            saver.save_path(wsq, results, dense=False, engine=engine)
        return wsq, results

    def _resume_path(self, saved, store, in_memory, groups, m, keep):
        """A checkpoint saved when the pursuit had ended: its path; with exchanges on a store pool
        the engine is rebuilt (journal replayed) so that they run on the pursuit's partitions."""
        if self.exchange and saved.get("journal") is not None and keep is not None:
            client = keep.enter_context(resolve_client(self.client, in_memory=in_memory))
            engine = make_engine(client, store)
            keep.callback(engine.close)
            engine.run(None, None, saved["journal"])  # fresh partitions → their state when the pursuit ended
            self._xengine = (engine, store.n_rows)
        results = list(saved["results"])
        self.results_ = results
        self.stop_reason_ = results[0].stop_reason if len(results) == 1 else [r.stop_reason for r in results]
        return _levels_from_pursuits(results, groups, m), saved["wsq"]

    def _result_payload(self, levels, wsq) -> dict:
        """What a complete checkpoint keeps: the path (the pursuits' results, or the levels of the
        dense baselines / the chunking tree) and every level exchanged during the fit."""
        out = {"wsq": wsq, "seconds": self.seconds_, "stop_reason": getattr(self, "stop_reason_", None),
               "results": self.__dict__.get("results_"), "levels": None, "exchanged": {}}
        if out["results"] is None:
            out["levels"] = [(lv.index, lv.coef, lv.rkhs_error, lv.vectors) for lv in levels]
        for i, lv in enumerate(levels):
            ex = lv.exchanged
            if ex is not None:
                out["exchanged"][i] = (ex.index, ex.coef, ex.rkhs_error, ex.vectors, int(getattr(ex, "n_swaps", 0)),
                                       bool(getattr(ex, "guarded", False)))
        return out

    def _restored_levels(self, done, groups, m):
        """The levels of a complete checkpoint, with the exchanges made during its fit."""
        if done["results"] is not None:
            self.results_ = list(done["results"])
            levels = _levels_from_pursuits(self.results_, groups, m)
        else:
            levels = [_Level(*t) for t in done["levels"]]
        if done["stop_reason"] is not None:
            self.stop_reason_ = done["stop_reason"]
        for i, (index, coef, err, vectors, n_swaps, guarded) in done["exchanged"].items():
            ex = _Level(index, coef, err, vectors)
            ex.n_swaps, ex.is_exchanged = n_swaps, True
            if guarded:
                ex.guarded = True
            levels[int(i)].exchanged = ex
        return levels, done["wsq"]

    def _use_dense(self, client, rows, n_path, refining):
        ok = rows is not None and bool(self.backfit) and (client is None or refining)
        if self.dense is True:
            if not ok:
                raise ValueError("dense=True needs a numpy pool, backfit=True and no cluster (client=None)")
            return True
        return self.dense == "auto" and ok and len(rows) * max(n_path, 1) <= DENSE_HMP_LIMIT

    def _pool_values(self, exp, rows):
        """``f(z)`` (P, m) of the expansion without intercept at the numpy pool rows (cached)."""
        if self._F_pool is None or len(self._F_pool) != len(rows):
            X64 = np.asarray(rows, dtype=np.float64)
            self._F_pool = np.asarray(exp.with_coef(exp.coef, 0.0).decision_function(X64), dtype=np.float64)
        return self._F_pool.reshape(len(rows), -1)

    def _dense_levels(self, exp, rows, pool_coef, groups, n_path, seed, cb, bar, saver=None, saved=None):
        """The in-process pursuit's levels (the progress bar closed either way)."""
        try:
            wsq, results = self._dense_hmp(exp, rows, pool_coef, groups, n_path, seed, cb, saver, saved)
        finally:
            if bar is not None:
                bar.close()
        if saver is not None:
            saver.save_path(wsq, results, dense=True)
        self.results_ = results
        self.stop_reason_ = results[0].stop_reason if len(results) == 1 else [r.stop_reason for r in results]
        return _levels_from_pursuits(results, groups, exp.n_outputs), wsq

    def _dense_hmp(self, exp, rows, pool_coef, groups, n_path, seed, cb, saver=None, saved=None):
        F = self._pool_values(exp, rows)
        own = pool_coef is not None and np.array_equal(np.asarray(rows, dtype=np.float64),
                                                       np.asarray(exp.support_vectors, dtype=np.float64))
        wsq = np.einsum("ij,ij->j", np.asarray(pool_coef, dtype=np.float64), F) if own else exp.rkhs_sqnorm()
        rng = np.random.default_rng(seed)
        tol = float(self.rkhs_tol) if self.select == "rkhs_tol" else 0.0
        results, first, run = [], 0, None
        if saved is not None:  # a checkpointed pursuit: its finished groups, its RNG, the group's state
            rng.bit_generator.state = saved["rng"]
            results, first, run = list(saved["results"]), int(saved["group"]), saved["loop"]
        for i in range(first, len(groups)):
            g = list(groups[i])
            hook = None if saver is None else saver.bind(wsq=wsq, group=i, results=results)
            results.append(dense_hyperplane_pursuit(
                rows, kernel=exp.kernels[0], F=F[:, g], wsq=wsq[g], n_vectors=n_path, candidates=self.candidates,
                random_state=rng, rkhs_tol=tol, callback=cb, criterion=self.criterion, checkpoint=hook,
                run=run if i == first else None))
        return wsq, results

    def _fit_dense(self, exp, rows, pool_coef, n_keep, coupled):
        from ._sparse import l0_path, l1_path

        if rows is None:
            raise ValueError(f"method={self.method!r} builds the dense pool Gram: X_pool must be a numpy array "
                             "(a store pool needs method='hmp')")
        if len(rows) > DENSE_POOL_LIMIT:
            raise ValueError(f"method={self.method!r} needs the {len(rows)} x {len(rows)} pool Gram (O(P³) time); "
                             f"use method='hmp' for pools above {DENSE_POOL_LIMIT} rows")
        kernel = exp.kernels[0]
        X64 = rows.astype(np.float64)
        Kzz = kernel(X64, X64)
        f = exp.with_coef(exp.coef, 0.0).decision_function(X64)
        own = pool_coef is not None and np.array_equal(X64, exp.support_vectors.astype(np.float64))
        wsq = np.einsum("ij,ij->j", pool_coef, f) if own else exp.rkhs_sqnorm()
        if self.method == "l1":
            sparse = l1_path(Kzz, f, wsq, coupled=coupled, alphas=self.l1_alphas, n_levels=None)
        else:
            sparse = l0_path(Kzz, f, wsq, coupled=coupled, gammas=self.l0_gammas, n_levels=None, max_iter=300)
        levels = [_Level(lv.support, lv.coef, lv.rkhs_error) for lv in sparse if lv.n_vectors > 0]
        if not levels:
            raise ValueError(f"method={self.method!r} found no non-empty level; widen its parameter grid")
        return levels, wsq

    # -- path, level choice, thresholds ---------------------------------------------------------
    def _evaluate_path(self, levels, wsq, rows, y, X_val, y_val):
        total = float(np.sum(wsq))
        path = []
        for lv in levels:
            entry = {"n_vectors": lv.n_vectors, "rkhs_error": float(np.sum(lv.rkhs_error)),
                     "rkhs_error_rel": float(np.sum(lv.rkhs_error)) / total if total > 0 else 0.0}
            path.append(entry)
        labelled = [("train_error", rows, y)] if (y is not None and rows is not None) else []
        if X_val is not None and y_val is not None:
            labelled.append(("val_error", np.asarray(X_val), np.asarray(y_val)))
        if not labelled:
            return path
        for i in _eval_positions(len(levels)):
            for key, X, yy in labelled:
                path[i][key] = self._error(levels[i], rows, X, yy, y)
        return path

    def _expansion(self, lv, rows, y, exchange=True):
        """The level's KernelExpansion (vectors from the pool) with thresholds (re-optimised on
        the labelled pool when asked); ``exchange=False``: the greedy level's own vectors."""
        exp = self.target_.expansion
        if self.exchange and exchange:
            lv = self._exchanged(lv, rows, y)
            built = getattr(lv, "built", None)
            if built is not None and built[0] == self._built_key(rows, y):
                return built[1]
        vecs = lv.vectors if lv.vectors is not None else rows[lv.index]
        coef = lv.coef
        if self.refit == "pool" and rows is not None and len(vecs):
            coef = self._pool_refit(exp, np.asarray(vecs), rows)
        out = KernelExpansion(np.asarray(vecs), coef, exp.intercept, exp.kernels[0])
        if self.optimize_threshold and y is not None and rows is not None and self.target_.kind != "regression":
            F = out.decision_function(rows)
            b = out.intercept.copy()
            for j, (mask, lab) in enumerate(self.target_.output_labels(y)):
                b[j] += best_threshold(F[mask, j], lab)
            out = out.with_coef(out.coef, b)
        return out

    def _exchanged(self, lv, rows, y=None):
        """The level after single-vector exchanges (computed once per level): in this process for
        a numpy pool (:func:`~kmp_dask.greedy.exchange_vectors`), on the pursuit's engine for a
        store pool (:func:`~kmp_dask.greedy._exchange.engine_exchange`; the vectors are the chosen
        rows as the partitions read them from the store). The engine is open only during ``fit``:
        there the chosen level and the levels whose labelled errors ``path_`` reports are
        exchanged; ``expansion_at`` later can only give levels exchanged then. With
        ``exchange_guard`` and labels for a numpy pool, the exchanged vectors are kept only when
        their error on the labelled pool is not above the greedy level's."""
        if getattr(lv, "is_exchanged", False):
            return lv
        if getattr(lv, "exchanged", None) is None:
            kernel = self.target_.expansion.kernels[0]
            if rows is not None:
                res = exchange_vectors(rows, kernel=kernel, F=self._pool_values(self.target_.expansion, rows),
                                       wsq=self.wsq_, index=lv.index, max_sweeps=int(self.exchange))
            else:
                live = getattr(self, "_xengine", None)
                if live is None:
                    raise ValueError(
                        f"exchange on a store pool runs on the engine during fit: the level with {lv.n_vectors} "
                        "vectors was not exchanged then (only the chosen level and the levels with labelled "
                        "errors in path_ are); pass a numpy X_pool, or fit with n_vectors="
                        f"{lv.n_vectors} to exchange this level")
                engine, n_rows = live
                res = engine_exchange(engine, kernel=kernel, wsq=self.wsq_, index=lv.index, vectors=lv.vectors,
                                      n_rows=n_rows, max_sweeps=int(self.exchange))
            if res is None:  # K_SS not numerically positive definite: the greedy level as it is
                lv.exchanged = _Level(lv.index, lv.coef, lv.rkhs_error, lv.vectors)
                lv.exchanged.n_swaps = 0
            else:
                lv.exchanged = _Level(res.index, res.coef, res.rkhs_error,
                                      rows[res.index] if rows is not None else res.vectors)
                lv.exchanged.n_swaps = res.n_swaps
                if self.exchange_guard and y is not None and rows is not None and res.n_swaps:
                    key = self._built_key(rows, y)
                    mx = self._expansion(lv.exchanged, rows, y, exchange=False)
                    mg = self._expansion(lv, rows, y, exchange=False)
                    err_x, err_g = self._model_error(mx, rows, y), self._model_error(mg, rows, y)
                    if err_x > err_g:  # keep the greedy level
                        lv.exchanged = _Level(lv.index, lv.coef, lv.rkhs_error, lv.vectors)
                        lv.exchanged.n_swaps = 0
                        lv.exchanged.guarded = True
                    # the kept model and its pool error: built once, not again by _expansion / _error
                    lv.exchanged.built = (key, mg if err_x > err_g else mx, min(err_x, err_g))
            lv.exchanged.is_exchanged = True
        return lv.exchanged

    def _built_key(self, rows, y):
        return (self.refit, bool(self.optimize_threshold), id(rows), id(y))

    def _pool_refit(self, exp, vecs, rows):
        """``argmin_β Σ_z (f(z) − k(z, S) β)²`` over the pool rows (least squares, minimum norm)."""
        F = self._pool_values(exp, rows)
        K = np.asarray(exp.kernels[0](np.asarray(rows, dtype=np.float64), np.asarray(vecs, dtype=np.float64)),
                       dtype=np.float64)
        beta, *_ = np.linalg.lstsq(K, F, rcond=None)
        return beta

    def _error(self, lv, rows, X, yy, y_pool, exchange=True):
        if exchange and self.exchange and X is rows and yy is y_pool:  # the guard's pool error, if it ran
            built = getattr(self._exchanged(lv, rows, y_pool), "built", None)
            if built is not None and built[0] == self._built_key(rows, y_pool):
                return built[2]
        return self._model_error(self._expansion(lv, rows, y_pool, exchange=exchange), X, yy)

    def _model_error(self, exp, X, yy):
        """Error rate (classifiers, as the model decides) or mean squared error of ``exp`` on ``X``."""
        F = exp.decision_function(X)
        if self.target_.kind == "regression":
            Y = np.asarray(yy, dtype=np.float64).reshape(len(F), -1)
            return float(np.mean((F - Y) ** 2))
        return float(np.mean(self.target_.predict(F) != np.asarray(yy)))

    def _choose(self, levels, wsq, n_keep):
        if self.select == "n_vectors":
            fits = [lv for lv in levels if lv.n_vectors <= n_keep]
            return fits[-1] if fits else levels[0]
        if self.select == "rkhs_tol":
            total = float(np.sum(wsq))
            for lv in levels:
                if np.sum(lv.rkhs_error) <= self.rkhs_tol * total:
                    return lv
            return levels[-1]
        scored = [(p["val_error"], p["n_vectors"], i) for i, p in enumerate(self.path_) if "val_error" in p]
        return levels[min(scored)[2]]

    def _finish(self, lv, rows, y):
        self.expansion_ = self._expansion(lv, rows, y)
        if self.exchange:
            lv = self._exchanged(lv, rows, y)
        self.n_vectors_ = self.expansion_.n_vectors
        self.rkhs_error_ = np.asarray(lv.rkhs_error, dtype=np.float64)
        if self.refit == "pool" and rows is not None:  # the refitted model's own ‖w − ŵ‖²
            self.rkhs_error_ = _exact_rkhs_error(self.target_.expansion, self.expansion_.support_vectors,
                                                 self.expansion_.coef, self.wsq_)
        self.support_index_ = lv.index

    def expansion_at(self, n_vectors: int) -> KernelExpansion:
        """The path's model with ``n_vectors`` vectors (the largest level not above it), with
        thresholds re-optimised as for ``expansion_``: one greedy run gives every level."""
        check_is_fitted(self, "expansion_")
        fits = [lv for lv in self._levels if lv.n_vectors <= int(n_vectors)]
        if not fits:
            raise ValueError(f"n_vectors must be at least {self._levels[0].n_vectors} (the path's smallest level); "
                             f"got {n_vectors!r}")
        return self._expansion(fits[-1], self._pool_rows, self._pool_y)

    # -- prediction ----------------------------------------------------------------------------
    def decision_function(self, X):
        """The compressed model's decision values, shaped as the original's: binary / one output
        1-D; a one-vs-one SVC with ``decision_function_shape="ovr"`` (its default) its one-vs-rest
        view (n, n_classes), else one column per pair of classes. ``expansion_`` gives the raw
        per-output values."""
        check_is_fitted(self, "expansion_")
        F = self.expansion_.decision_function(X)
        if self._ovr_view:  # SVC(decision_function_shape="ovr"): its one-vs-rest view of the pairs
            F = F if isinstance(F, np.ndarray) else F.compute()
            return _ovr_transform(F, self.target_.pairs, len(self.target_.classes))
        return F[:, 0] if F.ndim == 2 and F.shape[1] == 1 else F

    def predict(self, X):
        """Predictions decided from the compressed decision values exactly as the original model."""
        check_is_fitted(self, "expansion_")
        F = self.expansion_.decision_function(X)
        if not isinstance(F, np.ndarray):
            F = F.compute()
        return self.target_.predict(F)

    def score(self, X, y):
        """Accuracy (classifiers) or R² (regressors) of the compressed model."""
        pred = self.predict(X)
        y = np.asarray(y)
        if self.target_.kind == "regression":
            from sklearn.metrics import r2_score

            return float(r2_score(y, pred))
        return float(np.mean(pred == y))


class _Level:
    """One compression level: pool rows (or explicit vectors), coefficients (n, m), RKHS errors (m,).
    ``coef`` may be a callable (computed on first use: a path of n levels costs O(n³) to expand)."""

    def __init__(self, index, coef, rkhs_error, vectors=None):
        self.index = np.asarray(index, dtype=np.int64)
        self._coef = coef if callable(coef) else np.asarray(coef, dtype=np.float64)
        self.rkhs_error = np.asarray(rkhs_error, dtype=np.float64)
        self.vectors = vectors
        self.exchanged = None  # this level after single-vector exchanges (ReducedSetCompressor.exchange)

    @property
    def coef(self) -> np.ndarray:
        if callable(self._coef):
            self._coef = np.asarray(self._coef(), dtype=np.float64)
        return self._coef

    @property
    def n_vectors(self) -> int:
        return len(self.index)

    def __getstate__(self):
        """Coefficients solved before a level is saved or pickled (a lazy solve is a closure)."""
        state = dict(self.__dict__)
        state["_coef"] = self.coef
        state.pop("built", None)  # a cache of the fit's pool (keyed by object ids): not saved
        return state

    _persist_state = __getstate__  # the open model format (kmp_dask.persist) asks for this


def _levels_from_pursuits(results, groups, m):
    """Levels of one coupled path, or of independent per-output paths run in step (level k:
    each output's first k vectors; the union is what a prediction evaluates)."""
    if len(results) == 1 and len(groups[0]) == m:
        res = results[0]
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
    longest = max(r.n_levels for r in results)
    out = []
    for it in range(1, longest):
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
        for (index, coef, e), group in zip(per, groups):
            for j_local, j in enumerate(group):
                coef_all[[where[i] for i in index.tolist()], j] = coef[:, j_local]
                err[j] = e[j_local]
        out.append(_Level(np.asarray(union), coef_all, err, np.asarray([rows[i] for i in union])))
    return out


def _exact_rkhs_error(exp, vecs, coef, wsq):
    """``‖w − ŵ‖²`` per output for ``ŵ = Σ β_j φ(v_j)``: ``‖w‖² − 2 Σ β f(v) + βᵀ K_vv β``."""
    kernel = exp.kernels[0]
    vecs = np.asarray(vecs, dtype=np.float64)
    coef = np.asarray(coef, dtype=np.float64).reshape(len(vecs), -1)
    f = np.asarray(exp.with_coef(exp.coef, 0.0).decision_function(vecs)).reshape(len(vecs), -1)
    err = wsq - 2 * np.einsum("ij,ij->j", coef, f) + np.einsum("ij,ik,kj->j", coef, kernel(vecs, vecs), coef)
    return np.maximum(err, 0.0)


def _levels_from_fixed(exp, vecs, coef, wsq):
    """The chunking tree's result as one level (no refinement), with its exact RKHS error
    ``‖w‖² − 2 Σ β f(z) + βᵀ K_zz β``."""
    kernel = exp.kernels[0]
    vecs = np.asarray(vecs, dtype=np.float64)
    f = exp.with_coef(exp.coef, 0.0).decision_function(vecs)
    err = wsq - 2 * np.einsum("ij,ij->j", coef, f) + np.einsum("ij,ik,kj->j", coef, kernel(vecs, vecs), coef)
    return [_Level(np.arange(len(vecs)), coef, np.maximum(err, 0.0), vecs)]


def _eval_positions(n: int, count: int = 50) -> list[int]:
    """Level positions at which labelled errors are computed: all when few, else ~count spread
    geometrically, always the last."""
    if n <= count:
        return list(range(n))
    pts = {int(round(x)) - 1 for x in np.geomspace(1, n, num=count)}
    pts.add(n - 1)
    return sorted(p for p in pts if 0 <= p < n)


def model_digest(target: CompressionTarget) -> str:
    """SHA-256 of the model being compressed (its expansion's vectors, coefficients, intercept and
    kernel; how its outputs are decided): a checkpoint resumes only the compression of that model."""
    exp = target.expansion
    h = hashlib.sha256()
    for a in (exp.support_vectors, exp.coef, exp.intercept):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    classes = None if target.classes is None else [str(c) for c in np.asarray(target.classes).tolist()]
    h.update(repr(([repr(k) for k in exp.kernels], target.kind, classes, target.pairs, target.source,
                   bool(target.break_ties))).encode())
    return h.hexdigest()


def _array_digest(a) -> str | None:
    if a is None:
        return None
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype.kind in "OUS":
        a = np.asarray([str(v) for v in a.reshape(-1).tolist()]).astype("U")
    return hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()


class _PursuitSaver:
    """A compression's saves into its checkpoint (``greedy/_checkpoint.py``'s generic payloads).

    * stage ``"pursuit"``, every ``every`` selected vectors and after the last: the pursuit's state
      (``HMPLoop`` on the engine, with the engine's journal; the dense pursuit's state in
      process), the RNG state, ``‖w‖²``, the group of outputs being pursued and the finished
      groups' results;
    * stage ``"path"``, when every pursuit has ended: their results (and the journal, which lets
      exchanges on a store pool run on rebuilt partitions);
    * stage ``"tree"``: the chunking tree's vectors and coefficients (kept in later saves).
    """

    def __init__(self, ckpt, extra):
        self.ckpt, self.extra = ckpt, dict(extra)

    def bind(self, *, wsq, group, results, engine=None):
        return _PursuitHook(self, wsq, int(group), list(results), engine)

    def save_path(self, wsq, results, *, dense, engine=None) -> None:
        payload = {**self.extra, "stage": "path", "dense": dense, "wsq": wsq, "results": list(results),
                   "journal": None if engine is None else tuple(engine.journal)}
        self.ckpt.save_payload(payload, iteration=sum(len(r.index) for r in results) - 1, stage="path")


class _PursuitHook:
    """What a pursuit calls at the end of each iteration (``maybe_save(state, t, rng, last=)``)."""

    def __init__(self, saver, wsq, group, results, engine):
        self.saver, self.wsq, self.group, self.results, self.engine = saver, wsq, group, results, engine
        self.offset = sum(len(r.index) for r in results)

    def maybe_save(self, state, t, rng, last=False) -> None:
        if (t + 1) % self.saver.ckpt.every and not last:
            return
        payload = {**self.saver.extra, "stage": "pursuit", "dense": self.engine is None, "wsq": self.wsq,
                   "group": self.group, "results": self.results, "loop": state, "rng": rng.bit_generator.state,
                   "journal": None if self.engine is None else tuple(self.engine.journal)}
        self.saver.ckpt.save_payload(payload, iteration=self.offset + int(t), stage="pursuit")


def compress(model, n_vectors=0.2, *, X_pool=None, y=None, X_val=None, y_val=None, **params):
    """Compress ``model`` and return the fitted :class:`ReducedSetCompressor` (its
    ``expansion_`` is the compressed model; ``predict`` / ``decision_function`` use it)."""
    return ReducedSetCompressor(n_vectors, **params).fit(model, X_pool, y, X_val=X_val, y_val=y_val)
