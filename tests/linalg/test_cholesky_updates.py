"""IncrementalCholesky's growing-and-shrinking operations (the CVM core-set QP's) against NumPy.

After a random sequence of single appends, block appends, removals at any position and
refactorisations, the factor must equal ``numpy.linalg.cholesky`` of the current matrix (the
rows and columns of the points factored, in their order), and its row-blocked solves must equal
``numpy.linalg.solve``. Sizes go past the solves' 128-row block.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kmp_dask.linalg import IncrementalCholesky, back_substitution, forward_substitution

RTOL = 1e-14


def _gram(n_points=170, dim=300, seed=0):
    B = np.random.default_rng(seed).standard_normal((dim, n_points))
    return B.T @ B / dim


def _check(chol, A, order, ridge, rng):
    """The factor of ``A[order, order] + ridge I`` and its solves, against dense NumPy."""
    M = A[np.ix_(order, order)] + ridge * np.eye(len(order))
    assert chol.size == len(order)
    if not order:
        return
    assert_allclose(chol.L, np.linalg.cholesky(M), rtol=1e-9, atol=1e-9)
    b = rng.standard_normal((len(order), 2))
    assert_allclose(chol.forward(b), np.linalg.solve(chol.L, b), rtol=1e-8, atol=1e-8)
    assert_allclose(chol.backward(b[:, 0]), np.linalg.solve(chol.L.T, b[:, 0]), rtol=1e-8, atol=1e-8)
    assert_allclose(chol.backward(chol.forward(b)), np.linalg.solve(M, b), rtol=1e-7, atol=1e-7)


def _step(chol, A, order, rng):
    """One random operation on the factor, mirrored on ``order``."""
    outside = np.setdiff1d(np.arange(len(A)), order)
    op = rng.choice(["row", "block", "remove", "refactor"], p=[0.45, 0.25, 0.25, 0.05])
    if op == "row" and len(outside):
        i = int(rng.choice(outside))
        assert chol.append_row(A[order, i], A[i, i], rtol=RTOL) is not None
        order.append(i)
    elif op == "block" and len(outside) >= 2:
        idx = [int(i) for i in rng.choice(outside, size=min(len(outside), int(rng.integers(2, 12))), replace=False)]
        assert chol.append_block(A[np.ix_(order, idx)], A[np.ix_(idx, idx)], rtol=RTOL) is not None
        order.extend(idx)
    elif op == "remove" and order:
        p = int(rng.integers(len(order)))
        chol.remove(p)
        del order[p]
    elif op == "refactor" and order:
        rng.shuffle(order)
        chol.refactor(A[np.ix_(order, order)])


@pytest.mark.parametrize("ridge, seed", [(0.0, 0), (0.5, 1)])
def test_random_appends_blocks_removals_match_dense_cholesky(ridge, seed):
    A = _gram(n_points=170, seed=seed)
    rng = np.random.default_rng(seed + 10)
    chol, order = IncrementalCholesky(capacity=4, ridge=ridge), []
    for t in range(300):
        _step(chol, A, order, rng)
        if t % 30 == 29:
            _check(chol, A, order, ridge, rng)
    assert len(order) > 128  # the row-blocked solves ran over more than one block
    _check(chol, A, order, ridge, rng)
    restored = pickle.loads(pickle.dumps(chol))  # checkpoint state after removals
    assert np.array_equal(restored.L, chol.L) and restored.capacity == chol.capacity
    _check(restored, A, order, ridge, rng)


def test_append_row_returns_the_new_row_and_refuses_a_dependent_point():
    A = _gram(n_points=6)
    A = A[np.ix_([0, 1, 2, 1], [0, 1, 2, 1])]  # the last point repeats the second
    chol = IncrementalCholesky(capacity=1)
    for i in range(3):
        v, d = chol.append_row(A[:i, i], A[i, i], rtol=RTOL)
        assert np.array_equal(chol.L[i, :i], v) and chol.L[i, i] == d
    before = chol.L.copy()
    assert chol.append_row(A[:3, 3], A[3, 3], rtol=RTOL) is None
    assert np.array_equal(chol.L, before)
    chol2 = IncrementalCholesky()
    chol2.append_row(A[:0, 0], A[0, 0], rtol=RTOL)
    assert chol2.append_block(A[:1, 1:], A[1:, 1:], rtol=RTOL) is None  # the block holds the duplicate
    assert chol2.size == 1 and chol2.L[0, 0] == np.sqrt(A[0, 0])


def test_refactor_of_a_singular_matrix_adds_a_small_multiple_of_the_identity():
    A = np.ones((3, 3))  # rank one: the plain Cholesky factorisation fails
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(A)
    chol = IncrementalCholesky()
    chol.refactor(A)
    L = chol.L
    assert_allclose(L @ L.T, A + 1e-12 * np.eye(3), rtol=0, atol=1e-15)
    assert chol.capacity == 64


def test_remove_and_append_block_name_what_they_refuse():
    chol = IncrementalCholesky()
    chol.refactor(np.eye(3))
    with pytest.raises(IndexError, match=r"p must be a position in 0\.\.2 .*Got 3"):
        chol.remove(3)
    with pytest.raises(ValueError, match=r"cross must have shape \(3, k\).*Got shape \(3,\)"):
        chol.append_block(np.zeros(3), np.eye(1), rtol=RTOL)


@pytest.mark.parametrize("block", [1, 5, 128])
def test_blocked_substitutions_equal_dense_solves(block):
    A = _gram(n_points=150, seed=3)
    L = np.linalg.cholesky(A)
    b = np.random.default_rng(4).standard_normal((150, 3))
    assert_allclose(forward_substitution(L, b, block=block), np.linalg.solve(L, b), rtol=1e-9, atol=1e-9)
    assert_allclose(back_substitution(L, b, block=block), np.linalg.solve(L.T, b), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_solve_is_scipys_cho_solve_on_the_buffer_bit_for_bit_through_every_change(seed):
    """The Fortran copy of the factor that ``solve`` keeps between calls (grown by appends, dropped
    by removals, refactors, resets) gives exactly scipy's ``cho_solve`` on the factor's block."""
    from scipy.linalg import cho_solve

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 8))
    G = X @ X.T
    chol = IncrementalCholesky(capacity=4, ridge=0.1)
    idx = []

    def check():
        b = rng.normal(size=(chol.size, 3))
        want = cho_solve((np.array(chol.L), True), b, check_finite=False)
        assert np.array_equal(chol.solve(b), want)
        assert np.array_equal(chol.solve(b[:, 0]), cho_solve((np.array(chol.L), True), b[:, 0], check_finite=False))

    for step in range(40):
        j = int(rng.integers(60))
        if j not in idx and chol.append(G[idx, j], G[j, j]):
            idx.append(j)
        if chol.size:
            check()
        if step % 11 == 10 and chol.size > 2:
            chol.remove(1)
            del idx[1]
            check()
        if step == 25:
            chol.refactor(G[np.ix_(idx, idx)])
            check()
    chol.reset()
    for j in range(5):
        chol.append(G[:j, j], G[j, j])
    check()
