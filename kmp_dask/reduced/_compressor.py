"""Reduced-set compression of fitted kernel models: :class:`ReducedSetCompressor` and :func:`compress`.

A fitted model (scikit-learn ``SVC``/``NuSVC``/``SVR``/``NuSVR``/``KernelRidge``, a kmp_dask
model, a :class:`~kmp_dask.KernelExpansion`, or a scikit-learn ``Pipeline`` of linear scalers
ending in one of those — the scalers become the expansion's input map) is turned into ``w = Σ_i α_i φ(x_i)`` with m
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
* ``chunk_vectors=c`` (with ``"hmp"``) — the chunking method (§3.6): as a dask task graph
  (``chunking="tree"``, :func:`kmp_dask.greedy._hmp_setup.chunked_compression`) or as the paper
  describes it (``chunking="cyclic"``, :mod:`kmp_dask.reduced._cyclic`), followed, with
  ``refine=True``, by a pursuit against the full ``w`` over the vectors it kept.

A level is chosen by size (``n_vectors``), RKHS tolerance (``select="rkhs_tol"``) or validation
error (``select="validation"``, needs ``X_val, y_val``). For classifiers the thresholds are
re-optimised on training error (``optimize_threshold=True``, needs labels ``y`` for the pool
rows), as the paper does. ``path_`` records every level.

The class holds the parameters, their checks and the fit / predict skeleton; the rest lives beside
it: ``_checks.py`` (parameters, inputs, the candidate pool), ``_routes.py`` (where the path is
computed: in process, on the engine, after the chunking method, the dense baselines), ``_level.py``
(the level type), ``_build.py`` (a level → a model: exchanges, thresholds, errors, the level
choice), ``_saves.py`` (the checkpoint's payloads) and ``_cyclic.py`` (the paper's chunking).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..estimators._base import ExpansionEstimatorMixin, open_fit_checkpoint, squeeze_outputs
from ..estimators._calibration import PlattCalibrator
from ..estimators._inputs import is_dask_array, is_store_like
from ..expansion import KernelExpansion
from ..parallel._waits import compute_bounded
from ._build import (
    best_threshold,
    choose,
    evaluate_path,
    expansion,
    finish,
    prefix_guard,
)
from ._checks import METHODS, REFIT, SELECT, check_params, check_target, prepare_pool
from ._level import _Level  # noqa: F401 (model files written before the split name it here)
from ._level import exact_rkhs_error as _exact_rkhs_error  # noqa: F401 (benchmarks/reduced_sets.py)
from ._models import _ovr_transform, as_compression_target, final_estimator
from ._routes import DENSE_HMP_LIMIT, DENSE_POOL_LIMIT, baseline_levels, hmp_levels
from ._saves import array_digest, model_digest, restored_levels, result_payload
from ._state import RouteState

__all__ = [
    "DENSE_HMP_LIMIT",
    "DENSE_POOL_LIMIT",
    "METHODS",
    "REFIT",
    "SELECT",
    "ReducedSetCompressor",
    "best_threshold",
    "compress",
]


class ReducedSetCompressor(ExpansionEstimatorMixin, BaseEstimator):
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
    candidates : "all", "auto" or int, default="all"
        Pool points scored per iteration: "all" (or None) every one; an int that many random
        points (the probabilistic search); "auto" 59 (with probability 0.95 a point among the
        best 5%).
    coupled : bool or "auto", default="auto"
        Multi-output models: one shared set of vectors for all outputs (eq. 13), or one set per
        output. "auto": coupled.
    select : {"n_vectors", "rkhs_tol", "validation"}, default="n_vectors"
        How the level is chosen: the size, the first level with ``‖w − ŵ‖² ≤ rkhs_tol · ‖w‖²``,
        or the level with the lowest validation error (needs ``X_val, y_val`` in ``fit``).
    rkhs_tol : float, default=1e-3
        Relative RKHS tolerance for ``select="rkhs_tol"``.
    optimize_threshold : bool, default=False
        Classifiers: True re-chooses each output's threshold to minimise the training error on the
        labelled pool (``y`` in ``fit``; the paper's step); False keeps the model's own thresholds,
        so the compressed model decides as the model does (an SVC's threshold is not its
        training-error optimum: with re-chosen thresholds and eq. 13, the earlier defaults, a
        scaled SVC on keel's german compressed to 1/5 lost up to 5.6 points to it, with the
        defaults up to 3.2; docs/reduced.md "Thresholds").
    chunk_vectors : int or None, default=None
        The chunking method (§3.6): pieces of this many terms of the expansion, compressed as
        ``chunking`` says.
    refine : bool, default=True
        After the chunking method, one pursuit against the full ``w`` over the vectors it kept.
    refit : {"rkhs", "pool"}, default="rkhs"
        Coefficients of each level on its selected vectors: ``"rkhs"`` the paper's
        ``β = K_SS⁻¹ f(S)`` (minimises ``‖w − ŵ‖²``); ``"pool"`` least squares of the model's
        values on the pool rows, ``β = argmin Σ_z (f(z) − f̂(z))²`` (matches the decision
        function where the data are rather than in the whole RKHS; needs a numpy pool — pass the
        training rows). The selection is the same; ``rkhs_error`` stays the selection's.
    criterion : {"decrease", "eq13"}, default="decrease"
        ``"hmp"`` selection score: ``Σ_j r_j(z)² / δ(z)`` — the exact fall of ``‖w − ŵ‖²`` when
        z joins with backfitting (``δ``: the part of φ(z) orthogonal to the chosen vectors), or
        the paper's ``Σ_j r_j(z)² / k(z, z)`` (eq. 13). Without backfitting (``backfit=False``)
        the two are the same score (the basic step's exact decrease is eq. 13's); ``"l0"`` /
        ``"l1"`` have no greedy score. Runs in process and on the engine (store pools, clusters)
        alike.
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
        vectors only when its error on the labelled pool (training error with the level's
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
    l0_step : {"ridge", "paper"}, default="ridge"
        ``method="l0"``: the lossy step's penalty — ``γ‖λ‖²`` (the zero-norm approximation the
        paper cites), or the paper's own ``γ Σ λ_i β_i`` (docs/reduced.md compares them).
    chunking : {"tree", "cyclic"}, default="tree"
        With ``chunk_vectors``: ``"tree"`` compresses each piece against its own part of ``w``
        on the workers and merges up a tree; ``"cyclic"`` is the paper's §3.6 — one piece at a
        time is compressed against the full ``w`` with the others fixed, cycling through the
        pieces (in this process; docs/reduced.md compares them).
    random_state : int, RandomState instance or None, default=None
        Seeds the probabilistic search.
    client : None, "sync", "embedded", str or distributed.Client, default=None
        Where the pool's partitions live (as for the KMP estimators). None with numpy input: in
        this process.
    verbose : int, default=0
        Progress bar over the selected vectors.
    probability : bool, default=False
        Classifiers: ``predict_proba``, from the compressed decision values mapped by a
        multinomial logistic regression on them (Platt's sigmoid for two classes;
        ``calibrator_``), fitted on ``X_val, y_val`` when ``fit`` is given them, else on the
        labelled pool ``X_pool, y`` (numpy rows; usually the original model's training rows,
        whose decision values are somewhat over-confident: pass held-out rows as ``X_val``).

    Attributes
    ----------
    expansion_ : KernelExpansion — the compressed model (with its thresholds as intercept)
    target_ : CompressionTarget — the model as an expansion and how its outputs are decided (a
        model that standardises its input, ``standardize``: its expansion in the standardised space;
        the pool is standardised the same way and ``expansion_`` takes raw rows again)
    n_vectors_ : int — vectors (kernel evaluations per prediction) of the compressed model
    rkhs_error_ : ndarray (m,) — ``‖w_j − ŵ_j‖²`` of the chosen level
    path_ : list of dict — per level: ``n_vectors``, ``rkhs_error`` (summed over outputs),
        ``rkhs_error_rel``, and ``train_error`` / ``val_error`` when labelled data were given
        (error rate for classifiers with re-optimised thresholds, mean squared error otherwise)
    wsq_ : ndarray (m,) — ``‖w_j‖²``
    history_ : list of dict — the hyperplane pursuit's records, one per iteration (``iteration``,
        ``n_vectors``, ``rkhs_error``, ``rkhs_error_rel``; with independent outputs also ``group``,
        the pursuit's index), what ``verbose`` and the CLI's ``--log-json`` show; set when a
        pursuit ran (``method="hmp"``; with ``chunk_vectors``, its refinement)
    seconds_ : float — time of the selection itself (the path), excluding error evaluation
    classes_ : ndarray — the model's classes (classifiers)
    used_prefix_ : bool — True when the model is a KMP fit with a path (``expansion_at``), labels
        for a numpy pool were given, and the compressed model's pool error was above the fit's own
        first ``n_vectors_`` atoms: ``expansion_`` is then that prefix (a ``PrefixKeptWarning`` says
        so; ``support_index_`` are the pool rows equal to its vectors, −1 where none is)
    """

    def __init__(self, n_vectors=0.2, *, method="hmp", backfit=True, candidates="all", coupled="auto",
                 select="n_vectors", rkhs_tol=1e-3, optimize_threshold=False, chunk_vectors=None, refine=True,
                 refit="rkhs", criterion="decrease", exchange=0, exchange_guard=True, dense="auto", l0_gammas=None,
                 l1_alphas=None, l0_step="ridge", chunking="tree", random_state=None, client=None, verbose=0,
                 probability=False):
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
        self.l0_step = l0_step
        self.chunking = chunking
        self.random_state = random_state
        self.client = client
        self.verbose = verbose
        self.probability = probability

    # -- fit ---------------------------------------------------------------------------------
    def fit(self, model, X_pool=None, y=None, *, X_val=None, y_val=None, checkpoint=None, checkpoint_every=10,
            resume=False):
        """Compress ``model`` (a fitted kernel model or a KernelExpansion).

        Parameters
        ----------
        model : fitted SVC, NuSVC, SVR, NuSVR, KernelRidge, KMPClassifier, KMPRegressor, ..., KernelExpansion, \
or Pipeline
            A scikit-learn ``Pipeline`` of linear scalers (StandardScaler, MinMaxScaler,
            MaxAbsScaler, RobustScaler) ending in one of those models: the scalers are composed
            into one per-feature map that the compressed model applies itself (``expansion_``
            takes raw rows, ``X_pool`` / ``X_val`` are raw rows); any other step is refused.
        X_pool : array (P, d), store or path, optional
            Candidate vectors (default: the model's own support vectors / training points); raw
            rows, as the model (or pipeline) takes them.
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
        route = RouteState.of(self)  # the parameters, read once: the reduced/ internals take this state
        check_params(route)
        calibration = _calibration_rows(self, X_pool, y, X_val, y_val)  # raw rows, checked before any work
        target, X_pool, X_val, shift = _model_space(as_compression_target(model), X_pool, X_val)
        model = final_estimator(model)  # a Pipeline's scalers are in ``shift`` now
        exp = target.expansion
        check_target(route, exp, X_pool, y, X_val, y_val)
        store, rows, pool_coef, in_memory, n_keep = prepare_pool(route, target, X_pool, y)
        self._F_pool = None
        m = exp.n_outputs
        coupled, groups = self._output_groups(m)
        ckpt = self._open_fit_checkpoint(target, store, X_pool, y, X_val, y_val, checkpoint, checkpoint_every,
                                         resume)
        self.target_ = route.target = target
        self.classes_ = target.classes
        # one-vs-one models whose decision_function shows the one-vs-rest view (SVC's default)
        self._ovr_view = target.kind == "ovo" and getattr(model, "decision_function_shape", "ovo") == "ovr"
        t0 = time.perf_counter()
        # a store pool's exchanges run on the engine that ran the pursuit: it (and its client) stay
        # open until the chosen level's model is built, then close (see _build.exchanged)
        done = None if ckpt is None else ckpt.result
        for name in ("results_", "history_", "stop_reason_"):  # a re-fit whose route runs no pursuit keeps none
            self.__dict__.pop(name, None)
        with contextlib.ExitStack() as keep:
            try:
                levels, wsq = _run_route(route, done, exp, store, rows, pool_coef, in_memory, n_keep, groups, coupled,
                                         m, keep, ckpt)
                _pursuit_attributes(self, route)
                self.seconds_ = done["seconds"] if done is not None else time.perf_counter() - t0
                self._complete_fit(route, model, levels, wsq, rows, y, X_val, y_val, n_keep, ckpt, done)
                self._input_shift = shift
                self.expansion_ = self.expansion_.with_input_transform(*shift)
            finally:
                route.xengine = None  # never saved; expansion_at exchanges only levels done here
        self._calibrate(calibration)
        return self

    def _calibrate(self, rows) -> None:
        """``calibrator_`` from the compressed decision values of ``rows`` = (X, y) (None: no probabilities)."""
        self.calibrator_ = None
        if rows is None:
            return
        X, y = rows
        if self.target_.kind == "regression":
            raise ValueError(f"probability=True needs a classifier; the model (source {self.target_.source}) is a "
                             "regression model. Use probability=False")
        codes = np.full(len(y), -1, dtype=np.int64)
        for c, label in enumerate(self.classes_):
            codes[y == label] = c
        if np.any(codes < 0):
            raise ValueError("probability=True: the calibration rows' labels include values that are not among the "
                             f"model's classes {np.asarray(self.classes_).tolist()}; pass the model's labels")
        self.calibrator_ = PlattCalibrator.fit(self._decision(X), codes, len(self.classes_))

    def _has_proba(self):
        return getattr(self, "calibrator_", None) is not None or (
            not hasattr(self, "expansion_") and bool(self.probability))

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes) of the compressed model (``probability=True``)."""
        check_is_fitted(self, "calibrator_")
        return self.calibrator_.predict_proba(np.asarray(self._decision(X)))

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
        return open_fit_checkpoint(self, checkpoint, checkpoint_every, resume, store, is_store_like(X_pool),
                                   model=model_digest(target),
                                   labels={k: array_digest(v)
                                           for k, v in (("y", y), ("X_val", X_val), ("y_val", y_val))})

    def _complete_fit(self, route, model, levels, wsq, rows, y, X_val, y_val, n_keep, ckpt, done):
        """Evaluate the path, choose and build a level, and save the complete checkpoint."""
        self.wsq_ = route.wsq = wsq
        self._levels = levels
        self.path_ = route.path = evaluate_path(route, levels, wsq, rows, y, X_val, y_val)
        chosen = choose(route, levels, wsq, n_keep)
        self._pool_rows, self._pool_y = rows, y
        finish(route, chosen, rows, y)
        prefix_guard(route, model, rows, y)
        self.expansion_ = route.model
        self.n_vectors_ = route.model.n_vectors
        self.rkhs_error_, self.support_index_ = route.rkhs_error, route.support_index
        self.used_prefix_ = route.used_prefix
        self._F_pool = route.F_pool
        if ckpt is not None and done is None:
            ckpt.save_payload({"result": result_payload(route, levels, wsq, self.seconds_)},
                              iteration=len(levels) - 1, complete=True, stage="complete")

    def _route_state(self) -> RouteState:
        """The state of the fitted compression (for ``expansion_at``): the parameters, the target,
        ``‖w‖²``, the path and the cached pool values."""
        return RouteState.of(self, target=self.target_, wsq=self.wsq_, path=self.path_, F_pool=self._F_pool)

    def expansion_at(self, n_vectors: int) -> KernelExpansion:
        """The path's model with ``n_vectors`` vectors (the largest level not above it), with
        thresholds re-optimised as for ``expansion_``: one greedy run gives every level."""
        check_is_fitted(self, "expansion_")
        fits = [lv for lv in self._levels if lv.n_vectors <= int(n_vectors)]
        if not fits:
            raise ValueError(f"n_vectors must be at least {self._levels[0].n_vectors} (the path's smallest level); "
                             f"got {n_vectors!r}")
        route = self._route_state()
        out = expansion(route, fits[-1], self._pool_rows, self._pool_y)
        self._F_pool = route.F_pool  # the pool values, kept for the next level
        return out.with_input_transform(*getattr(self, "_input_shift", (None, None)))

    # -- prediction ----------------------------------------------------------------------------
    def _predict_rows(self, X):
        """``X`` as given: the compressed model has no ``n_features_in_`` of its own to check against
        (``KernelExpansion.decision_function`` checks the width of numpy rows)."""
        return X

    def decision_function(self, X):
        """The compressed model's decision values, shaped as the original's: binary / one output
        1-D; a one-vs-one SVC with ``decision_function_shape="ovr"`` (its default) its one-vs-rest
        view (n, n_classes), else one column per pair of classes. ``expansion_`` gives the raw
        per-output values."""
        F = self._decision(X)
        if self._ovr_view:  # SVC(decision_function_shape="ovr"): its one-vs-rest view of the pairs
            F = F if isinstance(F, np.ndarray) else compute_bounded(F, what="decision pass")[0]
            return _ovr_transform(F, self.target_.pairs, len(self.target_.classes))
        return squeeze_outputs(F)

    def predict(self, X):
        """Predictions decided from the compressed decision values exactly as the original model."""
        F = self._decision(X)
        if not isinstance(F, np.ndarray):
            (F,) = compute_bounded(F, what="decision pass")
        return self.target_.predict(F)

    def score(self, X, y):
        """Accuracy (classifiers) or R² (regressors) of the compressed model."""
        pred = self.predict(X)
        y = np.asarray(y)
        if self.target_.kind == "regression":
            from sklearn.metrics import r2_score

            return float(r2_score(y, pred))
        return float(np.mean(pred == y))


def compress(model, n_vectors=0.2, *, X_pool=None, y=None, X_val=None, y_val=None, **params):
    """Compress ``model`` and return the fitted :class:`ReducedSetCompressor` (its
    ``expansion_`` is the compressed model; ``predict`` / ``decision_function`` use it)."""
    return ReducedSetCompressor(n_vectors, **params).fit(model, X_pool, y, X_val=X_val, y_val=y_val)


def _run_route(route, done, exp, store, rows, pool_coef, in_memory, n_keep, groups, coupled, m, keep, ckpt):
    """The path's levels and ``‖w‖²``: from a complete checkpoint, the pursuit, or the dense baselines."""
    if done is not None:  # a complete checkpoint: its path, no pursuit
        return restored_levels(route, done, groups, m)
    if route.method == "hmp":
        return hmp_levels(route, exp, store, rows, pool_coef, in_memory, n_keep, groups, keep, ckpt)
    return baseline_levels(route, exp, rows, pool_coef, coupled)


def _pursuit_attributes(est, route) -> None:
    """``results_``, ``history_`` and ``stop_reason_`` of ``est`` from what the route recorded (each
    only when set)."""
    for name in ("results", "history", "stop_reason"):
        if getattr(route, name) is not None:
            setattr(est, name + "_", getattr(route, name))


def _calibration_rows(est, X_pool, y, X_val, y_val):
    """The rows ``probability=True`` calibrates on, as ``(X, y)`` numpy arrays (raw rows): the
    validation rows when given, else the labelled pool; None without ``probability``."""
    if not est.probability:
        return None
    if not isinstance(est.probability, (bool, np.bool_)):
        raise ValueError(f"probability must be True or False; got {est.probability!r}")
    X, yy = (X_val, y_val) if X_val is not None and y_val is not None else (X_pool, y)
    if X is None or yy is None or is_store_like(X) or is_dask_array(X):
        raise ValueError("probability=True calibrates on labelled rows in memory: pass X_val and y_val (held-out "
                         "rows, best) or a numpy X_pool with its labels y to fit")
    X, yy = np.asarray(X), np.asarray(yy)
    if len(X) != len(yy):
        raise ValueError(f"probability=True: {len(X)} calibration rows but {len(yy)} labels")
    return X, yy


def _model_space(target, X_pool, X_val):
    """A model whose expansion standardises its input (``input_offset`` / ``input_scale``) is
    compressed in its own (standardised) space: the target's expansion without the transform, the
    pool and the validation rows mapped by it (a store pool: read through an AffineStore view).
    Returns ``(target, X_pool, X_val, (offset, scale))``; ``(None, None)`` without a transform."""
    exp = target.expansion
    if not exp.has_input_transform:
        return target, X_pool, X_val, (None, None)
    import dataclasses

    from ..store import AffineStore, as_store
    from ..store._transform import affine_rows

    shift = (exp.input_offset, exp.input_scale)
    target = dataclasses.replace(target, expansion=exp.without_input_transform())
    if X_pool is not None and not is_dask_array(X_pool):  # a dask pool is refused by prepare_pool
        X_pool = (AffineStore(as_store(X_pool), *shift) if is_store_like(X_pool)
                  else affine_rows(np.asarray(X_pool), *shift))
    if X_val is not None:
        X_val = affine_rows(np.asarray(X_val), *shift)
    return target, X_pool, X_val, shift
