"""Degenerate fits: a named warning, a ``stop_reason_`` that says why, a message that
says what to change — and nothing new on normal data.

Three ways a fit ends with no basis function, told apart by the driver from the candidate rows
it holds (``kmp_dask/greedy/_kmp.py``, ``no_basis``):

* ``"no_usable_candidate"``: the candidate rows are all identical (duplicate rows), or no kernel
  column correlates with the targets beyond the intercept (e.g. duplicate rows with conflicting
  labels, a huge ``ridge``);
* ``"constant_kernel"``: the kernel is numerically constant on the candidate rows (``gamma`` far
  too small);
* ``"linear_dependence"``: every candidate tried was dependent on the basis (the message names
  the cause when it is one of the two above).

After the fit the estimator adds two checks on a sample of rows (256 rows from at most 4 storage
chunks, fixed seed: the fit's random stream is untouched): all basis functions centred on the
same row values (:class:`DegenerateFitWarning`), and the kernel width
(:class:`KernelWidthWarning`) — ``gamma × 1st percentile of the squared distances between
distinct rows > 5`` (too narrow) or ``gamma × median squared distance < 1e-4`` (too wide).

The width rule was measured with the default estimators (``n_basis=100``, ``candidates="auto"``,
70/30 split, ``gamma = 10^k / median squared distance``). Test accuracy (R² for diabetes), with
``gamma × q01`` (1st percentile) in brackets where it decides::

    gamma × median      1e-6   1e-5   1e-4   1e-2    1      1e2          1e3          1e4
    moons (2-D)         0.78   0.84   0.85   0.85   0.94   0.92 (1.4)   0.66 (13.5)  0.51 (135)
    banana (2-D)        -      0.58   0.53   0.68   0.89   0.86 (1.2)   0.68 (12.1)  0.57 (121)
    letter (16-D)       -      0.32   0.54   0.64   0.70   0.13 (19)    0.04         0.04
    digits (64-D)       -      0.77   0.92   0.95   0.99   0.10 (22.8)  0.08         0.08
    breast_cancer std   0.85   0.95   0.95   0.97   0.96   0.63 (12.6)  0.63         0.63
    breast_cancer raw   0.88   0.92   0.93   0.97   0.97   0.92 (0.36)  0.68 (3.6)   0.63 (35.5)
    diabetes (R²)       0.15   0.40   0.40   0.39   0.01  -0.41 (17.6) -0.41        -0.41

("-": no basis function, the driver's ``constant_kernel`` warning.) Every model with
``gamma × q01`` ≥ 8.7 was at or near chance (or negative R²); every model within 0.05 of its
set's best test score had ``gamma × q01`` ≤ 2.3 (digits at 1e1: 0.96). The defaults
(``gamma = 1/n_features``) land at 8.7 on raw digits (test accuracy 0.31; 0.99 at
``gamma = 1/median``), 21.9 on raw breast_cancer (0.63 = majority class) and 18.5 on raw
german (0.66, majority 0.67): all three are flagged, the standardised versions (0.17–0.69) are
not. On the wide side every non-linear set has lost much at 1e-5 and nothing has collapsed at
1e-4. The constants are ``kmp_dask.estimators._kmp.WIDTH_NARROW`` / ``WIDTH_WIDE``.

The last section covers the success paths of the other degenerate-input cases that have catalogue rows
only for their failures (``score`` on a store, ``predict_proba``'s availability).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _engines import NoisyScores
from sklearn.datasets import load_digits, make_moons
from sklearn.metrics import r2_score

from kmp_dask import KMPClassifier, KMPRegressor
from kmp_dask.estimators._inputs import sample_rows
from kmp_dask.estimators._kmp import WIDTH_NARROW, WIDTH_WIDE
from kmp_dask.exceptions import DegenerateFitWarning, KernelWidthWarning, PrematureStopWarning
from kmp_dask.greedy import kernel_matching_pursuit
from kmp_dask.kernels import get_kernel
from kmp_dask.parallel import make_engine
from kmp_dask.store import InMemoryStore, create_store

IDENTICAL = np.ones((1000, 3))
TWO_LABELS = np.repeat([0, 1], 500)
MOONS_X, MOONS_Y = make_moons(1000, noise=0.2, random_state=0)


def _median_sq(X):
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return float(np.median(d[np.triu_indices(len(X), 1)]))


MOONS_MED = _median_sq(MOONS_X[:300])


def _only(record, cls):
    """The one warning of class ``cls`` (exactly) among ``record``."""
    found = [w for w in record if w.category is cls]
    assert len(found) == 1, [str(w.message) for w in record]
    return str(found[0].message)


# -- (a) identical rows ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {},
    {"fit_mode": "basic"},
    {"fit_mode": "prefit"},
    {"candidates": "all"},
    {"loss": "logistic"},
    {"loss": "tanh", "fit_mode": "basic"},
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "defaults")
def test_identical_rows_two_labels(kw):
    with pytest.warns(DegenerateFitWarning) as record:
        clf = KMPClassifier(random_state=0, n_basis=100, **kw).fit(IDENTICAL, TWO_LABELS)  # no held-out rows
    message = _only(record, DegenerateFitWarning)
    assert clf.n_basis_ == 0
    assert clf.stop_reason_ == "no_usable_candidate"
    for words in ("selected no basis function", "stop_reason='no_usable_candidate'", "identical",
                  "duplicate rows", "Remove the duplicate rows", "`gamma`", "`ridge`"):
        assert words in message, message


def test_identical_rows_regression():
    with pytest.warns(DegenerateFitWarning, match="duplicate rows"):
        est = KMPRegressor(random_state=0, n_basis=100).fit(IDENTICAL, np.arange(1000.0))
    assert (est.n_basis_, est.stop_reason_) == (0, "no_usable_candidate")
    np.testing.assert_allclose(est.predict(IDENTICAL[:3]), 499.5)


def test_constant_targets_are_no_degenerate_fit():
    """One target value: the driver's no-basis check does not call that degenerate. (The loop
    itself still fits rounding noise there, unchanged by the degenerate-fit checks; on identical rows the
    estimator's same-row check names it.)"""
    est = KMPRegressor(random_state=0, n_basis=10).fit(MOONS_X, np.full(1000, 2.5))
    np.testing.assert_allclose(est.predict(MOONS_X[:5]), 2.5)
    with pytest.warns(DegenerateFitWarning, match="centred on the same row values"):
        KMPRegressor(random_state=0, n_basis=10).fit(IDENTICAL, np.full(1000, 2.5))


@pytest.mark.parametrize("kw", [{"fit_mode": "prefit"}, {"loss": "logistic", "fit_mode": "basic"}],
                         ids=["prefit", "logistic-basic"])
def test_identical_rows_with_basis_functions_still_warn(kw):
    """Modes in which rounding lets copies of the one row in (imbalanced labels): the estimator's
    check sees every basis function centred on the same row values."""
    y = np.r_[np.zeros(700), np.ones(300)]
    with pytest.warns(DegenerateFitWarning) as record:
        clf = KMPClassifier(random_state=0, n_basis=100, **kw).fit(IDENTICAL, y)
    assert clf.n_basis_ > 0  # prefit: 13 copies, logistic basic: 1 (used as the constant)
    message = _only(record, DegenerateFitWarning)
    assert "centred on the same row values" in message and "duplicate rows" in message
    assert f"stop_reason_={clf.stop_reason_!r}" in message


def test_float32_identical_rows_warn():
    """float32 rounding makes the copies' columns differ: 100 'basis functions' of noise, named."""
    with pytest.warns(DegenerateFitWarning, match="centred on the same row values"):
        KMPClassifier(random_state=0, n_basis=100).fit(IDENTICAL.astype(np.float32), np.r_[np.zeros(700), np.ones(300)])


# -- (b) kernel numerically constant --------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"fit_mode": "basic"}, {"loss": "logistic"}], ids=["backfit", "basic", "logistic"])
def test_tiny_gamma_is_a_constant_kernel(kw):
    with pytest.warns(DegenerateFitWarning) as record:
        clf = KMPClassifier(gamma=1e-9, random_state=0, n_basis=100, **kw).fit(MOONS_X, MOONS_Y)
    message = _only(record, DegenerateFitWarning)  # and no KernelWidthWarning on top
    assert not [w for w in record if w.category is KernelWidthWarning]
    assert (clf.n_basis_, clf.stop_reason_) == (0, "constant_kernel")
    for words in ("stop_reason='constant_kernel'", "numerically constant", "Kernel('rbf', gamma=1e-09)",
                  "Increase `gamma` (now 1e-09)", "1 / median squared distance", "standardise X"):
        assert words in message, message
    suggested = float(message.split("between rows = ")[1].split(" ")[0])
    assert suggested == pytest.approx(1 / MOONS_MED, rel=0.3)


def test_polynomial_kernel_constant():
    with pytest.warns(DegenerateFitWarning, match=r"Increase `gamma` \(now 1e-12 for the 'polynomial' kernel\)"):
        clf = KMPClassifier(kernel="polynomial", gamma=1e-12, random_state=0, n_basis=100).fit(MOONS_X, MOONS_Y)
    assert clf.stop_reason_ == "constant_kernel"


# -- no usable candidate, other causes ------------------------------------------------------------
def test_duplicates_with_conflicting_labels():
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 500, axis=0)
    y = np.tile([0, 1], 500)  # each point carries both labels equally often
    with pytest.warns(DegenerateFitWarning) as record:
        clf = KMPClassifier(random_state=0, n_basis=100).fit(X, y)
    message = _only(record, DegenerateFitWarning)
    assert clf.stop_reason_ == "no_usable_candidate"
    for words in ("correlates with the targets", "duplicate rows with conflicting targets", "`gamma`", "`ridge`"):
        assert words in message, message


def test_huge_ridge_is_named():
    with pytest.warns(DegenerateFitWarning, match=r"lower `ridge` \(now 1e\+15 per training row\)"):
        clf = KMPClassifier(ridge=1e15, random_state=0, n_basis=100).fit(MOONS_X, MOONS_Y)
    assert clf.stop_reason_ == "no_usable_candidate"


# -- (c) every candidate dependent ----------------------------------------------------------------


@pytest.mark.parametrize("X, cause", [
    (np.ones((30, 2)), "duplicate rows"),
    (np.random.default_rng(0).normal(size=(30, 2)), "numerically constant"),
], ids=["identical-rows", "constant-kernel"])
def test_every_candidate_dependent(X, cause):
    gamma = 0.5 if cause == "duplicate rows" else 1e-12
    engine = NoisyScores(make_engine(None, InMemoryStore(X, np.arange(30.0), chunk_rows=7)))
    with pytest.warns(PrematureStopWarning, match="numerically dependent"):  # the first skipped candidate
        with pytest.warns(DegenerateFitWarning) as record:
            res = kernel_matching_pursuit(
                engine, kernel=get_kernel("rbf", gamma=gamma), n_rows=30, n_features=2, dtype=X.dtype,
                targets={"kind": "regression"}, n_basis=5, candidates="all", ridge=0.0, fit_intercept=True)
    message = _only(record, DegenerateFitWarning)
    assert res.stop_reason.value == "linear_dependence" and len(res.basis_indices) == 0
    assert not any("stopped after 0 basis functions" in str(w.message) for w in record)
    for words in ("stop_reason='linear_dependence'", "all 5 best candidates were numerically dependent", cause):
        assert words in message, message
    if cause == "duplicate rows":
        assert "Remove the duplicate rows" in message
    else:
        assert "Increase `gamma`" in message


# -- (d) kernel width -----------------------------------------------------------------------------
def test_wide_gamma_narrow_kernel_warns_with_a_gamma_to_try():
    """The issue's case: gamma=1e6 fits 100 basis functions and ~60% training accuracy."""
    with pytest.warns(KernelWidthWarning) as record:
        clf = KMPClassifier(gamma=1e6, random_state=0, n_basis=100).fit(MOONS_X, MOONS_Y)
    message = _only(record, KernelWidthWarning)
    assert clf.n_basis_ == 100 and clf.score(MOONS_X, MOONS_Y) < 0.7
    for words in ("gamma=1000000.0", "very narrow", "1st percentile", f"> {WIDTH_NARROW:g}", "Make gamma smaller",
                  "1 / median squared distance", "StandardScaler"):
        assert words in message, message
    suggested = float(message.split("squared distance = ")[1].split(" ")[0])
    assert suggested == pytest.approx(1 / MOONS_MED, rel=0.3)
    better = KMPClassifier(gamma=suggested, random_state=0, n_basis=100).fit(MOONS_X, MOONS_Y)
    assert better.score(MOONS_X, MOONS_Y) > 0.9


def test_very_wide_kernel_warns():
    # caught as what a user filters on: a degenerate fit, a RuntimeWarning
    with pytest.warns(DegenerateFitWarning) as record:
        KMPClassifier(gamma=1e-5 / MOONS_MED, random_state=0, n_basis=100).fit(MOONS_X, MOONS_Y)
    assert all(issubclass(w.category, RuntimeWarning) for w in record if issubclass(w.category, DegenerateFitWarning))
    message = _only(record, KernelWidthWarning)
    assert "very wide" in message and f"< {WIDTH_WIDE:g}" in message and "Make gamma larger" in message


@pytest.mark.parametrize("scale", [1e-3, 1e-1, 1.0, 1e2])
def test_usable_widths_do_not_warn(scale):
    """Warnings are errors in this test run: a usable width must fit silently."""
    KMPClassifier(gamma=scale / MOONS_MED, random_state=0, n_basis=30).fit(MOONS_X, MOONS_Y)


def test_old_default_gamma_on_raw_digits_is_flagged_and_standardised_is_not():
    X, y = load_digits(return_X_y=True)
    X, y = X[:600], y[:600]
    with pytest.warns(KernelWidthWarning, match=r"gamma=None \(1/n_features\).*very narrow"):
        KMPClassifier(n_basis=20, gamma=None, random_state=0).fit(X, y)
    Xs = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    KMPClassifier(n_basis=20, gamma=None, random_state=0).fit(Xs, y)


@pytest.mark.filterwarnings("ignore::kmp_dask.exceptions.FeatureScaleWarning")  # near-constant border pixels
def test_scale_default_on_raw_digits_has_a_usable_width():
    """gamma='scale' (the default) adapts to raw digits (pixel values 0..16): no width warning
    (warnings are errors in this test run)."""
    X, y = load_digits(return_X_y=True)
    KMPClassifier(n_basis=20, random_state=0).fit(X[:600], y[:600])


def test_laplacian_width_uses_l1_distances():
    with pytest.warns(KernelWidthWarning, match=r"Kernel\('laplacian', gamma=1000000.0\) is very narrow.*L1 distance"):
        KMPClassifier(kernel="laplacian", gamma=1e6, n_basis=20, random_state=0).fit(MOONS_X, MOONS_Y)


def test_a_usable_width_in_the_dictionary_is_enough():
    KMPClassifier(gamma=[1e6, 1.0], n_basis=20, random_state=0).fit(MOONS_X, MOONS_Y)
    with pytest.warns(KernelWidthWarning, match="very narrow.*very wide"):
        KMPClassifier(gamma=[1e6, 1e-9], n_basis=20, random_state=0).fit(MOONS_X, MOONS_Y)


def test_kernels_without_a_distance_scale_are_not_checked():
    KMPClassifier(kernel="polynomial", gamma=10.0, degree=2, n_basis=10, random_state=0).fit(MOONS_X, MOONS_Y)


def test_width_check_on_a_store_reads_few_chunks(tmp_path):
    store = create_store(tmp_path / "moons.zarr", MOONS_X, MOONS_Y, chunk_rows=50)
    with pytest.warns(KernelWidthWarning, match="measured on 200 sampled rows"):  # 4 chunks of 50 rows
        KMPClassifier(gamma=1e6, n_basis=10, random_state=0, client="sync").fit(store.url)


class _CountingStore:
    """A store stand-in that records which rows were read."""

    def __init__(self, n, chunk):
        self.row_chunks = (chunk,) * (n // chunk)
        self.read = None

    def read_rows(self, idx):
        self.read = np.asarray(idx)
        return np.zeros((len(idx), 2)), None


def test_sample_rows_touches_at_most_four_chunks_and_is_fixed():
    s = _CountingStore(100_000, 1000)
    sample_rows(s)
    chunks = np.unique(s.read // 1000)
    assert len(s.read) == 256 and len(chunks) <= 4 and len(np.unique(s.read)) == 256
    first = s.read.copy()
    sample_rows(s)
    np.testing.assert_array_equal(first, s.read)
    mem = InMemoryStore(np.arange(20_000.0).reshape(-1, 2), chunk_rows=100)  # in memory: any row
    rows = sample_rows(mem)[:, 0] // 2
    assert len(np.unique(rows // 100)) > 4


def test_normal_fits_do_not_warn():
    """Normal data, every mode and the losses: no warning of any kmp_dask class (the fingerprints of
    30 configurations before and after this change were identical bit for bit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)
        for kw in ({}, {"fit_mode": "basic"}, {"fit_mode": "prefit"}, {"loss": "logistic"}, {"candidates": "all"}):
            KMPClassifier(n_basis=20, random_state=0, **kw).fit(MOONS_X, MOONS_Y)


# -- other degenerate-input cases: the success paths (their failures are catalogue rows) --------
def test_score_reads_y_from_a_store(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    names = np.array(["neg", "pos"])
    store = create_store(tmp_path / "c.zarr", X, y, chunk_rows=70, classes=list(names))
    clf = KMPClassifier(n_basis=10, random_state=0, client="sync").fit(store.url)
    expected = np.mean(clf.predict(X) == names[y])
    assert clf.score(store.url) == pytest.approx(expected)
    assert clf.score(store) == pytest.approx(expected)
    plain = create_store(tmp_path / "p.zarr", X, y, chunk_rows=70)  # codes, no class names
    on_numpy = KMPClassifier(n_basis=10, random_state=0).fit(X, y)
    assert on_numpy.score(plain.url) == pytest.approx(on_numpy.score(X, y))

    Y = np.c_[np.sin(X[:, 0]), 5 * X[:, 1] + 100]  # an offset mean: the merged R² must stay exact
    reg = KMPRegressor(n_basis=10, random_state=0).fit(X, Y)
    multi = create_store(tmp_path / "r.zarr", X, Y, chunk_rows=70)
    assert reg.score(multi.url) == pytest.approx(r2_score(Y, reg.predict(X)), rel=1e-12)
    reg1 = KMPRegressor(n_basis=10, random_state=0).fit(X, Y[:, 0])
    single = create_store(tmp_path / "r1.zarr", X, Y[:, 0], chunk_rows=70)
    assert reg1.score(single.url) == pytest.approx(reg1.score(X, Y[:, 0]), rel=1e-12)


def test_predict_proba_only_with_the_logistic_loss():
    X, y = MOONS_X[:200], MOONS_Y[:200]
    squared = KMPClassifier(n_basis=5, random_state=0).fit(X, y)
    assert not hasattr(squared, "predict_proba")  # scikit-learn's available_if contract
    logistic = KMPClassifier(n_basis=5, loss="logistic", random_state=0).fit(X, y)
    assert hasattr(logistic, "predict_proba")
    np.testing.assert_allclose(logistic.predict_proba(X).sum(axis=1), 1.0)
    with pytest.raises(AttributeError, match="loss='logistic'"):
        KMPClassifier.predict_proba(squared, X)  # through the class as well
    assert "logistic" in KMPClassifier.predict_proba.__doc__
