"""Kernel matching pursuit estimators: :class:`KMPRegressor` and :class:`KMPClassifier`."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..blockops import StatsQuery, kmp_stats
from ..expansion import KernelExpansion
from ..greedy import FIT_MODES, kernel_matching_pursuit, n_candidates_for
from ..kernels import Kernel, get_kernel
from ..losses import get_loss
from ..parallel import make_engine, map_blocks_rows, map_rows_predict, resolve_client
from ._inputs import fit_input, is_dask_array, is_store_like, predict_input
from ._progress import progress_callback

__all__ = ["KMPRegressor", "KMPClassifier"]


def _check_params(est):
    """Validate constructor parameters (in ``fit``, scikit-learn style); raise naming the fix."""
    def bad(name, want):
        raise ValueError(f"{name} must be {want}; got {getattr(est, name)!r}")

    if not isinstance(est.n_basis, numbers.Integral) or est.n_basis < 1:
        bad("n_basis", "a positive int")
    if est.fit_mode not in FIT_MODES:
        bad("fit_mode", f"one of {FIT_MODES}")
    c = est.candidates
    if not (c in ("all", "auto") or (isinstance(c, numbers.Integral) and not isinstance(c, bool) and c >= 1)):
        bad("candidates", "'all', 'auto' or a positive int (the active-set size s)")
    if not (isinstance(est.ridge, numbers.Real) and est.ridge >= 0):
        bad("ridge", "a float >= 0")
    if est.tol is not None and not (isinstance(est.tol, numbers.Real) and 0 <= est.tol < 1):
        bad("tol", "None or a float in [0, 1)")
    if not (isinstance(est.validation_fraction, numbers.Real) and 0 <= est.validation_fraction < 1):
        bad("validation_fraction", "a float in [0, 1)")
    if est.n_iter_no_change is not None:
        if not isinstance(est.n_iter_no_change, numbers.Integral) or est.n_iter_no_change < 1:
            bad("n_iter_no_change", "None or a positive int")
        if est.validation_fraction == 0:
            raise ValueError("n_iter_no_change needs a validation split: set validation_fraction > 0 (e.g. 0.1)")
    if est.chunk_rows is not None and (not isinstance(est.chunk_rows, numbers.Integral) or est.chunk_rows < 1):
        bad("chunk_rows", "None or a positive int")
    re = est.refit_every
    positive_int = isinstance(re, numbers.Integral) and not isinstance(re, bool) and re >= 1
    if not (re is None or (isinstance(re, str) and re == "auto") or positive_int):
        bad("refit_every", "'auto', None or a positive int")
    if est.loss not in ("squared", None) and est.fit_mode == "prefit" and not (
        hasattr(est.loss, "name") and est.loss.name == "squared"
    ):
        raise ValueError(
            f"fit_mode='prefit' is defined for the squared loss only; got loss={est.loss!r}. "
            "Use fit_mode='backfit' (Newton refits) or 'basic'."
        )


class _BaseKMP(BaseEstimator):
    """Shared parameters, fit and prediction of the KMP estimators."""

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        kernel_params=None,
        n_basis=100,
        fit_mode="backfit",
        candidates="auto",
        eps=0.05,
        q=0.95,
        tol=None,
        ridge=1e-10,
        fit_intercept=True,
        validation_fraction=0.0,
        n_iter_no_change=None,
        random_state=None,
        client=None,
        chunk_rows=None,
        verbose=0,
        loss="squared",
        loss_params=None,
        refit_every="auto",
    ):
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

    _is_classifier = False

    def _resolve_kernels(self, n_features) -> list[Kernel]:
        """The dictionary's kernels: ``kernel`` may be one kernel or a list, ``gamma`` a list."""
        items = self.kernel if isinstance(self.kernel, (list, tuple)) else [self.kernel]
        gammas = self.gamma if isinstance(self.gamma, (list, tuple)) else [self.gamma]
        if not items:
            raise ValueError("kernel must be a kernel name, a Kernel, or a non-empty list of them; got []")
        out = []
        for item in items:
            if isinstance(item, Kernel):
                out.append(item)
                continue
            for g in gammas:
                out.append(get_kernel(item, gamma=g, degree=self.degree, coef0=self.coef0,
                                      kernel_params=self.kernel_params, n_features=n_features))
        return list(dict.fromkeys(out))  # drop exact duplicates, keep order

    def _n_candidates(self):
        if self.candidates == "auto":
            return n_candidates_for(self.eps, self.q)
        return self.candidates

    def _fit(self, X, y):
        _check_params(self)
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(0, 2**31 - 1))
        in_memory = not (is_store_like(X) or is_dask_array(X))
        self._input_classes = None
        with fit_input(self, X, y, chunk_rows=self.chunk_rows, is_classifier=self._is_classifier) as store:
            self.kernels_ = self._resolve_kernels(store.n_features)
            self.kernel_ = self.kernels_[0]
            self.loss_ = get_loss(self.loss, kind="classification" if self._is_classifier else "regression",
                                  params=self.loss_params)
            with resolve_client(self.client, in_memory=in_memory) as client:
                engine = make_engine(client, store)
                try:
                    targets = self._targets(engine, store)
                    cb, bar = progress_callback(self.verbose, self.n_basis)
                    result = kernel_matching_pursuit(
                        engine, kernel=self.kernels_, n_rows=store.n_rows, n_features=store.n_features,
                        dtype=store.dtype, targets=targets, n_basis=int(self.n_basis),
                        fit_mode=self.fit_mode, candidates=self._n_candidates(),
                        random_state=np.random.default_rng(seed), ridge=float(self.ridge), tol=self.tol,
                        fit_intercept=self.fit_intercept, validation_fraction=float(self.validation_fraction),
                        n_iter_no_change=self.n_iter_no_change, split_seed=seed, callback=cb,
                        loss=self.loss_, refit_every=self.refit_every,
                    )
                    if bar is not None:
                        bar.close()
                finally:
                    engine.close()
        self.basis_indices_ = result.basis_indices
        self.basis_kernels_ = result.basis_kernels
        self.basis_vectors_ = result.basis_vectors
        self.dual_coef_ = result.coef
        self.intercept_ = result.intercept
        self.n_basis_ = len(result.basis_indices)
        self.stop_reason_ = result.stop_reason.value
        self.history_ = result.history
        self.n_iter_ = len(result.history)
        self.expansion_ = result.expansion
        self._path = result if result.has_prefix_models else None
        return self

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

    def _decision(self, X):
        check_is_fitted(self, "dual_coef_")
        kind, Xv = predict_input(self, X)
        if kind == "dask":
            return map_rows_predict(Xv, self.expansion_)
        return self.expansion_.evaluate_block(Xv)


class KMPRegressor(RegressorMixin, _BaseKMP):
    """Kernel matching pursuit regression (squared loss), exact or stochastic.

    Selects ``n_basis`` kernel functions ``k(·, x_j)`` centred on training rows, one per
    iteration, and fits their coefficients by least squares (``fit_mode="backfit"``). With
    ``candidates="auto"`` each iteration scores ``s = ⌈log eps / log q⌉`` random rows (59 for
    the defaults): stochastic KMP (Popovici et al.). Data may be numpy arrays, dask arrays or
    a :mod:`kmp_dask.store` store; store/dask input is fitted on dask workers.

    Parameters
    ----------
    kernel : str, Kernel or list of them, default="rbf"
        "rbf", "laplacian", "polynomial", "linear", "sigmoid", a :class:`~kmp_dask.kernels.Kernel`,
        or a list: a mixed dictionary in which a candidate is a (row, kernel) pair.
    gamma, degree, coef0 : kernel parameters as in scikit-learn (gamma=None → 1/n_features).
        ``gamma`` may be a list: one kernel per value (e.g. RBF of three widths).
    kernel_params : dict, optional
        Extra kernel parameters.
    n_basis : int, default=100
        Maximum number of basis functions.
    fit_mode : {"basic", "backfit", "prefit"}, default="backfit"
    candidates : "all", "auto" or int, default="auto"
        Candidates scored per iteration: every training row (exact KMP), ⌈log eps/log q⌉, or s.
    eps, q : float, default=0.05, 0.95
        Probabilistic-search parameters of ``candidates="auto"``.
    tol : float or None
        Stop when the relative training residual norm falls to ``tol``.
    ridge : float, default=1e-10
        Tikhonov term per training row on the basis Gram (λ = ridge · n_train), for stability.
    fit_intercept : bool, default=True
        Fit a constant. Squared loss: a column of ones refitted with every atom (``basic``
        mode: centred targets). Other losses: the constant atom of the dictionary.
    validation_fraction : float, default=0.0
        Fraction of rows held out (chosen by a hash of the row index) for early stopping.
    n_iter_no_change : int or None
        Stop when the validation score has not improved for that many iterations; the model
        keeps the basis size with the best validation score.
    random_state : int, RandomState or None
    client : None, "sync", "embedded", address or distributed.Client
        Where to fit (see :func:`kmp_dask.parallel.resolve_client`).
    chunk_rows : int or None
        Rows per partition for in-memory / dask input (stores keep their own chunking).
    verbose : int
        1 shows a progress bar with the residual norm and validation score; k ≥ 2 prints a line
        every k iterations instead.
    loss : str or Loss, default="squared"
        "squared" (exact least squares); classifiers also "tanh" (KMP-tanh, targets ±0.65),
        "logistic" (gives ``predict_proba``), "exponential", "squared_hinge"; regressors "huber".
        Other losses than squared fit by gradient descent in function space with a Newton line
        search (see :mod:`kmp_dask.losses`).
    loss_params : dict, optional
        e.g. ``{"target": 0.65}`` for tanh, ``{"delta": 1.0}`` for huber.
    refit_every : "auto", int or None, default="auto"
        Other losses with ``fit_mode="backfit"``: a Newton refit of all coefficients every that
        many iterations, or ("auto") every iteration up to 10 atoms and then each time the basis
        has grown by a tenth — a refit costs O(N·n²·m), so refitting every iteration makes the
        fit cubic in n; None refits only at the end. There is always a converged refit at the
        end; ``fit_mode="basic"`` never refits.

    Attributes
    ----------
    basis_indices_ : ndarray (n_basis_,)
    basis_vectors_ : ndarray (n_basis_, n_features)
    dual_coef_ : ndarray (n_basis_, n_outputs)
    intercept_ : ndarray (n_outputs,)
    n_basis_ : int
    stop_reason_ : str
    history_ : list of dict
        Per iteration: index, score, best/median candidate score, residual norm, validation
        score (−MSE), seconds.
    kernel_ : Kernel
        The first (or only) kernel of the dictionary.
    kernels_ : list of Kernel
    basis_kernels_ : ndarray (n_basis_,)
        Index into ``kernels_`` of each basis element.
    loss_ : Loss
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y=None):
        """Fit on numpy/dask ``X, y`` or on a store (``y=None``)."""
        return self._fit(X, y)

    def _targets(self, engine, store):
        ys = store.y_shape
        self._single_output = len(ys) == 1
        return {"kind": "regression"}

    def predict(self, X):
        """Predicted targets; numpy in → numpy out, dask/store in → lazy dask array out."""
        F = self._decision(X)
        return F[:, 0] if self._single_output else F


class KMPClassifier(ClassifierMixin, _BaseKMP):
    """Kernel matching pursuit classification (squared loss on ±1 one-vs-rest targets).

    Binary problems fit one output; multi-class problems fit one output per class on one shared
    basis chosen by the coupled criterion (scores summed over outputs). Parameters and fitted
    attributes are those of :class:`KMPRegressor`, plus ``classes_``; the validation score used
    for early stopping is accuracy.
    """

    _is_classifier = True

    def fit(self, X, y=None):
        """Fit on numpy/dask ``X, y`` or on a store (``y=None``)."""
        if y is not None and not is_dask_array(y):
            check_classification_targets(np.asarray(y))
        return self._fit(X, y)

    def _targets(self, engine, store):
        names = store.attrs.get("classes")
        if self._input_classes is not None:  # numpy input, encoded by fit_input
            self.classes_ = self._input_classes
            codes = np.arange(len(self.classes_))
        elif names is not None:  # a store whose y holds codes into attrs["classes"]
            self.classes_ = np.asarray(names)
            codes = np.arange(len(names))
        else:
            parts = engine.run(kmp_stats, StatsQuery(unique_labels=True))
            codes = unique_labels(*[p["labels"] for p in parts])
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

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Class probabilities from the logistic loss: σ(f) per one-vs-rest output, normalised."""
        F = self._decision(X)
        if is_dask_array(F):
            return map_blocks_rows(_proba, F, dtype=np.float64, n_cols=len(self.classes_))
        return _proba(F)

    def decision_function(self, X):
        """Decision values: (n,) for binary problems, (n, n_classes) otherwise."""
        F = self._decision(X)
        return F[:, 0] if F.shape[1] == 1 else F

    def predict(self, X):
        """Predicted class labels (lazy dask array for dask/store input)."""
        F = self._decision(X)
        if F.shape[1] == 1:
            code = F[:, 0] > 0
        else:
            code = F.argmax(axis=1)
        if is_dask_array(code):  # module-level function + classes array: nothing unpicklable captured
            return map_blocks_rows(_take, code, self.classes_, dtype=self.classes_.dtype)
        return _take(code, self.classes_)


def _proba(F):
    P = 1.0 / (1.0 + np.exp(-np.clip(F, -50, 50)))
    if P.shape[1] == 1:
        return np.hstack([1.0 - P, P])
    return P / P.sum(axis=1, keepdims=True)


def _take(code, classes):
    return classes[np.asarray(code).astype(np.intp)]
