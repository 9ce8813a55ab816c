"""The data's own kernel width: ``gamma="scale"`` as scikit-learn's SVC has it.

``scale_gamma(X) = 1 / (n_features · Var(X))``, the variance taken over every entry of ``X`` (as
``X.var()`` in scikit-learn). For a store the variance comes from the per-feature ``mean`` and
``std`` attributes the store keeps (no pass over the data); for a dask array it is one pass; for a
numpy array it is ``X.var()``. A constant ``X`` (variance 0) gives ``1.0``, as scikit-learn does.

The estimators take ``gamma="scale"`` (their default) and resolve it here, once,
from the training store's statistics (:func:`resolve_gamma`): the fitted kernels hold the number,
so a saved model, ``predict`` and ``expansion_`` need nothing else. docs/defaults.md has the
measurements behind the choice.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import FeatureScaleWarning, user_stacklevel
from ..kernels import KERNELS
from ._inputs import is_dask_array, is_store_like

SMALL_FEATURE = 0.1
"""Feature-scale rule: with ``gamma="scale"``, a non-constant feature whose standard deviation is
below this fraction of the features' root-mean-square std adds less than 1 % of an average
feature's share to a squared distance, so the kernel hardly sees it. Measured
(benchmarks/results/defaults_scale.json): the sets where standardising beat ``"scale"`` by more
than a point (pima, vehicle, segment, spambase, the synthetic mixed-scale set) all have such
features (2/8, 1/18, 5/18, 54/57, 6/10); ring, banana, twonorm, penbased, satimage and phoneme
have none."""


def _store_variance(store) -> float | None:
    attrs = store.attrs
    mean, std = attrs.get("mean"), attrs.get("std")
    if mean is None or std is None or len(mean) != store.n_features:
        return None
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    # every column has the same number of rows, so the entries' moments are the columns' averages
    second = float(np.mean(std**2 + mean**2))
    return max(second - float(np.mean(mean)) ** 2, 0.0)


def _variance(X, sample_weight=None) -> tuple[float, int]:
    if is_store_like(X):
        var = None if sample_weight is not None else _store_variance(X)
        if var is not None:
            return var, int(X.n_features)
        X = X.to_dask()
    if is_dask_array(X):
        from ..parallel._moments import entry_variance, weighted_entry_variance

        if sample_weight is not None:
            return weighted_entry_variance(X, sample_weight), int(X.shape[1])
        return entry_variance(X), int(X.shape[1])
    X = np.asarray(X).astype(np.float64, copy=False)
    if sample_weight is not None:
        w = np.repeat(np.asarray(sample_weight, dtype=np.float64), X.shape[1])
        mean = np.average(X.ravel(), weights=w)
        return float(np.average((X.ravel() - mean) ** 2, weights=w)), int(X.shape[1])
    return float(X.var()), int(X.shape[1])


SCALE_DIGITS = 12
"""Significant digits kept of a ``"scale"`` width: the store's moments are merged chunk by chunk,
so their last bits depend on the chunking; rounding makes the width (and so the model) the same
whatever the chunking or the input type (numpy, dask, store) of the same rows."""


def _rounded(value: float) -> float:
    return float(f"{value:.{SCALE_DIGITS}g}")


def scale_gamma(X, *, kernel: str = "rbf", sample_weight=None) -> float:
    """``1 / (n_features · Var(X))`` for numpy, dask or store input (``1.0`` when ``Var(X) = 0``).

    A kernel registered with ``scale_rule="std"`` (``"laplacian"``: an L1 distance, which grows as
    the standard deviation, not the variance): ``1 / (n_features · √Var(X))``. With
    ``sample_weight`` (one weight per row) the variance is weighted (a row of weight 2 counts
    twice: the same width as on the repeated rows; a store then needs one pass). Rounded to
    :data:`SCALE_DIGITS` significant digits.
    """
    var, n_features = _variance(X, sample_weight)
    if not np.isfinite(var) or var <= 0.0 or n_features == 0:
        return 1.0
    spec = KERNELS.get(kernel)  # a name the registry does not know (checked later) keeps the variance rule
    spread = np.sqrt(var) if spec is not None and spec.scale_rule == "std" else var
    return _rounded(1.0 / (n_features * spread))


def is_scale(gamma) -> bool:
    return isinstance(gamma, str) and gamma == "scale"


def check_gamma_value(gamma, name: str = "gamma") -> None:
    """A string width must be ``"scale"``; raise naming the argument, the value and the fix."""
    values = gamma if isinstance(gamma, (list, tuple)) else [gamma]
    for g in values:
        if isinstance(g, str) and g != "scale":
            raise ValueError(
                f"{name} must be 'scale' (1 / (n_features · Var(X)), the default), None (1 / n_features), a "
                f"positive number{' or a list of them' if name == 'gamma' else ''}; got {gamma!r}")


def _feature_stds(X) -> np.ndarray | None:
    if is_store_like(X):
        std = X.attrs.get("std")
        return None if std is None or len(std) != X.n_features else np.asarray(std, dtype=np.float64)
    if is_dask_array(X):
        return None  # estimators hand a store (with its std) for dask input; nothing to read here
    return np.asarray(X, dtype=np.float64).std(axis=0)


#: Estimators with a ``standardize`` parameter (the warning then names it as the fix).
STANDARDIZING = ("KMPClassifier", "KMPRegressor", "CVMClassifier", "MMDA", "SparseKernelPCA", "SparseKCCA")


def _standardise_hint(owner: str, name: str) -> str:
    yourself = ("sklearn.preprocessing.StandardScaler, or (x − mean) / std from the store's attributes) "
                f"and keep {name}='scale'")
    if owner in STANDARDIZING:
        return ("Standardise the features: standardize='auto' (the default; CLI --standardize auto) or True does it "
                f"inside the model; or standardise them yourself (e.g. {yourself}")
    return f"Standardise the features first (e.g. {yourself}"


def warn_if_mixed_scales(X, owner: str, name: str = "gamma") -> None:
    """:class:`~kmp_dask.exceptions.FeatureScaleWarning` when ``X`` (a store: its ``std``
    attribute, no pass; or numpy) has non-constant features below :data:`SMALL_FEATURE` of the
    features' RMS standard deviation."""
    std = _feature_stds(X)
    if std is None:
        return
    live = np.flatnonzero(std > 0)
    if len(live) < 2:
        return
    rms = float(np.sqrt(np.mean(std[live] ** 2)))
    small = live[std[live] < SMALL_FEATURE * rms]
    if not len(small):
        return
    shown = ", ".join(f"x{i} (std {std[i]:.3g})" for i in small[:5]) + (" …" if len(small) > 5 else "")
    warnings.warn(
        f"{owner}: {name}='scale' gives one kernel width for features on very different scales: {len(small)} of "
        f"{len(live)} features have a standard deviation below {SMALL_FEATURE:g} × the features' RMS std "
        f"({rms:.3g}): {shown}. The kernel hardly sees them. {_standardise_hint(owner, name)}; measured in "
        "docs/defaults.md, this gained up to 20 accuracy points.",
        FeatureScaleWarning, stacklevel=user_stacklevel())


def resolve_gamma(gamma, store, *, kernel="rbf", sample_weight=None, owner="the estimator", name="gamma"):
    """``gamma`` with every ``"scale"`` replaced by :func:`scale_gamma` of the training ``store``
    (a list stays a list); anything else is returned unchanged (None keeps meaning 1 / n_features).
    A ``"scale"`` width on features of very different scales warns (:func:`warn_if_mixed_scales`)."""
    kname = kernel if isinstance(kernel, str) else getattr(kernel, "name", "rbf")
    values = list(gamma) if isinstance(gamma, (list, tuple)) else [gamma]
    if any(is_scale(g) for g in values):
        warn_if_mixed_scales(store, owner, name)
        scale = scale_gamma(store, kernel=kname, sample_weight=sample_weight)
        values = [scale if is_scale(g) else g for g in values]
    return type(gamma)(values) if isinstance(gamma, (list, tuple)) else values[0]


# -- standardisation inside the model --------------------------------------------------------------

def check_standardize(value) -> None:
    """``standardize`` must be ``"auto"``, True or False; raise naming the value and the fix."""
    if not (isinstance(value, bool) or (isinstance(value, str) and value == "auto")):
        raise ValueError(
            f"standardize must be 'auto' (standardise when the features' scales differ, the default), True (always) "
            f"or False (never: the raw rows, as before); got {value!r}")


def _feature_moments(store, sample_weight=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std of the training rows: a store's ``mean`` / ``std`` attributes (no
    pass); with ``sample_weight`` the weighted moments (one pass over a store, numpy otherwise)."""
    attrs = store.attrs
    mean, std = attrs.get("mean"), attrs.get("std")
    if sample_weight is None and mean is not None and std is not None and len(mean) == store.n_features:
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    from ..store import InMemoryStore

    if isinstance(store, InMemoryStore):
        X = store.read_range(0, store.n_rows)[0].astype(np.float64, copy=False)
        if sample_weight is None:
            return X.mean(axis=0), X.std(axis=0)
        mean = np.average(X, axis=0, weights=sample_weight)
        return mean, np.sqrt(np.average((X - mean) ** 2, axis=0, weights=sample_weight))
    from ..parallel._moments import feature_moments

    return feature_moments(store.to_dask("X"), sample_weight)


def _small_features(std: np.ndarray) -> np.ndarray:
    """The non-constant features below :data:`SMALL_FEATURE` × the features' RMS std."""
    live = np.flatnonzero(std > 0)
    if len(live) < 2:
        return live[:0]
    rms = float(np.sqrt(np.mean(std[live] ** 2)))
    return live[std[live] < SMALL_FEATURE * rms]


def _uses_scale(gamma) -> bool:
    return any(is_scale(g) for g in (gamma if isinstance(gamma, (list, tuple)) else [gamma]))


def standardization(standardize, store, sample_weight=None, gamma="scale") -> tuple | None:
    """``(mean, scale, moments)`` to standardise the training ``store`` with, or None to leave it
    raw; ``moments`` are the rows' (weighted) per-feature mean and std.

    ``"auto"``: exactly where the :class:`~kmp_dask.exceptions.FeatureScaleWarning` would be
    given — the width is resolved from the data (``gamma`` is or holds ``"scale"``) and the
    features are on different scales (:data:`SMALL_FEATURE`: the store's ``std`` attribute, or
    the rows' std); a width given as a number or None refers to the raw rows and is left alone.
    True: always; False: never. ``scale`` is the std, 1 for a
    constant feature (as scikit-learn's StandardScaler). Both are rounded to
    :data:`SCALE_DIGITS` significant digits, so the same rows give the same transform (and
    model) whatever the chunking and the input type.
    """
    check_standardize(standardize)
    if standardize is False:
        return None
    if standardize == "auto":
        if not _uses_scale(gamma):
            return None
        std = _feature_stds(store)
        if std is None or not len(_small_features(std)):
            return None
    mean, std = _feature_moments(store, sample_weight)
    constant = ~(std > 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0))
    scale = np.where(constant, 1.0, std)
    rounded = np.vectorize(_rounded, otypes=[np.float64])
    return rounded(mean), rounded(scale), (mean, std)


def standardized_store(estimator, store, sample_weight=None):
    """The store the fit sees: ``store`` itself, or an :class:`~kmp_dask.store.AffineStore` view
    ``(x − mean) / scale`` read partition by partition (no copy, no extra pass). Sets the fitted
    attributes ``standardized_`` and, when standardised, ``feature_mean_`` / ``feature_scale_``."""
    from ..store import AffineStore

    for name in ("feature_mean_", "feature_scale_"):
        estimator.__dict__.pop(name, None)
    found = standardization(getattr(estimator, "standardize", False), store, sample_weight,
                            getattr(estimator, "gamma", "scale"))
    estimator.standardized_ = found is not None
    if found is None:
        return store
    estimator.feature_mean_, estimator.feature_scale_, moments = found
    # the view's mean / std attributes are the (weighted) moments transformed: "scale" needs no pass
    return AffineStore(store, found[0], found[1], moments=moments)


def input_transform(estimator):
    """``(offset, scale)`` the fitted model applies to raw rows, or ``(None, None)``."""
    if getattr(estimator, "standardized_", False):
        return estimator.feature_mean_, estimator.feature_scale_
    return None, None
