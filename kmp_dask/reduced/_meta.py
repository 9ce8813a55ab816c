"""Fit-then-compress in one scikit-learn estimator: :class:`ReducedSetClassifier`, :class:`ReducedSetRegressor`.

:class:`~kmp_dask.reduced.ReducedSetCompressor` takes an already fitted model; these meta-estimators
take ``fit(X, y)`` like any scikit-learn estimator: they fit a clone of ``estimator`` (default an
RBF ``SVC`` / ``KernelRidge``), then compress it with the training rows as the candidate pool
(and their labels for the thresholds). So a compressed kernel model can sit in a ``Pipeline``,
be grid-searched over ``n_vectors``, and pass scikit-learn's own estimator checks.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVC
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._compressor import ReducedSetCompressor

__all__ = ["ReducedSetClassifier", "ReducedSetRegressor"]


class _ReducedSetModel(BaseEstimator):
    _default_estimator = None

    def __init__(self, estimator=None, *, n_vectors=0.2, method="hmp", backfit=True, candidates="all",
                 coupled="auto", optimize_threshold=False, refit="rkhs", criterion="decrease", exchange=0,
                 exchange_guard=True, random_state=None, client=None):
        self.estimator = estimator
        self.n_vectors = n_vectors
        self.method = method
        self.backfit = backfit
        self.candidates = candidates
        self.coupled = coupled
        self.optimize_threshold = optimize_threshold
        self.refit = refit
        self.criterion = criterion
        self.exchange = exchange
        self.exchange_guard = exchange_guard
        self.random_state = random_state
        self.client = client

    def _fit(self, X, y, checkpoint=None, checkpoint_every=10, resume=False):
        est = clone(self.estimator) if self.estimator is not None else self._default_estimator()
        probability = bool(getattr(self, "probability", False))
        X, y, X_cal, y_cal = _calibration_split(X, y, self.random_state) if probability else (X, y, None, None)
        self.estimator_ = est.fit(X, y)
        comp = ReducedSetCompressor(
            n_vectors=self.n_vectors, method=self.method, backfit=self.backfit, candidates=self.candidates,
            coupled=self.coupled, optimize_threshold=self.optimize_threshold, refit=self.refit,
            criterion=self.criterion, exchange=self.exchange, exchange_guard=self.exchange_guard,
            random_state=self.random_state, client=self.client, probability=probability)
        self.compressor_ = comp.fit(self.estimator_, X, y, X_val=X_cal, y_val=y_cal, checkpoint=checkpoint,
                                    checkpoint_every=checkpoint_every, resume=resume)
        self.expansion_ = comp.expansion_
        self.n_vectors_ = comp.n_vectors_
        return self


def _calibration_split(X, y, random_state):
    """``probability=True``: hold out :data:`~kmp_dask.estimators._calibration.PROBABILITY_HOLDOUT`
    of the rows (stratified when every class has two rows or more) to calibrate the compressed
    model's probabilities; the model is fitted and compressed on the rest."""
    from sklearn.model_selection import train_test_split

    from ..estimators._calibration import PROBABILITY_HOLDOUT

    seed = random_state if isinstance(random_state, (int, np.integer)) else 0
    n_held = max(int(round(PROBABILITY_HOLDOUT * len(y))), len(np.unique(y)))
    if n_held >= len(y):  # too few rows to hold any out: calibrate on the pool (the model's errors follow)
        return X, y, None, None
    try:
        X_fit, X_cal, y_fit, y_cal = train_test_split(X, y, test_size=n_held, random_state=seed, stratify=y)
    except ValueError:  # a class with a single row: no stratified split
        X_fit, X_cal, y_fit, y_cal = train_test_split(X, y, test_size=n_held, random_state=seed)
    return X_fit, y_fit, X_cal, y_cal


class ReducedSetClassifier(ClassifierMixin, _ReducedSetModel):
    """Fit a kernel classifier (default ``SVC(kernel="rbf")``) and keep a reduced-set version.

    Attributes: ``estimator_`` (the full model), ``compressor_``, ``expansion_``, ``n_vectors_``,
    ``classes_``.

    Parameters
    ----------
    estimator : estimator object or None, default=None
        The model to fit and compress: any classifier
        :func:`~kmp_dask.reduced.as_compression_target` accepts (None: ``SVC(kernel="rbf")``).
    n_vectors, method, backfit, candidates, coupled, optimize_threshold, refit
        As for :class:`~kmp_dask.reduced.ReducedSetCompressor`.
    criterion, exchange, exchange_guard, random_state, client
        As for :class:`~kmp_dask.reduced.ReducedSetCompressor`.
    probability : bool, default=False
        ``predict_proba``: 10 % of the rows (stratified) are held out, the estimator is fitted and
        compressed on the rest, and the compressed decision values are calibrated on the held-out
        rows (multinomial logistic regression; Platt's sigmoid for two classes).
    """

    _default_estimator = staticmethod(lambda: SVC(kernel="rbf"))

    def __init__(self, estimator=None, *, n_vectors=0.2, method="hmp", backfit=True, candidates="all",
                 coupled="auto", optimize_threshold=False, refit="rkhs", criterion="decrease", exchange=0,
                 exchange_guard=True, random_state=None, client=None, probability=False):
        super().__init__(estimator, n_vectors=n_vectors, method=method, backfit=backfit, candidates=candidates,
                         coupled=coupled, optimize_threshold=optimize_threshold, refit=refit, criterion=criterion,
                         exchange=exchange, exchange_guard=exchange_guard, random_state=random_state, client=client)
        self.probability = probability

    def _has_proba(self):
        if not hasattr(self, "compressor_"):
            return bool(self.probability)
        return getattr(self.compressor_, "calibrator_", None) is not None

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities of the compressed model (``probability=True``)."""
        check_is_fitted(self, "compressor_")
        X = validate_data(self, X, reset=False)
        return self.compressor_.predict_proba(X)

    def fit(self, X, y, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Fit the estimator, then compress it with (X, y) as the pool. ``checkpoint``,
        ``checkpoint_every``, ``resume``: the compression's checkpoint
        (:meth:`ReducedSetCompressor.fit <kmp_dask.reduced.ReducedSetCompressor.fit>`); the
        estimator is fitted again on resume, and the checkpoint is refused (its model digest
        differs) unless that fit gives the same model."""
        X, y = validate_data(self, X, y)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        return self._fit(X, y, checkpoint, checkpoint_every, resume)

    def decision_function(self, X):
        """Decision values of the compressed model (shaped as the original estimator's)."""
        check_is_fitted(self, "compressor_")
        X = validate_data(self, X, reset=False)
        return self.compressor_.decision_function(X)

    def predict(self, X):
        """Predicted classes. A one-vs-one model with the one-vs-rest decision view (SVC's
        default) predicts the argmax of that view, so ``predict`` agrees with
        ``decision_function`` even where pairwise votes tie (a compressed model meets ties that
        libsvm's vote would send to the lowest class)."""
        check_is_fitted(self, "compressor_")
        X = validate_data(self, X, reset=False)
        if self.compressor_._ovr_view:
            return self.classes_.take(np.argmax(self.compressor_.decision_function(X), axis=1))
        return self.compressor_.predict(X)


class ReducedSetRegressor(RegressorMixin, _ReducedSetModel):
    """Fit a kernel regressor (default ``KernelRidge(kernel="rbf")``) and keep a reduced-set version.

    Parameters
    ----------
    estimator : estimator object or None, default=None
        The model to fit and compress: any regressor
        :func:`~kmp_dask.reduced.as_compression_target` accepts (None: ``KernelRidge(kernel="rbf")``).
    n_vectors, method, backfit, candidates, coupled, optimize_threshold, refit
        As for :class:`~kmp_dask.reduced.ReducedSetCompressor` (``optimize_threshold`` has no effect).
    criterion, exchange, exchange_guard, random_state, client
        As for :class:`~kmp_dask.reduced.ReducedSetCompressor`.
    """

    _default_estimator = staticmethod(lambda: KernelRidge(kernel="rbf"))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # a multi-target model is compressed with coupled selection
        return tags

    def fit(self, X, y, *, checkpoint=None, checkpoint_every=10, resume=False):
        """As :meth:`ReducedSetClassifier.fit`."""
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True)
        return self._fit(X, y, checkpoint, checkpoint_every, resume)

    def predict(self, X):
        check_is_fitted(self, "compressor_")
        X = validate_data(self, X, reset=False)
        return self.compressor_.predict(X)
