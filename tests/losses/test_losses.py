"""Every loss: gradient and curvature against finite differences; registry and errors."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask.losses import LOSSES, get_loss

CLASSIFICATION = [n for n, c in LOSSES.items() if c.kind in ("both", "classification")]


def _points(name, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.normal(scale=2.0, size=(200, 3))
    if LOSSES[name].kind == "classification":
        y = np.where(rng.random((200, 3)) < 0.5, -1.0, 1.0)
    else:
        y = rng.normal(scale=2.0, size=(200, 3))
    return y, f


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradient_matches_finite_differences(name):
    loss = get_loss(name, kind=LOSSES[name].kind if LOSSES[name].kind != "both" else "regression")
    y, f = _points(name)
    if name == "squared_hinge":  # keep away from the kink at y f = 1
        f = np.where(np.abs(1 - y * f) < 1e-3, f + 0.01, f)
    if name == "huber":  # and from |f − y| = delta
        f = np.where(np.abs(np.abs(f - y) - 1.0) < 1e-3, f + 0.01, f)
    h = 1e-6
    fd = (loss.value(y, f + h) - loss.value(y, f - h)) / (2 * h)
    np.testing.assert_allclose(loss.gradient(y, f), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["squared", "logistic", "exponential", "squared_hinge", "huber"])
def test_hessian_matches_finite_differences_of_gradient(name):
    loss = get_loss(name, kind="regression" if name in ("squared", "huber") else "classification")
    y, f = _points(name, seed=1)
    f = np.where(np.abs(1 - y * f) < 1e-3, f + 0.01, f)
    f = np.where(np.abs(np.abs(f - y) - 1.0) < 1e-3, f + 0.01, f)
    h = 1e-6
    fd = (loss.gradient(y, f + h) - loss.gradient(y, f - h)) / (2 * h)
    np.testing.assert_allclose(loss.hessian(y, f), fd, rtol=1e-5, atol=1e-6)


def test_tanh_uses_gauss_newton_curvature_and_modified_targets():
    loss = get_loss("tanh", kind="classification", params={"target": 0.65})
    y = loss.targets(np.array([[-1.0], [1.0]]))
    np.testing.assert_array_equal(y, [[-0.65], [0.65]])
    f = np.array([[0.3], [-2.0]])
    np.testing.assert_allclose(loss.hessian(y, f), (1 - np.tanh(f) ** 2) ** 2)
    assert np.all(loss.hessian(y, f) >= 0)


def test_losses_are_finite_for_huge_margins():
    for name in CLASSIFICATION:
        loss = get_loss(name, kind="classification")
        y = np.array([[1.0], [-1.0], [1.0]])
        f = np.array([[1e4], [1e4], [-1e4]])
        for fn in (loss.value, loss.gradient, loss.hessian):
            assert np.all(np.isfinite(fn(y, f))), (name, fn)


def test_registry_errors_name_the_problem():
    with pytest.raises(ValueError, match="loss must be one of"):
        get_loss("hinge", kind="classification")
    with pytest.raises(ValueError, match="is a regression loss"):
        get_loss("huber", kind="classification")
    with pytest.raises(ValueError, match="is a classification loss"):
        get_loss("logistic", kind="regression")
    with pytest.raises(ValueError, match="bad parameters"):
        get_loss("huber", kind="regression", params={"width": 2})
