"""Staged predictions and prefix estimators of a KMP fit (scikit-learn's gradient-boosting convention).

A pursuit is nested: the fit to ``n_basis_`` atoms holds the exact model of every smaller size
(``expansion_at(k)``: the least-squares coefficients of the first ``k`` atoms from the fit's own
Cholesky factor; squared loss, ``fit_mode="backfit"`` or ``"prefit"``). ``staged_*`` evaluate
those models for ``k = 1 … n_basis_`` — one kernel matrix for numpy input — and ``prefix(k)``
returns a fitted estimator of size ``k``.
"""

from __future__ import annotations

import copy
import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._base import squeeze_outputs

__all__ = ["StagedMixin"]


class StagedMixin:
    """``staged_decision_function``, ``staged_predict`` and ``prefix`` for the KMP estimators (with
    :class:`~._base.ExpansionEstimatorMixin`'s ``_predict_rows``)."""

    def _require_path(self, what):
        check_is_fitted(self, "expansion_")
        if getattr(self, "_path", None) is None:
            raise ValueError(
                f"{what} needs the fit's prefix models: loss='squared' with fit_mode='backfit' or 'prefit'; this "
                f"model has loss={self.loss!r}, fit_mode={self.fit_mode!r}. Refit with those settings, or fit one "
                "model per size (n_basis=k).")

    def _staged_raw(self, X):
        """The decision values (n, n_outputs) of the prefix models of sizes 1 … ``n_basis_``."""
        self._require_path("staged predictions")
        Xv = self._predict_rows(X)
        sizes = range(1, self.n_basis_ + 1)
        if not isinstance(Xv, np.ndarray):  # dask / store input: one lazy array per size
            for k in sizes:
                yield self._path.prefix_expansion(k).decision_function(Xv)
            return
        K = self._path.prefix_expansion(self.n_basis_).kernel_matrix(Xv)  # one kernel matrix for every size
        for k in sizes:
            exp = self._path.prefix_expansion(k)
            yield K[:, :k] @ exp.coef + exp.intercept

    def staged_decision_function(self, X):
        """Decision values after each basis function: a generator of ``n_basis_`` arrays, the
        ``k``-th that of ``prefix(k)`` (as scikit-learn's ``GradientBoostingClassifier``).

        Classifier: (n,) per stage for a binary problem, (n, n_classes) otherwise; regressor:
        the predictions (``staged_predict``). Needs ``loss="squared"`` with ``fit_mode``
        ``"backfit"`` or ``"prefit"``. numpy in → numpy out (one kernel matrix for all sizes);
        dask / store in → one lazy dask array per size.
        """
        for F in self._staged_raw(X):
            yield squeeze_outputs(F)

    def staged_predict(self, X):
        """Predictions after each basis function: a generator of ``n_basis_`` arrays, the
        ``k``-th equal to ``prefix(k).predict(X)``."""
        for F in self._staged_raw(X):
            yield self._predict_from_decision(F)

    def prefix(self, k):
        """The fitted estimator made of the first ``k`` basis functions (1 ≤ k ≤ ``n_basis_``).

        Its model is the fit's own model at ``k`` atoms (``expansion_at(k)``): with the same data
        and parameters it predicts as a model fitted with ``n_basis=k`` (the pursuit chooses the
        same first ``k`` atoms; exact to rounding). ``history_`` keeps the first ``k``
        iterations; ``stop_reason_`` is ``"prefix"``. It can be saved, scored and used as any
        fitted estimator (its own ``prefix(j)``, ``j ≤ k``, included). A ``probability=True``
        model's calibration belongs to the whole model: the prefix has no ``predict_proba``.
        """
        self._require_path("prefix(k)")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= self.n_basis_:
            raise ValueError(f"k must be an int in [1, n_basis_={self.n_basis_}] (the size of the prefix model); "
                             f"got {k!r}")
        est = copy.copy(self)
        est.n_basis = int(k)
        est._truncate_to(int(k))
        est.history_ = list(self.history_[:k])
        est.n_iter_ = len(est.history_)
        est.stop_reason_ = "prefix"
        if getattr(est, "calibrator_", None) is not None:  # calibrated for the whole model, not for its prefix
            est.calibrator_ = None
        if getattr(est, "size_choice_", None) is not None:
            est.size_choice_ = None  # the line on the size n_basis="auto" kept is the full model's
        return est

    def _truncate_to(self, k):
        """Replace the model by the fit's prefix model of size ``k`` (fitted attributes only)."""
        exp = self._path.prefix_expansion(k)
        self.expansion_ = exp
        self.dual_coef_ = exp.coef
        self.intercept_ = exp.intercept
        self.basis_vectors_ = exp.support_vectors
        self.basis_indices_ = np.asarray(self.basis_indices_)[:k]
        self.basis_kernels_ = np.asarray(self.basis_kernels_)[:k]
        self.n_basis_ = k
