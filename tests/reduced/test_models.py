"""Fitted models as compression targets (kmp_dask.reduced._models).

Every supported model type and kernel is read into a CompressionTarget and checked numerically
against the model itself: decision values (multi-class SVMs against the ``"ovo"`` decision
function), predictions (also libsvm's tie rules and ``break_ties``), the per-output training
labels, and each error.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, load_wine, make_classification, make_regression
from sklearn.exceptions import NotFittedError
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR, LinearSVC, NuSVC, NuSVR, OneClassSVM

from kmp_dask import KernelExpansion, KMPClassifier, KMPRegressor
from kmp_dask.kernels import get_kernel
from kmp_dask.reduced._models import CompressionTarget, _ovr_transform, as_compression_target

RTOL, ATOL = 1e-9, 1e-10
SVM_KERNELS = ["rbf", "poly", "linear", "sigmoid"]


# -- data -----------------------------------------------------------------------------------------


def _scaled(X):
    return StandardScaler().fit_transform(X)


def _iris_shuffled():
    """Iris with labels as strings, rows shuffled so the first row is not of the first class."""
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = _scaled(X[order]), np.array(["setosa", "versicolor", "virginica"])[y[order]]
    assert y[0] != "setosa"
    return X, y


def _wine():
    X, y = load_wine(return_X_y=True)
    return _scaled(X), y + 10


def _four_classes():
    X, y = make_classification(n_samples=160, n_features=6, n_informative=4, n_redundant=0, n_classes=4,
                               n_clusters_per_class=1, flip_y=0.1, random_state=3)
    return X, y


def _binary():
    X, y = make_classification(n_samples=120, n_features=5, n_informative=3, n_redundant=0, random_state=1)
    return X, np.where(y == 1, "pos", "neg")


MULTI = {"iris": _iris_shuffled, "wine": _wine, "four": _four_classes}


def _regression(n_targets=1):
    X, y = make_regression(n_samples=80, n_features=4, n_targets=n_targets, noise=0.5, random_state=2)
    return X, y / np.std(y)


def _check_target(target, model, X, *, F_expected=None):
    """F equals the model's decision values (or F_expected); predictions equal model.predict."""
    F = target.expansion.decision_function(X)
    assert F.dtype == np.float64 and F.shape == (X.shape[0], target.expansion.n_outputs)
    if F_expected is None:
        F_expected = model.decision_function(X) if hasattr(model, "decision_function") else model.predict(X)
    F_expected = np.asarray(F_expected)
    assert_allclose(F, F_expected.reshape(F.shape), rtol=RTOL, atol=ATOL)
    predicted, expected = target.predict(F), np.asarray(model.predict(X))
    if target.kind == "regression":  # the predictions are F: equal up to rounding
        assert_allclose(predicted, expected.reshape(predicted.shape), rtol=RTOL, atol=ATOL)
    else:
        assert_array_equal(predicted, expected)
    return F


def _check_labels_consistent(target, F, y, y_pred):
    """Masks and ±1 labels follow the layout, and agree with the sign of F wherever the model is
    unambiguously right (correct and all of the winner's outputs on its side)."""
    labels = target.output_labels(y)
    assert len(labels) == target.expansion.n_outputs
    classes = target.classes
    correct = y_pred == y
    if target.kind == "binary":
        (mask, s), = labels
        assert mask.all()
        assert_array_equal(s, np.where(y == classes[1], 1.0, -1.0))
        assert_array_equal(np.sign(F[correct, 0]), s[correct])  # no exact zero on these data
        return
    if target.kind == "ovr":
        sure = correct & ((F > 0).sum(axis=1) == 1)
        for j, (mask, s) in enumerate(labels):
            assert mask.all()
            assert_array_equal(s, np.where(y == classes[j], 1.0, -1.0))
            assert_array_equal(np.sign(F[sure, j]), s[sure])
        assert sure.mean() > 0.5
        return
    k = len(classes)
    votes = np.zeros((len(y), k), dtype=int)
    for p, (i, j) in enumerate(target.pairs):
        votes[np.arange(len(y)), np.where(F[:, p] > 0, i, j)] += 1
    sure = correct & (votes.max(axis=1) == k - 1)  # the winner beat every other class
    assert sure.mean() > 0.5
    for p, ((i, j), (mask, s)) in enumerate(zip(target.pairs, labels, strict=True)):
        assert_array_equal(mask, (y == classes[i]) | (y == classes[j]))
        assert_array_equal(s, np.where(y[mask] == classes[i], 1.0, -1.0))
        assert_array_equal(np.sign(F[mask & sure, p]), s[sure[mask]])


# -- SVC / NuSVC ----------------------------------------------------------------------------------


def _svc(cls, kernel, **kw):
    extra = {"nu": 0.3} if cls is NuSVC else {"C": 3.0}
    if kernel == "poly":
        extra.update(degree=2, coef0=0.5)
    if kernel == "sigmoid":
        extra.update(gamma=0.05, coef0=-0.5)
    return cls(kernel=kernel, **extra, **kw)


@pytest.mark.parametrize("cls", [SVC, NuSVC])
@pytest.mark.parametrize("kernel", SVM_KERNELS)
def test_svc_binary(cls, kernel):
    X, y = _binary()
    model = _svc(cls, kernel).fit(X, y)
    target = as_compression_target(model)
    assert (target.kind, target.pairs, target.source) == ("binary", None, cls.__name__)
    assert_array_equal(target.classes, ["neg", "pos"])
    assert target.expansion.n_outputs == 1 and target.expansion.n_vectors == model.support_vectors_.shape[0]
    F = _check_target(target, model, X)
    _check_labels_consistent(target, F, y, model.predict(X))


@pytest.mark.parametrize("cls", [SVC, NuSVC])
@pytest.mark.parametrize("kernel", SVM_KERNELS)
@pytest.mark.parametrize("data", sorted(MULTI))
def test_svc_one_vs_one(cls, kernel, data):
    X, y = MULTI[data]()
    k = len(np.unique(y))
    ovr = _svc(cls, kernel).fit(X, y)  # decision_function_shape="ovr" is sklearn's default
    ovo = _svc(cls, kernel, decision_function_shape="ovo").fit(X, y)
    for model in (ovr, ovo):
        target = as_compression_target(model)
        assert target.kind == "ovo" and not target.break_ties
        assert target.pairs == tuple((i, j) for i in range(k) for j in range(i + 1, k))
        assert target.expansion.n_outputs == k * (k - 1) // 2
        assert_array_equal(target.expansion.support_vectors, model.support_vectors_)
        F = _check_target(target, model, X, F_expected=ovo.decision_function(X))
    # sklearn's "ovr" decision function is its transform of the pairwise values
    assert_allclose(_ovr_transform(F, target.pairs, k), ovr.decision_function(X), rtol=RTOL, atol=1e-9)
    _check_labels_consistent(target, F, y, ovo.predict(X))


def test_svc_one_vs_one_coefficients_are_the_pairs_dual_coefs():
    """Each pair's column: nonzero only on the two classes' blocks, equal to the stated rows."""
    X, y = _wine()
    model = SVC().fit(X, y)
    coef = as_compression_target(model).expansion.coef
    start = np.concatenate([[0], np.cumsum(model.n_support_)])
    for p, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
        other = 3 - i - j
        assert_array_equal(coef[start[i]:start[i + 1], p], model.dual_coef_[j - 1, start[i]:start[i + 1]])
        assert_array_equal(coef[start[j]:start[j + 1], p], model.dual_coef_[i, start[j]:start[j + 1]])
        assert not coef[start[other]:start[other + 1], p].any()


def test_svc_break_ties_uses_the_ovr_argmax():
    X, y = _four_classes()
    X_eval = np.random.default_rng(5).normal(scale=2.0, size=(400, X.shape[1]))  # between the classes: ties
    model = SVC(C=3.0, break_ties=True).fit(X, y)
    target = as_compression_target(model)
    assert target.break_ties
    F = _check_target(target, model, X_eval, F_expected=SVC(C=3.0, decision_function_shape="ovo").fit(X, y)
                      .decision_function(X_eval))
    voted = CompressionTarget(target.expansion, "ovo", target.classes, target.pairs, "SVC").predict(F)
    assert (voted != model.predict(X_eval)).sum() > 5, "X_eval should hold voting ties that break_ties resolves"
    assert_array_equal(voted, SVC(C=3.0).fit(X, y).predict(X_eval))
    # with decision_function_shape="ovo" sklearn refuses break_ties; the target keeps libsvm's vote
    ovo = as_compression_target(SVC(C=3.0, break_ties=True, decision_function_shape="ovo").fit(X, y))
    assert not ovo.break_ties
    assert_array_equal(ovo.predict(F), voted)


def test_svc_fitted_on_sparse_input():
    X, y = _iris_shuffled()
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    model = SVC(decision_function_shape="ovo").fit(Xs, y)
    assert sp.issparse(model.support_vectors_)
    target = as_compression_target(model)
    assert isinstance(target.expansion.support_vectors, np.ndarray)
    F = target.expansion.decision_function(Xs.toarray())
    assert_allclose(F, model.decision_function(Xs), rtol=RTOL, atol=ATOL)
    assert_array_equal(target.predict(F), model.predict(Xs))


def test_binary_tie_rules():
    """At F == 0 exactly libsvm predicts classes_[1]; kmp_dask's classifiers predict classes_[0]."""
    model = SVC(kernel="linear").fit([[-1.0], [1.0]], ["a", "b"])
    target = as_compression_target(model)
    F = target.expansion.decision_function(np.array([[0.0]]))
    assert F[0, 0] == 0.0
    assert target.predict(F)[0] == model.predict([[0.0]])[0] == "b"
    kmp_like = CompressionTarget(target.expansion, "binary", target.classes, None, "KMPClassifier")
    assert kmp_like.predict(F)[0] == "a"


def test_ovo_vote_ties_go_to_the_lowest_class_and_zero_votes_for_j():
    target = as_compression_target(SVC().fit(*_iris_shuffled()))
    F = np.array([[1.0, -1.0, 1.0],    # 0 beats 1, 2 beats 0, 1 beats 2: a 3-way tie -> class 0
                  [-1.0, 1.0, 1.0],    # 1 beats 0, 0 beats 2, 1 beats 2 -> class 1
                  [0.0, 0.0, 0.0]])    # every exact zero votes j: class 2 gets 2 votes
    assert_array_equal(target.predict(F), np.array(["setosa", "versicolor", "virginica"]))


# -- SVR / NuSVR ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [SVR, NuSVR])
@pytest.mark.parametrize("kernel", SVM_KERNELS)
def test_svr(cls, kernel):
    X, y = _regression()
    kw = {"degree": 2, "coef0": 1.0} if kernel == "poly" else {"gamma": 0.05, "coef0": -0.2} if kernel == "sigmoid" \
        else {}
    model = cls(kernel=kernel, C=5.0, **kw).fit(X, y)
    target = as_compression_target(model)
    assert (target.kind, target.classes, target.pairs, target.source) == ("regression", None, None, cls.__name__)
    _check_target(target, model, X, F_expected=model.predict(X))
    with pytest.raises(ValueError, match="regression model"):
        target.output_labels(y)


# -- KernelRidge ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "polynomial", "linear", "sigmoid"])
@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("gamma", [None, 0.2])
def test_kernel_ridge(kernel, n_targets, gamma):
    X, y = _regression(n_targets)
    kw = {"degree": 2, "coef0": 0.5} if kernel in ("poly", "polynomial") else {"coef0": 0.0} if kernel == "sigmoid" \
        else {}
    alpha = 3.0 if kernel == "sigmoid" else 0.1  # sigmoid: indefinite; sklearn's Cholesky needs K + alpha I > 0
    model = KernelRidge(kernel=kernel, gamma=gamma, alpha=alpha, **kw).fit(X, y)
    target = as_compression_target(model)
    assert (target.kind, target.source) == ("regression", "KernelRidge")
    assert target.expansion.n_outputs == n_targets and target.expansion.n_vectors == X.shape[0]
    assert not target.expansion.intercept.any()
    _check_target(target, model, X, F_expected=model.predict(X))


def test_kernel_ridge_ignores_kernel_params_for_named_kernels_as_sklearn_does():
    X, y = _regression()
    model = KernelRidge(kernel="rbf", kernel_params={"gamma": 7.0}).fit(X, y)
    target = as_compression_target(model)
    assert target.expansion.kernels[0].get("gamma") == pytest.approx(1 / X.shape[1])
    _check_target(target, model, X, F_expected=model.predict(X))


def test_kernel_ridge_sparse_and_float_degree():
    X, y = _regression()
    model = KernelRidge(kernel="poly", degree=2.0, alpha=0.1).fit(sp.csr_matrix(X), y)
    target = as_compression_target(model)
    assert target.expansion.kernels[0].get("degree") == 2
    _check_target(target, model, X, F_expected=model.predict(sp.csr_matrix(X)))


# -- kmp_dask models ------------------------------------------------------------------------------


def test_kmp_regressor():
    X, y = _regression()
    model = KMPRegressor(n_basis=8, gamma=0.3, client="sync").fit(X, y)
    target = as_compression_target(model)
    assert target.expansion is model.expansion_
    assert (target.kind, target.source) == ("regression", "KMPRegressor")
    _check_target(target, model, X, F_expected=model.predict(X))


@pytest.mark.parametrize("data", ["binary", "iris"])
def test_kmp_classifier(data):
    X, y = _binary() if data == "binary" else _iris_shuffled()
    model = KMPClassifier(n_basis=12, gamma=0.3, client="sync").fit(X, y)
    target = as_compression_target(model)
    assert target.kind == ("binary" if data == "binary" else "ovr") and target.source == "KMPClassifier"
    assert target.expansion is model.expansion_
    assert_array_equal(target.classes, model.classes_)
    F = _check_target(target, model, X)
    _check_labels_consistent(target, F, y, model.predict(X))


def test_kernel_expansion_directly():
    rng = np.random.default_rng(4)
    exp = KernelExpansion(rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), [0.5, -1.0],
                          get_kernel("rbf", gamma=0.4))
    target = as_compression_target(exp)
    assert (target.expansion, target.kind, target.classes, target.pairs, target.source) == (
        exp, "regression", None, None, "KernelExpansion")
    X = rng.normal(size=(7, 3))
    F = exp.decision_function(X)
    assert_array_equal(target.predict(F), F)
    one = as_compression_target(exp.with_coef(exp.coef[:, :1], exp.intercept[:1]))
    assert one.predict(F[:, :1]).shape == (7,)


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [SVC(), NuSVR(), KernelRidge(), KMPClassifier(), KMPRegressor()],
                         ids=lambda m: type(m).__name__)
def test_unfitted_model(model):
    with pytest.raises(NotFittedError, match=rf"model is an unfitted {type(model).__name__}.*Call model.fit"):
        as_compression_target(model)


def test_precomputed_kernel():
    X, y = _binary()
    K = X @ X.T
    with pytest.raises(ValueError, match="kernel='precomputed' cannot be compressed: its support vectors are not"):
        as_compression_target(SVC(kernel="precomputed").fit(K, y))
    with pytest.raises(ValueError, match="KernelRidge with kernel='precomputed'.*Refit on the feature rows"):
        as_compression_target(KernelRidge(kernel="precomputed").fit(K, y == "pos"))


def _dot(a, b):
    return float(np.dot(a, b))


def test_callable_kernel():
    X, y = _binary()
    with pytest.raises(ValueError, match="callable kernel.*not one kmp_dask can evaluate.*Refit with one of"):
        as_compression_target(SVC(kernel=lambda A, B: A @ B.T).fit(X, y))
    with pytest.raises(ValueError, match="KernelRidge with a callable kernel"):
        as_compression_target(KernelRidge(kernel=_dot).fit(X[:20], (y == "pos")[:20]))


def test_unsupported_pairwise_kernel():
    X, y = _regression()
    with pytest.raises(ValueError, match=r"kernel='cosine', which kmp_dask cannot evaluate; supported: \["):
        as_compression_target(KernelRidge(kernel="cosine").fit(X, y))


def test_kernel_parameters_out_of_range():
    X, y = _binary()
    with pytest.raises(ValueError, match=r"kernel='poly'.*cannot be expressed as a kmp_dask kernel.*degree"):
        as_compression_target(SVC(kernel="poly", degree=0).fit(X, y))
    Xr, yr = _regression()
    with pytest.raises(ValueError, match="degree must be a whole number"):
        as_compression_target(KernelRidge(kernel="poly", degree=1.5, coef0=10.0).fit(Xr, yr))


@pytest.mark.parametrize("model", [LinearSVC(), OneClassSVM(), LogisticRegression(), "svc", None],
                         ids=lambda m: type(m).__name__)
def test_unsupported_type(model):
    with pytest.raises(TypeError, match=r"model must be one of sklearn.svm.SVC, .*KernelRidge.*KMPClassifier.*"
                                        r"KernelExpansion; got .*Other kernel models"):
        as_compression_target(model)


def test_target_argument_errors():
    X, y = _iris_shuffled()
    target = as_compression_target(SVC().fit(X, y))
    with pytest.raises(ValueError, match=r"F must be the decision values of shape \(n_samples, 3\).*shape \(4, 2\)"):
        target.predict(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"labels \['daisy'\] that are not among the model's classes"):
        target.output_labels(np.array(["setosa", "daisy"]))
    with pytest.raises(ValueError, match="y must be a 1-D array"):
        target.output_labels(y[:, None])
    with pytest.raises(ValueError, match=r"kind='ovo' with 3 classes needs pairs=\(\(0, 1\)"):
        CompressionTarget(target.expansion, "ovo", target.classes, ((0, 1), (1, 2), (0, 2)), "SVC")
    with pytest.raises(ValueError, match="kind must be one of"):
        CompressionTarget(target.expansion, "ova", target.classes, None, "SVC")
    with pytest.raises(ValueError, match="kind='ovr' with 3 classes needs 3 outputs"):
        two = target.expansion.subset([0, 1]).with_coef(np.ones((2, 2)), np.zeros(2))
        CompressionTarget(two, "ovr", target.classes, None, "KMPClassifier")
