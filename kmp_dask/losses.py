"""Losses for kernel matching pursuit by gradient descent in function space (Vincent & Bengio §3).

A loss is a small frozen dataclass with three element-wise functions of the target ``y`` and the
current function value ``f`` (arrays of shape (n, m), one column per output):

``value(y, f)``     L(y, f)
``gradient(y, f)``  ∂L/∂f — the pursuit fits its negative (the squared loss's residual)
``hessian(y, f)``   a non-negative curvature (∂²L/∂f², or its Gauss–Newton part where ∂²L/∂f²
                    can be negative) used by the Newton line search and the Newton refit

plus ``kind`` (``"classification"`` on ±1 targets, or ``"regression"``). Adding a loss touches
this module only: write the class and add it to :data:`LOSSES`.

Classification losses see one-vs-rest targets y ∈ {−1, +1}. All functions are numerically safe
for large |f| (``np.logaddexp``, clipped exponents).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

__all__ = ["Loss", "SquaredLoss", "TanhLoss", "LogisticLoss", "ExponentialLoss", "SquaredHingeLoss",
           "HuberLoss", "LOSSES", "get_loss"]

_EXP_MAX = 50.0  # exp(50) ≈ 5e21: large enough to mean "huge", small enough to stay finite in sums


class Loss(abc.ABC):
    """Base class; see the module docstring for the contract."""

    name = "loss"
    kind = "both"

    @abc.abstractmethod
    def value(self, y, f):
        """Element-wise loss L(y, f)."""

    @abc.abstractmethod
    def gradient(self, y, f):
        """Element-wise ∂L/∂f."""

    @abc.abstractmethod
    def hessian(self, y, f):
        """Element-wise non-negative curvature."""

    def targets(self, y_pm1):
        """Targets the loss compares ``f`` with (identity except for KMP-tanh)."""
        return y_pm1


@dataclass(frozen=True)
class SquaredLoss(Loss):
    """½ (f − y)²: plain KMP; the engine's exact least-squares path handles it directly."""

    name = "squared"
    kind = "both"

    def value(self, y, f):
        return 0.5 * (f - y) ** 2

    def gradient(self, y, f):
        return f - y

    def hessian(self, y, f):
        return np.ones_like(f)


@dataclass(frozen=True)
class TanhLoss(Loss):
    """½ (tanh f − t)² with modified targets t = ±``target`` (Vincent & Bengio's KMP-tanh).

    The Hessian returned is the Gauss–Newton part (1 − tanh² f)², always ≥ 0.
    """

    target: float = 0.65
    name = "tanh"
    kind = "classification"

    def targets(self, y_pm1):
        return self.target * y_pm1

    def value(self, y, f):
        return 0.5 * (np.tanh(f) - y) ** 2

    def gradient(self, y, f):
        a = np.tanh(f)
        return (a - y) * (1.0 - a * a)

    def hessian(self, y, f):
        a = np.tanh(f)
        return (1.0 - a * a) ** 2


def _sigmoid(z):
    return np.exp(-np.logaddexp(0.0, -z))


@dataclass(frozen=True)
class LogisticLoss(Loss):
    """log(1 + exp(−y f)) — LogitBoost-style KMP; gives probabilities through σ(f)."""

    name = "logistic"
    kind = "classification"

    def value(self, y, f):
        return np.logaddexp(0.0, -y * f)

    def gradient(self, y, f):
        return -y * _sigmoid(-y * f)

    def hessian(self, y, f):
        p = _sigmoid(y * f)
        return p * (1.0 - p)


@dataclass(frozen=True)
class ExponentialLoss(Loss):
    """exp(−y f) — AdaBoost-style KMP."""

    name = "exponential"
    kind = "classification"

    def value(self, y, f):
        return np.exp(np.minimum(-y * f, _EXP_MAX))

    def gradient(self, y, f):
        return -y * self.value(y, f)

    def hessian(self, y, f):
        return self.value(y, f)


@dataclass(frozen=True)
class SquaredHingeLoss(Loss):
    """max(0, 1 − y f)² — the L2-SVM loss."""

    name = "squared_hinge"
    kind = "classification"

    def value(self, y, f):
        return np.maximum(0.0, 1.0 - y * f) ** 2

    def gradient(self, y, f):
        return -2.0 * y * np.maximum(0.0, 1.0 - y * f)

    def hessian(self, y, f):
        return 2.0 * (1.0 - y * f > 0).astype(f.dtype)


@dataclass(frozen=True)
class HuberLoss(Loss):
    """Huber loss with threshold ``delta``: quadratic near 0, linear beyond (regression)."""

    delta: float = 1.0
    name = "huber"
    kind = "regression"

    def value(self, y, f):
        r = np.abs(f - y)
        return np.where(r <= self.delta, 0.5 * r * r, self.delta * (r - 0.5 * self.delta))

    def gradient(self, y, f):
        return np.clip(f - y, -self.delta, self.delta)

    def hessian(self, y, f):
        return (np.abs(f - y) <= self.delta).astype(np.float64)


LOSSES = {
    "squared": SquaredLoss,
    "tanh": TanhLoss,
    "logistic": LogisticLoss,
    "exponential": ExponentialLoss,
    "squared_hinge": SquaredHingeLoss,
    "huber": HuberLoss,
}


def get_loss(loss, *, kind: str, params: dict | None = None) -> Loss:
    """Resolve a loss name (or :class:`Loss` instance) for an estimator of ``kind``."""
    if isinstance(loss, Loss):
        obj = loss
    else:
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)} or a Loss instance; got {loss!r}")
        try:
            obj = LOSSES[loss](**(params or {}))
        except TypeError as exc:
            raise ValueError(f"bad parameters {params!r} for loss {loss!r}: {exc}") from None
    if obj.kind not in ("both", kind):
        raise ValueError(
            f"loss {obj.name!r} is a {obj.kind} loss and cannot be used by a {kind} estimator; "
            f"choose one of {sorted(n for n, c in LOSSES.items() if c.kind in ('both', kind))}"
        )
    return obj
