"""Class probabilities from decision values: :class:`PlattCalibrator` (``probability=True``).

A classifier trained with the squared loss (KMP's default), a core vector machine or a
compressed SVC gives decision values, not probabilities. As ``SVC(probability=True)`` does, a
classifier asked for ``probability=True`` fits a map from its decision values ``F`` (n × m) to
class probabilities on rows it was **not** trained on (training rows' values are too confident:
Platt 1999).

The map is a **multinomial logistic regression on the decision values**,
``p = softmax(F A + c)``: for two classes (one output) this is Platt's sigmoid
``P(classes_[1]) = σ(a F + b)``. For k classes it is one model whose probabilities sum to 1 by
construction, and it reads every output at once — the k one-vs-rest values of a KMP or CVM
model, the k(k−1)/2 pairwise values of a compressed one-vs-one SVC alike — where one-vs-rest
sigmoids would need an ad-hoc renormalisation and would not apply to pairwise outputs at all.
It is fitted by scikit-learn's ``LogisticRegression`` (L-BFGS, its default ``C = 1``: the L2 term
keeps the fit finite when the held-out rows are separable, Platt's reason for smoothing his
targets). With m outputs it has (m + 1) k parameters, a few dozen: a few hundred held-out rows
determine it.

A class absent from the held-out rows gets the probability ``1 / (n_held + k)`` everywhere (the
others share the rest): a tiny class must not be certain never to occur.

This module holds the map and its fit (in this process, on the held-out rows' values); which
rows are held out is the estimator's business (KMP: the rows its validation split holds out by
hash, ``docs/estimators.md``). The map is a plain value saved with the model in the open format.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["PlattCalibrator", "PROBABILITY_HOLDOUT", "CALIBRATION_ROWS", "calibration_fraction"]

PROBABILITY_HOLDOUT = 0.1
"""Fraction of the rows a ``probability=True`` fit holds out when it has no validation split of its
own (``validation_fraction=0``): they are not trained on, and calibrate the probabilities."""

CALIBRATION_ROWS = 50_000
"""At most about this many held-out rows are read back to calibrate (a sub-split of the same hash):
the map has a few dozen parameters."""


def calibration_fraction(fraction: float, n_rows: int) -> float:
    """The hash fraction whose rows calibrate: the held-out ``fraction``, lowered so that about
    :data:`CALIBRATION_ROWS` rows are read back from a large data set (the rows with hash
    ``u < f`` are a subset of those with ``u < fraction``, so they are all held out)."""
    return float(min(fraction, CALIBRATION_ROWS / max(int(n_rows), 1)))


#: The smallest slope of a binary calibration sigmoid (decision values of ±1 targets are of order
#: 1): probabilities keep the decision values' order (a larger decision value never gets a smaller
#: probability), even when the held-out rows cannot say more.
MIN_SLOPE = 1e-6


def _increasing_sigmoid(f, codes, sample_weight):
    """``(coef (1, 1), intercept (1,))`` of Platt's sigmoid ``1 / (1 + exp(−(a f + c)))`` fitted with
    ``a`` at least :data:`MIN_SLOPE`, and the same L2 penalty ``a² / 2`` as the unconstrained
    fit's (``C=1``). On held-out rows whose classes run against the decision values the slope
    sits at the bound: nearly flat probabilities that still rank the rows as the model does."""
    from scipy.optimize import minimize

    f = np.asarray(f, dtype=np.float64)
    s = np.where(np.asarray(codes) == 1, 1.0, -1.0)
    w = np.ones_like(f) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)

    def loss(v):
        z = s * (v[0] * f + v[1])
        g = -s * w * 0.5 * (1.0 - np.tanh(z / 2))  # d/dz log(1 + e^−z) = −1 / (1 + e^z)
        return float(np.sum(w * np.logaddexp(0.0, -z)) + v[0] ** 2 / 2), np.array([g @ f + v[0], g.sum()])

    res = minimize(loss, np.array([MIN_SLOPE, 0.0]), jac=True, method="L-BFGS-B",
                   bounds=[(MIN_SLOPE, None), (None, None)])
    return np.array([[res.x[0]]]), np.array([res.x[1]])


class PlattCalibrator:
    """``p = softmax(F A + c)`` over the classes present on the held-out rows (module docstring).

    Attributes
    ----------
    coef : ndarray (m, k) — A (zero columns for absent classes; binary: one column, class 1)
    intercept : ndarray (k,) — c (binary: one value)
    present : ndarray (k,) of bool — classes seen on the held-out rows (binary: both)
    floor : float — the probability of each absent class
    n_rows : int — the held-out rows it was fitted on
    """

    def __init__(self, coef, intercept, present, floor: float, n_rows: int):
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.present = np.asarray(present, dtype=bool)
        self.floor = float(floor)
        self.n_rows = int(n_rows)

    @classmethod
    def fit(cls, F, codes, n_classes: int, sample_weight=None) -> PlattCalibrator:
        """Fit on decision values ``F`` (n, m) of held-out rows whose classes are ``codes`` (n,)
        (indices into the model's ``classes_``); ``sample_weight``: the rows' weights or None.

        Held-out rows of one class give that class's smoothed share everywhere (and a warning)."""
        from sklearn.linear_model import LogisticRegression

        F = _two_d(F)
        codes = np.asarray(codes, dtype=np.int64).reshape(-1)
        seen = np.unique(codes)
        present = np.zeros(n_classes, dtype=bool)
        present[seen] = True
        floor = 1.0 / (len(codes) + n_classes)
        if len(seen) < 2:  # nothing to fit: the smoothed share of the held-out rows' one class
            warnings.warn(
                f"probability=True: the {len(codes)} held-out rows hold {len(seen)} class; predict_proba gives "
                f"{1 - floor * (n_classes - 1):.3g} to it and {floor:.3g} to each other class, whatever the row "
                "(two classes: to within a rounding step, ordered by the decision values). Hold out more rows "
                "(validation_fraction, e.g. 0.2) or fit on more data", UserWarning, stacklevel=3)
            coef, intercept = np.zeros((F.shape[1], 1 if n_classes == 2 else n_classes)), np.zeros(n_classes)
            if n_classes == 2:  # one sigmoid: its intercept gives the present class 1 − floor, and the
                # smallest slope keeps the rows in the decision values' order (predict_proba ranks as they do)
                intercept = np.array([np.log((1 - floor) / floor) * (1 if present[1] else -1)])
                coef[:] = MIN_SLOPE
            return cls(coef, intercept, present, floor, len(codes))
        lr = LogisticRegression(C=1.0, max_iter=1000).fit(F, codes, sample_weight=sample_weight)
        if n_classes == 2:
            coef, intercept = lr.coef_.T, lr.intercept_
            if F.shape[1] == 1 and not coef[0, 0] > 0:  # a few held-out rows ordered the classes against F
                coef, intercept = _increasing_sigmoid(F[:, 0], codes, sample_weight)
            return cls(coef, intercept, present, 0.0, len(codes))
        coef = np.zeros((F.shape[1], n_classes))
        intercept = np.zeros(n_classes)
        coef[:, seen] = lr.coef_.T if len(seen) > 2 else np.hstack([-lr.coef_.T, lr.coef_.T]) / 2
        intercept[seen] = lr.intercept_ if len(seen) > 2 else np.array([-lr.intercept_[0], lr.intercept_[0]]) / 2
        return cls(coef, intercept, present, floor, len(codes))

    def predict_proba(self, F) -> np.ndarray:
        """Class probabilities (n, k) of decision values ``F`` (n, m); rows sum to 1."""
        Z = _two_d(F).astype(np.float64) @ self.coef + self.intercept
        if self.present.size == 2:  # (present marks the absent class of a one-class fit: its sigmoid says so)
            p1 = 1.0 / (1.0 + np.exp(-np.clip(Z[:, 0], -500, 500)))
            return np.column_stack([1.0 - p1, p1])
        Z = np.where(self.present, Z, -np.inf)
        Z -= Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        P *= (1.0 - self.floor * np.count_nonzero(~self.present)) / P.sum(axis=1, keepdims=True)
        P[:, ~self.present] = self.floor
        return P


def _two_d(F) -> np.ndarray:
    F = np.asarray(F)
    return F.reshape(-1, 1) if F.ndim == 1 else F


def proba_block(F, calibrator: PlattCalibrator) -> np.ndarray:
    """``calibrator.predict_proba`` as a module-level function (what dask maps over row blocks)."""
    return calibrator.predict_proba(F)
