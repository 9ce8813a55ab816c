"""Kernel block functions against scikit-learn, plus Kernel / get_kernel API."""

import json
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from sklearn.metrics import pairwise

from kmp_dask.kernels import (
    KERNELS,
    Kernel,
    get_kernel,
    laplacian,
    linear,
    polynomial,
    rbf,
    register_kernel,
    sigmoid,
)

# name -> (our block function, sklearn reference, params)
CASES = {
    "rbf": (rbf, pairwise.rbf_kernel, {"gamma": 0.3}),
    "laplacian": (laplacian, pairwise.laplacian_kernel, {"gamma": 0.3}),
    "polynomial": (
        polynomial,
        pairwise.polynomial_kernel,
        {"gamma": 0.2, "degree": 3, "coef0": 0.5},
    ),
    "sigmoid": (sigmoid, pairwise.sigmoid_kernel, {"gamma": 0.1, "coef0": 0.2}),
    "linear": (linear, pairwise.linear_kernel, {}),
}
TOL = {np.float32: {"rtol": 1e-5, "atol": 1e-5}, np.float64: {"rtol": 1e-12, "atol": 1e-12}}


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _blocks(rng, dtype, n=17, s=9, d=5):
    return rng.standard_normal((n, d)).astype(dtype), rng.standard_normal((s, d)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_block_matches_sklearn_and_keeps_dtype(rng, name, dtype):
    fn, reference, params = CASES[name]
    X, Y = _blocks(rng, dtype)
    K = fn(X, Y, **params)
    assert K.dtype == dtype
    assert K.shape == (len(X), len(Y))
    expected = reference(X.astype(np.float64), Y.astype(np.float64), **params)
    assert_allclose(K, expected, **TOL[dtype])


@pytest.mark.parametrize("name", sorted(CASES))
def test_mixed_float32_float64_gives_float64(rng, name):
    fn, _, params = CASES[name]
    X, Y = _blocks(rng, np.float32)
    assert fn(X, Y.astype(np.float64), **params).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_diag_equals_diagonal_of_full_block(rng, name, dtype):
    X, _ = _blocks(rng, dtype)
    kernel = Kernel(name, CASES[name][2])
    diag = kernel.diag(X)
    assert diag.dtype == dtype
    assert_allclose(diag, np.diag(kernel(X, X)), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_identical_rows_give_exactly_one(rng, dtype):
    X = (100.0 * rng.standard_normal((30, 40))).astype(dtype)
    Y = X[::-1].copy()
    K = rbf(X, Y, gamma=1e-6)
    assert np.all(K[np.arange(30), np.arange(30)[::-1]] == 1.0)
    assert np.all(K <= 1.0)
    assert not np.isnan(K).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_never_above_one_or_nan_for_near_duplicates(rng, dtype):
    X = rng.standard_normal((50, 8)).astype(dtype) * 1e3
    Y = X + np.asarray(1e-6, dtype=dtype) * rng.standard_normal(X.shape).astype(dtype)
    K = rbf(X, Y, gamma=10.0)
    assert np.all(K <= 1.0)
    assert np.isfinite(K).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_precomputed_sqnorms_and_out_give_same_result(rng, dtype):
    X, Y = _blocks(rng, dtype)
    out = np.empty((len(X), len(Y)), dtype=dtype)
    K = rbf(
        X,
        Y,
        gamma=0.3,
        X_sqnorm=np.einsum("ij,ij->i", X, X),
        Y_sqnorm=np.einsum("ij,ij->i", Y, Y),
        out=out,
    )
    assert K is out
    assert_allclose(K, rbf(X, Y, gamma=0.3), rtol=0, atol=0)


def test_rbf_row_slabs_do_not_change_result(rng, monkeypatch):
    import kmp_dask.kernels._rbf as rbf_module

    X, Y = _blocks(rng, np.float64, n=50, s=7)
    expected = pairwise.rbf_kernel(X, Y, gamma=0.3)
    monkeypatch.setattr(rbf_module, "_SLAB_ELEMENTS", 20)  # 2 rows per slab
    assert_allclose(rbf(X, Y, gamma=0.3), expected, rtol=1e-12, atol=1e-12)


def test_kernel_call_passes_sqnorms_only_to_rbf(rng):
    X, Y = _blocks(rng, np.float64)
    x_sq, y_sq = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", Y, Y)
    rbf_kernel = Kernel("rbf", {"gamma": 0.3})
    assert rbf_kernel.needs_sqnorm
    assert_allclose(rbf_kernel(X, Y, X_sqnorm=x_sq, Y_sqnorm=y_sq), rbf(X, Y, gamma=0.3))
    lin = Kernel("linear")
    assert not lin.needs_sqnorm
    assert_allclose(lin(X, Y, X_sqnorm=x_sq, Y_sqnorm=y_sq), X @ Y.T)


def test_kernel_is_hashable_picklable_and_json_round_trips():
    kernel = get_kernel("polynomial", gamma=0.5, degree=2, coef0=0.0)
    assert hash(kernel) == hash(Kernel("polynomial", {"coef0": 0.0, "degree": 2, "gamma": 0.5}))
    assert pickle.loads(pickle.dumps(kernel)) == kernel
    assert Kernel.from_dict(json.loads(json.dumps(kernel.to_dict()))) == kernel
    assert {kernel: 1}[Kernel("polynomial", kernel.params)] == 1


def test_kernel_accessors_and_repr():
    kernel = Kernel("rbf", {"gamma": np.float32(0.5)})
    assert kernel.params == (("gamma", 0.5),)
    assert type(kernel.get("gamma")) is float
    assert kernel.params_dict == {"gamma": 0.5}
    assert kernel.get("degree") is None
    assert repr(kernel) == "Kernel('rbf', gamma=0.5)"
    assert repr(Kernel("linear")) == "Kernel('linear')"


def test_kernel_fills_registry_defaults():
    assert Kernel("polynomial", {"gamma": 1.0}).params_dict == {
        "gamma": 1.0,
        "degree": 3,
        "coef0": 1.0,
    }


def test_get_kernel_default_gamma_is_one_over_n_features():
    assert get_kernel("rbf", n_features=8).get("gamma") == 1 / 8
    assert get_kernel("sigmoid", n_features=4).params_dict == {"gamma": 0.25, "coef0": 1.0}


def test_get_kernel_passes_only_accepted_params():
    assert get_kernel("rbf", gamma=2.0, degree=5, coef0=3.0).params_dict == {"gamma": 2.0}
    assert get_kernel("linear", gamma=2.0).params_dict == {}
    assert get_kernel("polynomial", gamma=2.0, degree=2, coef0=0.0).params_dict == {
        "gamma": 2.0,
        "degree": 2,
        "coef0": 0.0,
    }


def test_get_kernel_returns_kernel_unchanged():
    kernel = Kernel("rbf", {"gamma": 0.5})
    assert get_kernel(kernel) is kernel
    assert get_kernel(kernel, gamma=0.5) is kernel


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("gaussian",), {"gamma": 1.0}, r"Unknown kernel 'gaussian'.*'rbf'"),
        (("rbf",), {}, r"n_features was not given.*n_features=X.shape\[1\]"),
        (("rbf",), {"gamma": -1.0}, r"'gamma'.*> 0.*Got -1.0"),
        (("rbf",), {"gamma": float("inf")}, r"'gamma'.*Got inf"),
        (("rbf",), {"gamma": "scale"}, r"'gamma'.*Got 'scale'"),
        (("polynomial",), {"gamma": 1.0, "degree": 0}, r"'degree'.*int >= 1.*Got 0"),
        (("polynomial",), {"gamma": 1.0, "degree": 2.5}, r"'degree'.*Got 2.5"),
        (("sigmoid",), {"gamma": 1.0, "coef0": float("nan")}, r"'coef0'.*Got nan"),
        (("rbf",), {"gamma": 1.0, "kernel_params": {"sigma": 2}}, r"does not accept.*sigma"),
        (("rbf",), {"gamma": 1.0, "kernel_params": {"gamma": 2}}, r"both as arguments"),
        (("rbf",), {"n_features": 0}, r"n_features must be an int >= 1"),
        ((Kernel("rbf", {"gamma": 0.5}),), {"gamma": 1.0}, r"cannot be changed.*gamma"),
        ((Kernel("linear"),), {"degree": 2}, r"cannot be changed.*degree"),
    ],
)
def test_get_kernel_errors_explain_the_fix(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_kernel(*args, **kwargs)


def test_get_kernel_rejects_non_string_kernel():
    with pytest.raises(TypeError, match=r"kernel must be a kernel name.*Got function"):
        get_kernel(pairwise.rbf_kernel)


def test_kernel_construction_errors():
    with pytest.raises(ValueError, match=r"needs parameter\(s\) \['gamma'\].*get_kernel"):
        Kernel("rbf")
    with pytest.raises(ValueError, match=r"does not accept.*degree"):
        Kernel("rbf", {"gamma": 1.0, "degree": 2})
    with pytest.raises(ValueError, match=r"expects a dict with keys 'name'"):
        Kernel.from_dict({"kernel": "rbf"})


@pytest.fixture
def cosine_registered():
    def cosine(X, Y, *, scale):
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        return scale * (Xn @ Yn.T)

    def cosine_diag(X, *, scale):
        return np.full(len(X), scale, dtype=X.dtype)

    register_kernel("test_cosine", cosine, cosine_diag, {"scale": 1.0})
    yield "test_cosine"
    del KERNELS["test_cosine"]


def test_register_kernel_extends_get_kernel(rng, cosine_registered):
    kernel = get_kernel(cosine_registered, kernel_params={"scale": 2.0})
    X, _ = _blocks(rng, np.float64)
    assert_allclose(kernel.diag(X), np.diag(kernel(X, X)))
    assert Kernel.from_dict(kernel.to_dict()) == kernel
    with pytest.raises(ValueError, match="already registered"):
        register_kernel(cosine_registered, linear, linear, {})


def test_kernels_and_linalg_import_neither_dask_nor_sklearn():
    """Import rule: kernels and linalg depend on numpy/scipy only.

    The parent package (which re-exports estimators) is replaced by a bare
    namespace so that only the two subpackages' own imports are checked.
    """
    import subprocess
    import sys
    from pathlib import Path

    import kmp_dask

    code = (
        "import sys, types\n"
        "pkg = types.ModuleType('kmp_dask')\n"
        f"pkg.__path__ = [{str(Path(kmp_dask.__file__).parent)!r}]\n"
        "sys.modules['kmp_dask'] = pkg\n"
        "import kmp_dask.kernels, kmp_dask.linalg\n"
        "bad = sorted({'dask', 'sklearn'} & set(sys.modules))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


finite_blocks = st.tuples(
    st.integers(1, 12), st.integers(1, 12), st.integers(1, 6), st.integers(0, 2**32 - 1)
)


@settings(max_examples=40, deadline=None)
@given(finite_blocks, st.sampled_from(sorted(CASES)))
def test_property_shape_and_symmetry(shape, name):
    n, s, d, seed = shape
    fn, _, params = CASES[name]
    gen = np.random.default_rng(seed)
    X, Y = gen.standard_normal((n, d)), gen.standard_normal((s, d))
    assert fn(X, Y, **params).shape == (n, s)
    assert_allclose(fn(X, Y, **params), fn(Y, X, **params).T, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(finite_blocks, st.sampled_from([np.float32, np.float64]))
def test_property_rbf_in_unit_interval(shape, dtype):
    n, s, d, seed = shape
    gen = np.random.default_rng(seed)
    X = (gen.standard_normal((n, d)) * 10).astype(dtype)
    Y = np.concatenate([X, gen.standard_normal((s, d)).astype(dtype)])
    K = rbf(X, Y, gamma=0.7)
    assert np.all((K >= 0) & (K <= 1))
    assert np.all(K[np.arange(n), np.arange(n)] == 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_multi_is_bit_identical_to_rbf(dtype):
    from kmp_dask.kernels import rbf_multi

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 7)).astype(dtype)
    Y = np.vstack([X[:5], rng.normal(size=(40, 7))]).astype(dtype)
    gammas = [0.05, 0.7, 3.0]
    for K, g in zip(rbf_multi(X, Y, gammas), gammas, strict=True):
        assert K.tobytes() == rbf(X, Y, gamma=g).tobytes()
