"""Fitted kernel models as compression targets: :class:`CompressionTarget`, :func:`as_compression_target`.

Reduced-set compression (Weston & Bakır) approximates a model's hyperplanes
``w_j = Σ_i α_ij φ(x_i)`` by fewer vectors. This module reads a fitted model and returns its
hyperplanes as one :class:`~kmp_dask.KernelExpansion` with m outputs (``F = K(X, Z) @ coef +
intercept``, intercept = the model's own) together with the rule that turns decision values ``F``
into the model's predictions (:meth:`CompressionTarget.predict`) and, for classifiers, which
training rows and ±1 labels each output was trained on (:meth:`CompressionTarget.output_labels`,
for re-optimising thresholds after compression).

The mapping per model type
--------------------------
``SVR`` / ``NuSVR``
    One output: ``coef = dual_coef_[0]``, ``intercept = intercept_``; ``predict = F[:, 0]``.

``SVC`` / ``NuSVC``, two classes (kind ``"binary"``)
    One output. scikit-learn flips libsvm's signs for binary models, so the *public*
    ``dual_coef_[0]`` and ``intercept_`` already give ``decision_function`` (``F > 0`` means
    ``classes_[1]``). libsvm predicts by voting on its own (unflipped) value ``-F``: ``-F > 0``
    votes ``classes_[0]``, anything else ``classes_[1]``, so at exactly ``F == 0`` an SVC predicts
    ``classes_[1]``. :meth:`CompressionTarget.predict` reproduces that tie rule for libsvm sources
    (``F >= 0``) and uses ``F > 0`` for the others (kmp_dask's classifiers).

``SVC`` / ``NuSVC``, k > 2 classes (kind ``"ovo"``)
    libsvm trains one classifier per pair of classes ``(i, j)``, ``i < j``, in the order
    ``(0, 1), (0, 2), …, (0, k-1), (1, 2), …`` (indices into ``classes_``, which libsvm in
    scikit-learn keeps sorted). ``support_vectors_`` holds the union of all pairs' support
    vectors in class blocks: ``n_support_[c]`` rows of class ``c``, blocks in class order.
    ``dual_coef_`` has shape (k-1, n_SV): a support vector of class ``c`` has one coefficient per
    *other* class, stored down its column in the order of the other classes, skipping ``c``.
    Hence, for the pair ``(i, j)``:

    * the coefficients of the class-``i`` vectors are in row ``j - 1`` (class ``j`` is the
      ``(j-1)``-th other class of ``i``, because ``j > i`` is shifted by the skipped ``i``);
    * those of the class-``j`` vectors are in row ``i`` (``i < j`` is not shifted);
    * vectors of the other classes do not take part (coefficient 0 here).

    Output ``p`` of the expansion is that pair's hyperplane over the union of support vectors,
    with intercept ``intercept_[p]``; ``F`` equals ``decision_function`` of the same model with
    ``decision_function_shape="ovo"``, and ``F_p > 0`` means class ``i`` (libsvm's unflipped
    sign). Predictions are libsvm's votes: ``F_p > 0`` votes ``i``, anything else ``j``; the class
    with most votes wins, ties to the lowest class index. With ``break_ties=True`` and
    ``decision_function_shape="ovr"`` scikit-learn instead takes the argmax of its ovr transform
    of ``F`` (votes plus the confidence term ``s / (3 (|s| + 1))``, ``s`` the summed ±``F``);
    the target records that in :attr:`CompressionTarget.break_ties`.

``KernelRidge``
    ``support vectors = X_fit_``, ``coef = dual_coef_`` (one column per target), intercept 0.
    For a named kernel scikit-learn evaluates ``pairwise_kernels(X, X_fit_, metric=kernel,
    gamma=gamma, degree=degree, coef0=coef0)``; ``kernel_params`` is only passed to *callable*
    kernels, so it is ignored here as it is by the model. ``gamma=None`` is ``1 / n_features``.

``KMPRegressor`` / ``KMPClassifier``
    Their ``expansion_`` as is. Classifiers: one output → ``"binary"`` (``F > 0`` means
    ``classes_[1]``), one output per class → ``"ovr"`` (argmax).

``CVMClassifier``
    Its ``expansion_`` (the union of the binary problems' core vectors, ``coef`` = α·y per problem,
    the problems' intercepts) as is: two classes → one output, ``"binary"`` (``F > 0`` means
    ``classes_[1]``, as ``CVMClassifier.predict``); k > 2 classes → one one-vs-rest output per
    class, ``"ovr"`` (argmax). ``output_labels`` then re-fits thresholds for the same one-vs-rest
    problems the CVM solved.

scikit-learn ``Pipeline``
    Per-feature linear scalers (``StandardScaler``, ``MinMaxScaler`` with ``clip=False``,
    ``MaxAbsScaler``, ``RobustScaler``; ``"passthrough"`` / None steps are skipped) followed by one
    of the models above. Each scaler is the affine map ``x ↦ (x − o) / s`` per feature
    (StandardScaler: ``o = mean_``, ``s = scale_``, each only when ``with_mean`` / ``with_std``;
    MinMaxScaler's ``x · scale_ + min_``: ``o = −min_ / scale_``, ``s = 1 / scale_``;
    MaxAbsScaler: ``o = 0``, ``s = scale_``; RobustScaler: ``o = center_``, ``s = scale_``, each
    only when ``with_centering`` / ``with_scaling``), and two in a row compose into one:
    ``(((x − o₁)/s₁) − o₂)/s₂ = (x − (o₁ + o₂ s₁)) / (s₁ s₂)``. The composed map becomes the
    expansion's input transform (``input_offset`` / ``input_scale``, composed the same way with
    a KMP model's own ``standardize`` map), so the target — and the compressed model — takes raw
    rows. Any other step (a PCA, a polynomial expansion, a clipping MinMaxScaler...) is not a
    per-feature affine map of the input and is refused with a TypeError naming it.

``MMDA`` / ``SparseKernelPCA``
    Transformers: their ``expansion_`` (one output per feature; MMDA's intercept 0, sparse KPCA's
    the centring offsets) as kind ``"regression"``; ``predict`` of the target is the features
    (``transform``). A compressed one approximates every feature with fewer kernel evaluations;
    its ``predict`` returns them.

:class:`~kmp_dask.KernelExpansion`
    As is, kind ``"regression"``.

Regression targets predict ``F[:, 0]`` when there is one output and ``F`` otherwise (a model
fitted on a 2-D ``y`` of one column returns a column there; ravel it to compare).

Layering: this module imports scikit-learn and kmp_dask's numerical layers only. kmp_dask's
estimators are recognised through ``sys.modules`` (an instance exists only if its module was
imported), so no dask-side module is imported from here.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.kernel_ridge import KernelRidge
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC, SVR, NuSVC, NuSVR
from sklearn.utils.validation import check_is_fitted

from ..expansion import KernelExpansion
from ..kernels import Kernel, get_kernel, kernel_spec, libsvm_names, pairwise_names

__all__ = ["CompressionTarget", "as_compression_target", "final_estimator", "pipeline_scaling"]

KINDS = ("binary", "ovo", "ovr", "regression")
"""The prediction rules a :class:`CompressionTarget` knows."""

SUPPORTED_MODELS = ("sklearn.svm.SVC", "sklearn.svm.NuSVC", "sklearn.svm.SVR", "sklearn.svm.NuSVR",
                    "sklearn.kernel_ridge.KernelRidge", "kmp_dask.KMPRegressor", "kmp_dask.KMPClassifier",
                    "kmp_dask.CVMClassifier", "kmp_dask.MMDA", "kmp_dask.SparseKernelPCA",
                    "kmp_dask.KernelExpansion")
"""What :func:`as_compression_target` accepts (named in its TypeError); also a scikit-learn
``Pipeline`` of :data:`SCALERS` ending in one of these."""

SCALERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler")
"""The scikit-learn scalers a Pipeline may apply before the kernel model (per-feature affine maps)."""

_LIBSVM_SOURCES = frozenset({"SVC", "NuSVC"})
"""Sources whose binary prediction follows libsvm's tie rule (``F == 0`` → ``classes[1]``)."""

_KMP_MODULE = "kmp_dask.estimators._kmp"
_CVM_MODULE = "kmp_dask.estimators._cvm"
_KPCA_MODULE = "kmp_dask.estimators._kpca"


# -- the target -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressionTarget:
    """A fitted model's hyperplanes as one kernel expansion, plus its prediction rule.

    Parameters
    ----------
    expansion : KernelExpansion
        m outputs; ``expansion.decision_function(X)`` is the model's decision values (intercept
        included, the model's own).
    kind : {"binary", "ovo", "ovr", "regression"}
        How decision values become predictions (see :meth:`predict`).
    classes : ndarray of shape (n_classes,) or None
        Class labels of a classifier (the model's ``classes_``), None for regression.
    pairs : tuple of (int, int) or None
        For ``kind="ovo"``: the class indices ``(i, j)`` of each output, in scikit-learn's order;
        ``F_p > 0`` means class ``i``. None otherwise.
    source : str
        The model's type name (``"SVC"``, ``"NuSVC"``, ``"SVR"``, ``"NuSVR"``, ``"KernelRidge"``,
        ``"KMPRegressor"``, ``"KMPClassifier"``, ``"CVMClassifier"``, ``"MMDA"``, ``"SparseKernelPCA"``,
        ``"KernelExpansion"``).
    break_ties : bool, default=False
        ``kind="ovo"`` only: predict by the argmax of scikit-learn's one-vs-rest transform of the
        pairwise values (an ``SVC(break_ties=True, decision_function_shape="ovr")``) instead of
        libsvm's voting.
    """

    expansion: KernelExpansion
    kind: str
    classes: np.ndarray | None
    pairs: tuple | None
    source: str
    break_ties: bool = False

    def __post_init__(self):
        if not isinstance(self.expansion, KernelExpansion):
            raise TypeError(f"expansion must be a kmp_dask.KernelExpansion; got {type(self.expansion).__name__}.")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {self.kind!r}.")
        m = self.expansion.n_outputs
        if self.kind == "regression":
            if self.classes is not None or self.pairs is not None:
                raise ValueError("A regression target has classes=None and pairs=None.")
            return
        if self.classes is None:
            raise ValueError(f"kind={self.kind!r} needs the class labels (classes); got None.")
        classes = np.asarray(self.classes)
        object.__setattr__(self, "classes", classes)
        k = len(classes)
        if self.kind == "binary":
            expected = 1
        elif self.kind == "ovr":
            expected = k
        else:
            expected = k * (k - 1) // 2
            want = tuple((i, j) for i in range(k) for j in range(i + 1, k))
            pairs = None if self.pairs is None else tuple((int(i), int(j)) for i, j in self.pairs)
            if pairs != want:
                raise ValueError(f"kind='ovo' with {k} classes needs pairs={want} (scikit-learn's order); "
                                 f"got {self.pairs!r}.")
            object.__setattr__(self, "pairs", pairs)
        if self.kind != "ovo" and self.pairs is not None:
            raise ValueError(f"pairs is only used with kind='ovo'; got pairs={self.pairs!r} with kind={self.kind!r}.")
        if (self.kind == "binary" and k != 2) or (self.kind != "binary" and k < 3) or m != expected:
            raise ValueError(f"kind={self.kind!r} with {k} classes needs {expected} outputs and "
                             f"{'2' if self.kind == 'binary' else 'at least 3'} classes; the expansion has "
                             f"{m} outputs.")
        if self.break_ties and self.kind != "ovo":
            raise ValueError(f"break_ties=True applies to kind='ovo' only; got kind={self.kind!r}.")

    @property
    def n_outputs(self) -> int:
        """m, the number of decision values per row."""
        return self.expansion.n_outputs

    def _check_F(self, F) -> np.ndarray:
        F = np.asarray(F, dtype=np.float64)
        m = self.n_outputs
        if F.ndim == 1 and m == 1:
            F = F[:, None]
        if F.ndim != 2 or F.shape[1] != m:
            raise ValueError(f"F must be the decision values of shape (n_samples, {m}) (this target's outputs, "
                             f"e.g. target.expansion.decision_function(X)); got shape {F.shape}.")
        return F

    def predict(self, F) -> np.ndarray:
        """Predictions from decision values, exactly as the original model makes them.

        Parameters
        ----------
        F : ndarray of shape (n_samples, m)
            Decision values including the intercept (a 1-D array is accepted when m == 1).

        Returns
        -------
        y : ndarray of shape (n_samples,), or (n_samples, m) for multi-output regression
            ``"binary"``: ``classes[1]`` where ``F > 0`` (``F >= 0`` for SVC/NuSVC, libsvm's tie
            rule), else ``classes[0]``; ``"ovo"``: libsvm's vote (``F_p > 0`` votes ``i``, else
            ``j``; ties to the lowest class index), or with ``break_ties`` the argmax of
            scikit-learn's ovr transform; ``"ovr"``: ``classes[argmax F]``; ``"regression"``:
            ``F[:, 0]`` for one output, ``F`` otherwise.
        """
        F = self._check_F(F)
        if self.kind == "regression":
            return F[:, 0].copy() if F.shape[1] == 1 else F
        if self.kind == "binary":
            positive = F[:, 0] >= 0 if self.source in _LIBSVM_SOURCES else F[:, 0] > 0
            return self.classes.take(positive.astype(np.intp))
        if self.kind == "ovr":
            return self.classes.take(F.argmax(axis=1))
        if self.break_ties:
            return self.classes.take(_ovr_transform(F, self.pairs, len(self.classes)).argmax(axis=1))
        votes = np.zeros((F.shape[0], len(self.classes)), dtype=np.int64)
        rows = np.arange(F.shape[0])
        for p, (i, j) in enumerate(self.pairs):
            votes[rows, np.where(F[:, p] > 0, i, j)] += 1
        return self.classes.take(votes.argmax(axis=1))  # argmax: first maximum = libsvm's tie rule

    def output_labels(self, y) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per output, the rows of ``y`` it is trained on and their ±1 labels.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Class labels (values of :attr:`classes`).

        Returns
        -------
        labels : list of (mask, signs), one per output
            ``mask`` (n_samples,) bool: the rows output j separates (all rows, except for
            ``"ovo"``: the rows of its two classes); ``signs`` (mask.sum(),) float64: ``+1.0`` for
            the class that ``F_j > 0`` stands for (``classes[1]`` binary, ``classes[j]`` ovr,
            class ``i`` of the pair ``(i, j)`` ovo), ``-1.0`` for the other side.

        Raises
        ------
        ValueError
            For a regression target, or when ``y`` is not 1-D or holds labels not in
            :attr:`classes`.
        """
        if self.kind == "regression":
            raise ValueError(f"output_labels needs a classifier; this target (source {self.source}) is a regression "
                             "model, whose outputs have no class labels or thresholds to re-optimise.")
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of class labels; got shape {y.shape}.")
        unknown = np.setdiff1d(np.unique(y), self.classes)
        if unknown.size:
            raise ValueError(f"y holds labels {unknown[:10].tolist()} that are not among the model's classes "
                             f"{self.classes.tolist()}; pass the labels the model was trained on.")
        everyone = np.ones(y.shape[0], dtype=bool)
        if self.kind == "binary":
            return [(everyone, np.where(y == self.classes[1], 1.0, -1.0))]
        if self.kind == "ovr":
            return [(everyone.copy(), np.where(y == c, 1.0, -1.0)) for c in self.classes]
        out = []
        for i, j in self.pairs:
            mask = (y == self.classes[i]) | (y == self.classes[j])
            out.append((mask, np.where(y[mask] == self.classes[i], 1.0, -1.0)))
        return out


def _ovr_transform(F: np.ndarray, pairs, n_classes: int) -> np.ndarray:
    """scikit-learn's one-vs-rest view of pairwise decision values (``SVC.decision_function`` with
    ``decision_function_shape="ovr"``): votes plus a confidence term in (-1/3, 1/3).

    Parameters
    ----------
    F : ndarray of shape (n_samples, n_pairs)
        Pairwise values, ``F_p > 0`` meaning class ``i`` of ``pairs[p] = (i, j)``.
    pairs : sequence of (int, int)
    n_classes : int

    Returns
    -------
    scores : ndarray of shape (n_samples, n_classes)

    Notes
    -----
    The vote here follows ``sklearn.utils.multiclass._ovr_decision_function(F < 0, -F, k)``:
    ``F_p >= 0`` votes ``i`` (libsvm's own vote sends ``F_p == 0`` to ``j``).
    """
    votes = np.zeros((F.shape[0], n_classes))
    conf = np.zeros((F.shape[0], n_classes))
    for p, (i, j) in enumerate(pairs):
        conf[:, i] += F[:, p]
        conf[:, j] -= F[:, p]
        second = F[:, p] < 0
        votes[~second, i] += 1
        votes[second, j] += 1
    return votes + conf / (3 * (np.abs(conf) + 1))


# -- reading models -------------------------------------------------------------------------------


def as_compression_target(model) -> CompressionTarget:
    """The fitted ``model``'s hyperplanes and prediction rule as a :class:`CompressionTarget`.

    Parameters
    ----------
    model : fitted estimator, Pipeline, KernelExpansion or CompressionTarget
        A scikit-learn ``Pipeline`` of linear scalers ending in one of the models below (the scaling
        becomes the expansion's input transform: raw rows in); scikit-learn ``SVC``, ``NuSVC``,
        ``SVR``, ``NuSVR`` or ``KernelRidge`` with a kernel kmp_dask can evaluate (rbf, laplacian
        for KernelRidge, poly/polynomial, sigmoid, linear); kmp_dask's ``KMPRegressor`` /
        ``KMPClassifier`` / ``CVMClassifier`` / ``MMDA`` / ``SparseKernelPCA`` (the transformers'
        features as a multi-output regression target); or a ``KernelExpansion``.

    Returns
    -------
    target : CompressionTarget
        ``target.expansion.decision_function(X)`` equals the model's decision values
        (``SVC(decision_function_shape="ovo")`` layout for multi-class SVMs) and
        ``target.predict`` of them equals ``model.predict(X)``.

    Raises
    ------
    NotFittedError
        If ``model`` is not fitted.
    ValueError
        For ``kernel="precomputed"``, a callable kernel, or a kernel / parameter kmp_dask's
        kernels cannot represent.
    TypeError
        For any other model type, or a Pipeline step that is not a linear scaler.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.svm import SVC
    >>> X, y = load_iris(return_X_y=True)
    >>> svc = SVC().fit(X, y)
    >>> target = as_compression_target(svc)
    >>> target.kind, target.pairs
    ('ovo', ((0, 1), (0, 2), (1, 2)))
    >>> bool((target.predict(target.expansion.decision_function(X)) == svc.predict(X)).all())
    True
    """
    if isinstance(model, CompressionTarget):  # already one (e.g. an SVC a pipeline saved in the open format)
        return model
    if isinstance(model, Pipeline):
        return _from_pipeline(model)
    if isinstance(model, KernelExpansion):
        return CompressionTarget(model, "regression", None, None, "KernelExpansion")
    if isinstance(model, (SVC, NuSVC)):
        return _from_svc(model)
    if isinstance(model, (SVR, NuSVR)):
        return _from_svr(model)
    if isinstance(model, KernelRidge):
        return _from_kernel_ridge(model)
    kmp = sys.modules.get(_KMP_MODULE)
    if kmp is not None and isinstance(model, (kmp.KMPRegressor, kmp.KMPClassifier)):
        return _from_kmp(model, kmp)
    cvm = sys.modules.get(_CVM_MODULE)
    if cvm is not None and isinstance(model, (cvm.CVMClassifier, cvm.MMDA)):
        return _from_cvm(model, cvm)
    kpca = sys.modules.get(_KPCA_MODULE)
    if kpca is not None and isinstance(model, kpca.SparseKernelPCA):
        _check_fitted(model, "expansion_")
        return CompressionTarget(model.expansion_, "regression", None, None, "SparseKernelPCA")
    raise TypeError(
        f"as_compression_target(model): model must be one of {', '.join(SUPPORTED_MODELS)}; got "
        f"{type(model).__module__}.{type(model).__qualname__}. Other kernel models can be compressed by "
        "building a kmp_dask.KernelExpansion(support_vectors, coef, intercept, kernels) from their fitted "
        "attributes and passing that."
    )


def _check_fitted(model, attributes=None) -> None:
    check_is_fitted(model, attributes, msg=(
        "as_compression_target(model): model is an unfitted %(name)s instance (no fitted attributes). "
        "Call model.fit(X, y) first, then compress the fitted model."))


def _check_kernel_name(model, names: dict) -> str:
    """The kmp_dask registry name for ``model.kernel``; ValueError for what cannot be compressed."""
    kernel = model.kernel
    name = type(model).__name__
    if callable(kernel):
        raise ValueError(
            f"as_compression_target(model): {name} with a callable kernel ({kernel!r}) cannot be compressed: the "
            f"kernel is not one kmp_dask can evaluate. Refit with one of kernel={sorted(names)}, or wrap the model "
            "in a kmp_dask.KernelExpansion with a kernel registered through kmp_dask.kernels.register_kernel.")
    if kernel == "precomputed":
        raise ValueError(
            f"as_compression_target(model): {name} with kernel='precomputed' cannot be compressed: its support "
            "vectors are not feature rows (they are indices into a precomputed Gram matrix) and the kernel is "
            f"unknown. Refit on the feature rows with one of kernel={sorted(names)}.")
    if kernel not in names:
        raise ValueError(
            f"as_compression_target(model): {name} has kernel={kernel!r}, which kmp_dask cannot evaluate; "
            f"supported: {sorted(names)}. Refit with one of those to compress the model.")
    return names[kernel]


def _kernel(model, registry_name: str, *, gamma, degree, coef0, n_features) -> Kernel:
    """``get_kernel`` with the model's parameters; a ValueError naming the model otherwise."""
    try:
        accepted = kernel_spec(registry_name).params
        if "degree" in accepted:
            if float(degree) != int(degree):
                raise ValueError(f"degree must be a whole number; got {degree!r}")
            degree = int(degree)
        return get_kernel(registry_name, gamma=gamma, degree=degree if "degree" in accepted else 3,
                          coef0=coef0 if "coef0" in accepted else 1.0, n_features=n_features)
    except ValueError as exc:
        raise ValueError(
            f"as_compression_target(model): the kernel of {type(model).__name__} (kernel={model.kernel!r}, "
            f"gamma={gamma!r}, degree={degree!r}, coef0={coef0!r}) cannot be expressed as a kmp_dask kernel: "
            f"{exc}. Refit the model with parameters in that range to compress it.") from exc


def _dense(a) -> np.ndarray:
    """float64 numpy copy of a fitted array (scipy.sparse when the model was fitted on sparse X)."""
    return np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64)


def _svm_expansion(model) -> tuple[np.ndarray, np.ndarray, Kernel]:
    registry_name = _check_kernel_name(model, libsvm_names())
    sv = _dense(model.support_vectors_)
    kern = _kernel(model, registry_name, gamma=float(model._gamma), degree=model.degree, coef0=float(model.coef0),
                   n_features=sv.shape[1])
    return sv, _dense(model.dual_coef_), kern


def _from_svc(model) -> CompressionTarget:
    _check_fitted(model)
    sv, dual, kern = _svm_expansion(model)
    classes = np.asarray(model.classes_)
    intercept = np.asarray(model.intercept_, dtype=np.float64)
    source = type(model).__name__
    k = len(classes)
    if k == 2:  # public dual_coef_/intercept_ are already sign-flipped: F > 0 means classes_[1]
        return CompressionTarget(KernelExpansion(sv, dual[0][:, None], intercept, kern), "binary", classes, None,
                                 source)
    starts = np.concatenate([[0], np.cumsum(model.n_support_)])
    block = [slice(int(starts[c]), int(starts[c + 1])) for c in range(k)]
    pairs = tuple((i, j) for i in range(k) for j in range(i + 1, k))
    coef = np.zeros((sv.shape[0], len(pairs)))
    for p, (i, j) in enumerate(pairs):
        coef[block[i], p] = dual[j - 1, block[i]]
        coef[block[j], p] = dual[i, block[j]]
    break_ties = bool(model.break_ties) and model.decision_function_shape == "ovr"
    return CompressionTarget(KernelExpansion(sv, coef, intercept, kern), "ovo", classes, pairs, source, break_ties)


def _from_svr(model) -> CompressionTarget:
    _check_fitted(model)
    sv, dual, kern = _svm_expansion(model)
    expansion = KernelExpansion(sv, dual[0][:, None], np.asarray(model.intercept_, dtype=np.float64), kern)
    return CompressionTarget(expansion, "regression", None, None, type(model).__name__)


def _from_kernel_ridge(model) -> CompressionTarget:
    _check_fitted(model)
    registry_name = _check_kernel_name(model, pairwise_names())
    X_fit = _dense(model.X_fit_)
    # KernelRidge._get_kernel passes gamma/degree/coef0 to named kernels (kernel_params: callables only)
    kern = _kernel(model, registry_name, gamma=model.gamma, degree=model.degree, coef0=model.coef0,
                   n_features=X_fit.shape[1])
    coef = np.asarray(model.dual_coef_, dtype=np.float64)
    coef = coef[:, None] if coef.ndim == 1 else coef
    expansion = KernelExpansion(X_fit, coef, np.zeros(coef.shape[1]), kern)
    return CompressionTarget(expansion, "regression", None, None, "KernelRidge")


def _from_kmp(model, kmp) -> CompressionTarget:
    _check_fitted(model, "expansion_")
    expansion = model.expansion_
    source = type(model).__name__
    if not isinstance(model, kmp.KMPClassifier):
        return CompressionTarget(expansion, "regression", None, None, source)
    kind = "binary" if expansion.n_outputs == 1 else "ovr"
    return CompressionTarget(expansion, kind, np.asarray(model.classes_), None, source)


def _from_cvm(model, cvm) -> CompressionTarget:
    _check_fitted(model, "expansion_")
    expansion = model.expansion_
    source = type(model).__name__
    if isinstance(model, cvm.MMDA):  # features u_q^T phi(x), one output each: a multi-output "regression"
        return CompressionTarget(expansion, "regression", None, None, source)
    classes = np.asarray(model.classes_)
    kind = "binary" if expansion.n_outputs == 1 else "ovr"
    return CompressionTarget(expansion, kind, classes, None, source)


# -- pipelines ------------------------------------------------------------------------------------


def final_estimator(model):
    """The model itself, or a Pipeline's last step (what decides how its outputs are shown)."""
    return model.steps[-1][1] if isinstance(model, Pipeline) else model


def _from_pipeline(model: Pipeline) -> CompressionTarget:
    """A Pipeline of linear scalers and a kernel model: the model's target taking raw rows."""
    name, final = model.steps[-1]
    if final is None or (isinstance(final, str) and final == "passthrough"):
        raise TypeError("as_compression_target(model): the Pipeline's last step is 'passthrough'; it must be a "
                        f"fitted kernel model ({', '.join(SUPPORTED_MODELS[:-1])})")
    target = as_compression_target(final)
    offset, scale = pipeline_scaling(model)
    exp = target.expansion
    if offset is None:
        return target
    if exp.has_input_transform:  # the model's own map (KMP standardize) after the pipeline's
        offset, scale = _compose(offset, scale, exp.input_offset, exp.input_scale)
    if offset.shape[0] != exp.n_features:
        raise ValueError(f"as_compression_target(model): the Pipeline's scalers map {offset.shape[0]} features but "
                         f"its model {name!r} has {exp.n_features}; refit the pipeline")
    return dataclasses.replace(target, expansion=exp.with_input_transform(offset, scale))


def pipeline_scaling(model: Pipeline):
    """``(offset, scale)`` of the Pipeline's steps before its last, composed into one map
    ``x ↦ (x − offset) / scale``; ``(None, None)`` when there are only passthrough steps.

    Raises a TypeError naming the first step that is not one of :data:`SCALERS` (fitted, linear)."""
    offset = scale = None
    for name, step in model.steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            continue
        o, s = _scaler_map(name, step)
        offset, scale = (o, s) if offset is None else _compose(offset, scale, o, s)
    return offset, scale


def _compose(o1, s1, o2, s2):
    """``(x − o1)/s1`` then ``(· − o2)/s2`` as one map ``(x − o)/s``."""
    return o1 + o2 * s1, s1 * s2


def _scaler_map(name, step):
    """One fitted scaler as ``(offset, scale)`` float64 vectors (scale > 0)."""
    kind = type(step).__name__
    if kind not in SCALERS or not type(step).__module__.startswith("sklearn.preprocessing"):
        raise TypeError(
            f"as_compression_target(model): Pipeline step {name!r} is a {type(step).__module__}.{kind}, not a "
            f"per-feature linear scaler; only {', '.join(SCALERS)} (and 'passthrough') may come before the kernel "
            "model. Compress the kernel model alone and pass the transformed rows as X_pool")
    check_is_fitted(step, msg=f"as_compression_target(model): Pipeline step {name!r} ({kind}) is not fitted; "
                              "fit the pipeline first")
    d = int(step.n_features_in_)
    zero, one = np.zeros(d), np.ones(d)
    if kind == "StandardScaler":
        o = np.asarray(step.mean_, dtype=np.float64) if step.with_mean else zero
        s = np.asarray(step.scale_, dtype=np.float64) if step.with_std else one
    elif kind == "RobustScaler":
        o = np.asarray(step.center_, dtype=np.float64) if step.with_centering else zero
        s = np.asarray(step.scale_, dtype=np.float64) if step.with_scaling else one
    elif kind == "MaxAbsScaler":
        o, s = zero, np.asarray(step.scale_, dtype=np.float64)
    else:  # MinMaxScaler: x * scale_ + min_
        if step.clip:
            raise TypeError(f"as_compression_target(model): Pipeline step {name!r} is MinMaxScaler(clip=True), which "
                            "clips rows to the feature range (not a linear map); refit it with clip=False")
        inv = np.asarray(step.scale_, dtype=np.float64)
        o, s = -np.asarray(step.min_, dtype=np.float64) / inv, 1.0 / inv
    if not (np.all(np.isfinite(o)) and np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"as_compression_target(model): Pipeline step {name!r} ({kind}) has a non-finite or "
                         "non-positive scale; refit it on finite data")
    return o, s
