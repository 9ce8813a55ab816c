"""IncrementalCholesky against dense NumPy factorisations and solves."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kmp_dask.linalg import IncrementalCholesky

RIDGES = [0.0, 0.5]


@pytest.fixture
def atoms():
    """Columns B (n_samples=30, n_atoms=12) in general position."""
    return np.random.default_rng(0).standard_normal((30, 12))


def _factor(B, *, ridge=0.0, capacity=64):
    chol = IncrementalCholesky(capacity, ridge=ridge)
    for k in range(B.shape[1]):
        assert chol.append(B[:, :k].T @ B[:, k], B[:, k] @ B[:, k])
    return chol


@pytest.mark.parametrize("ridge", RIDGES)
def test_factor_equals_dense_cholesky_at_every_step(atoms, ridge):
    """After k appends, L == cholesky(G[:k, :k] + ridge I) with G = B^T B."""
    chol = IncrementalCholesky(capacity=2, ridge=ridge)
    G = atoms.T @ atoms
    for k in range(atoms.shape[1]):
        assert chol.append(G[:k, k], G[k, k])
        expected = np.linalg.cholesky(G[: k + 1, : k + 1] + ridge * np.eye(k + 1))
        assert chol.size == k + 1
        assert_allclose(chol.L, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("ridge", RIDGES)
@pytest.mark.parametrize("n_rhs", [None, 3])
def test_solve_equals_dense_solve(atoms, ridge, n_rhs):
    chol = _factor(atoms, ridge=ridge)
    A = atoms.T @ atoms + ridge * np.eye(atoms.shape[1])
    shape = (atoms.shape[1],) if n_rhs is None else (atoms.shape[1], n_rhs)
    b = np.random.default_rng(1).standard_normal(shape)
    x = chol.solve(b)
    assert x.shape == shape
    assert_allclose(x, np.linalg.solve(A, b), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_rhs", [None, 4])
def test_solve_lower_is_forward_substitution(atoms, n_rhs):
    chol = _factor(atoms)
    shape = (atoms.shape[1],) if n_rhs is None else (atoms.shape[1], n_rhs)
    b = np.random.default_rng(2).standard_normal(shape)
    x = chol.solve_lower(b)
    assert x.shape == shape
    assert_allclose(chol.L @ x, b, rtol=1e-10, atol=1e-10)


def test_duplicated_column_breaks_down_and_leaves_state_untouched(atoms):
    chol = _factor(atoms[:, :5])
    before = chol.L.copy()
    dup = atoms[:, 3]
    assert not chol.append(atoms[:, :5].T @ dup, dup @ dup)
    assert chol.size == 5
    assert_allclose(chol.L, before, rtol=0, atol=0)
    new = atoms[:, 5]
    assert chol.append(atoms[:, :5].T @ new, new @ new)
    assert chol.size == 6


def test_linear_combination_breaks_down(atoms):
    chol = _factor(atoms[:, :4])
    combo = atoms[:, :4] @ np.array([1.0, -2.0, 0.5, 3.0])
    assert not chol.append(atoms[:, :4].T @ combo, combo @ combo)


def test_non_finite_input_breaks_down(atoms):
    chol = _factor(atoms[:, :2])
    assert not chol.append(np.array([np.nan, 1.0]), 10.0)
    assert not chol.append(np.zeros(2), np.inf)
    assert chol.size == 2


def test_ridge_makes_duplicated_column_acceptable(atoms):
    chol = _factor(atoms[:, :3], ridge=1e-3)
    dup = atoms[:, 0]
    assert chol.append(atoms[:, :3].T @ dup, dup @ dup)


def test_capacity_doubles_when_full(atoms):
    chol = IncrementalCholesky(capacity=1)
    G = atoms.T @ atoms
    capacities = []
    for k in range(5):
        chol.append(G[:k, k], G[k, k])
        capacities.append(chol.capacity)
    assert capacities == [1, 2, 4, 4, 8]
    assert_allclose(chol.L, np.linalg.cholesky(G[:5, :5]), rtol=1e-10)
    assert_allclose(np.triu(chol.L, 1), 0.0, atol=0)


@pytest.mark.parametrize("ridge", RIDGES)
def test_pivot_residual_norms_equal_dense_projection_residuals(atoms, ridge):
    """||P_perp d||^2 = ||d||^2 - ||L^{-1} B^T d||^2, checked with lstsq projections."""
    B, D = atoms[:, :6], atoms[:, 6:]
    chol = _factor(B)
    proj = B @ np.linalg.lstsq(B, D, rcond=None)[0]
    expected = np.sum((D - proj) ** 2, axis=0)
    got = chol.pivot_residual_norms(B.T @ D, np.sum(D**2, axis=0))
    assert got.shape == (D.shape[1],)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_pivot_residual_norms_clip_at_zero(atoms):
    B = atoms[:, :4]
    chol = _factor(B)
    got = chol.pivot_residual_norms(B.T @ B, np.sum(B**2, axis=0) - 1e-9)
    assert np.all(got == 0.0)


def test_empty_factor_solves_and_residuals():
    chol = IncrementalCholesky()
    assert chol.size == 0
    assert chol.L.shape == (0, 0)
    assert chol.solve(np.empty(0)).shape == (0,)
    assert_allclose(chol.pivot_residual_norms(np.empty((0, 3)), [1.0, 2.0, 3.0]), [1, 2, 3])


def test_copy_is_independent(atoms):
    chol = _factor(atoms[:, :3])
    clone = chol.copy()
    new = atoms[:, 3]
    assert clone.append(atoms[:, :3].T @ new, new @ new)
    assert (chol.size, clone.size) == (3, 4)
    assert_allclose(clone.L[:3, :3], chol.L, rtol=0, atol=0)


def test_reset_forgets_atoms(atoms):
    chol = _factor(atoms[:, :3])
    chol.reset()
    assert chol.size == 0
    assert chol.append(np.empty(0), 4.0)
    assert_allclose(chol.L, [[2.0]])


def test_L_is_read_only(atoms):
    chol = _factor(atoms[:, :2])
    with pytest.raises(ValueError, match="read-only"):
        chol.L[0, 0] = 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"capacity": 0}, r"capacity must be an int >= 1. Got 0"),
        ({"capacity": 2.5}, r"capacity must be an int >= 1. Got 2.5"),
        ({"ridge": -1.0}, r"ridge must be a finite float >= 0. Got -1.0"),
        ({"ridge": float("nan")}, r"ridge must be a finite float >= 0. Got nan"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        IncrementalCholesky(**kwargs)


def test_shape_mismatch_errors(atoms):
    chol = _factor(atoms[:, :3])
    with pytest.raises(ValueError, match=r"cross must have shape \(3,\).*Got shape \(2,\)"):
        chol.append(np.zeros(2), 1.0)
    with pytest.raises(ValueError, match=r"b must have shape \(3,\).*Got shape \(4,\)"):
        chol.solve(np.zeros(4))


def test_solve_upper_is_the_back_substitution_on_the_leading_block(atoms):
    """``solve_upper(b, k)`` is ``L_k⁻ᵀ b`` (dense oracle) and, bit for bit, the scipy call the
    families made on ``L`` before (its layout decides the LAPACK variant, so it is kept)."""
    from scipy.linalg import solve_triangular

    chol = _factor(atoms, capacity=20)  # buffer larger than the factor: sliced, non-contiguous
    L, b = np.array(chol.L), np.random.default_rng(1).standard_normal((12, 3))
    for k in (1, 5, 12):
        got = chol.solve_upper(b[:k], k)
        assert_allclose(got, np.linalg.solve(L[:k, :k].T, b[:k]), rtol=1e-10, atol=1e-12)
        assert np.array_equal(got, solve_triangular(chol.L[:k, :k].T, b[:k], lower=False))
        sub = IncrementalCholesky.of_factor(L).solve_upper(b[:k], k)
        assert np.array_equal(sub, solve_triangular(L[:k, :k].T, b[:k], lower=False))
    assert np.array_equal(IncrementalCholesky.of_factor(L).solve_upper(b), solve_triangular(L.T, b, lower=False))
    with pytest.raises(ValueError, match="size must be in 0..12"):
        chol.solve_upper(b, 13)


def test_of_factor_is_a_read_only_view_that_grows_into_a_copy(atoms):
    L = np.array(_factor(atoms[:, :4]).L)
    f = IncrementalCholesky.of_factor(L)
    assert f.size == 4 and np.shares_memory(f.L, L)
    with pytest.raises(ValueError):
        f.remove(0)  # read-only: the result's factor is never changed in place
    B = atoms[:, :5]
    assert f.append(B[:, :4].T @ B[:, 4], B[:, 4] @ B[:, 4]) and f.size == 5
    assert_allclose(f.L @ f.L.T, B.T @ B, rtol=1e-10)
    assert np.array_equal(L, np.array(_factor(atoms[:, :4]).L))
    with pytest.raises(ValueError, match="square"):
        IncrementalCholesky.of_factor(np.zeros((2, 3)))


@pytest.mark.parametrize("n_rhs", [None, 3])
@pytest.mark.parametrize("capacity", [1, 7, 64])
def test_solve_lower_on_the_buffer_rounds_as_the_copying_lapack_call(capacity, n_rhs):
    """solve_lower reads the factor in place (no copy of the strided leading block) and must give
    the copying f2py call's result bit for bit: the models of every int n_basis depend on it."""
    from kmp_dask.linalg._cholesky import _solve_lower

    rng = np.random.default_rng(capacity)
    A = rng.normal(size=(60, 40)) * np.logspace(-3, 3, 40)
    chol = IncrementalCholesky(capacity=capacity, ridge=1e-6)
    for j in range(40):
        n = chol.size
        b = rng.normal(size=(n,) if n_rhs is None else (n, n_rhs))
        if n:
            x = chol.solve_lower(b)
            ref = _solve_lower(np.array(chol.L), b) if chol.capacity == n else _solve_lower(chol._buffer[:n, :n], b)
            assert x.shape == ref.shape and np.array_equal(x, ref)
        chol.append(A[:, :j].T @ A[:, j], float(A[:, j] @ A[:, j]))
    assert chol.size == 40
