"""Kernel registry: name -> block function, diagonal function, parameters, and every property the
library reads about a kernel (its distance, its width rule, its scikit-learn names, its fast path,
its cross-validation grid).

Pure Python; the only place that knows which kernels exist. A registered kernel is complete in its
:func:`register_kernel` call: no other module tests a kernel's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ._laplacian import laplacian, laplacian_diag
from ._linear import linear, linear_diag
from ._polynomial import polynomial, polynomial_diag, sigmoid, sigmoid_diag
from ._rbf import rbf, rbf_diag, rbf_multi

WIDTH_GRID = (0.25, 1.0, 4.0)
"""The cross-validation's default widths, as multiples of the ``"scale"`` width (a kernel may
register its own ``width_grid``)."""

SCALE_RULES = ("variance", "std")


@dataclass(frozen=True)
class KernelSpec:
    """Everything the library needs to know about one kernel.

    Parameters
    ----------
    name : str
        Registry key.
    fn : callable
        Block function ``fn(X, Y, **params) -> ndarray of shape (n, s)``.
    diag : callable
        Diagonal function ``diag(X, **params) -> ndarray of shape (n,)``.
    params : mapping of str to default
        Accepted parameters and their defaults. A default of None for
        ``gamma`` means ``1 / n_features``; any other None means required.
    needs_sqnorm : bool
        True when ``fn`` also accepts ``X_sqnorm`` and ``Y_sqnorm`` keywords
        (precomputed squared row norms).
    accepts_out : bool
        True when ``fn`` accepts ``out=`` (a C-contiguous buffer of the result's shape and
        dtype), so hot loops can reuse one kernel-block buffer.
    multi : callable or None
        ``multi(X, Y, values, X_sqnorm=, Y_sqnorm=) -> [block per value]``: blocks for several
        values of the parameter ``multi_param`` sharing one pass (bit-identical to ``fn``).
    multi_param : str or None
        The parameter ``multi`` varies (e.g. ``"gamma"``).
    column_sqnorms : callable or None
        ``column_sqnorms(X, Y, **params) -> ndarray (len(Y),) or None``: ``Σ_i fn(X, Y)[i, j]²``
        when the kernel holds them already (a table's cached columns), bit for bit
        ``np.einsum("ij,ij->j", K, K)`` of the block ``K = fn(X, Y)``; None when it does not.
    distance : tuple of (str, str) or None
        ``(scipy metric, words)`` when the kernel is a function of ``gamma × distance(x, z)``
        (rbf: ``("sqeuclidean", "squared distance")``): the degenerate-width checks compare
        ``gamma`` with the data's distances in that metric and name them in their hints. None: no
        such distance (the hints then only say to change ``gamma``).
    scale_rule : {"variance", "std"}
        How ``gamma="scale"`` follows the data's spread: ``1 / (n_features · Var(X))`` for a
        squared distance, ``1 / (n_features · √Var(X))`` for a distance that grows as the standard
        deviation (an L1 distance).
    libsvm_name : str or None
        The kernel's name in libsvm (``SVC`` / ``SVR`` / ``NuSVC``'s ``kernel``), or None.
    pairwise_names : tuple of str
        Its names in ``sklearn.metrics.pairwise`` (``KernelRidge``'s ``kernel``).
    factored : bool
        True for ``exp(−gamma ‖x − z‖²)``: KMP's scoring pass may rank candidates from
        ``a(x)·exp(2 gamma xᵀz)·b(z)`` (docs/engine.md "Factored scoring").
    width_grid : tuple of float
        Multiples of the ``"scale"`` width the KMP cross-validation tries when ``gammas=None``.
    """

    name: str
    fn: Callable
    diag: Callable
    params: Mapping[str, object]
    needs_sqnorm: bool = False
    accepts_out: bool = False
    multi: Callable | None = None
    multi_param: str | None = None
    column_sqnorms: Callable | None = None
    distance: tuple[str, str] | None = None
    scale_rule: str = "variance"
    libsvm_name: str | None = None
    pairwise_names: tuple[str, ...] = ()
    factored: bool = False
    width_grid: tuple[float, ...] = WIDTH_GRID


KERNELS: dict[str, KernelSpec] = {}


def register_kernel(name, fn, diag, params, *, needs_sqnorm=False, accepts_out=False, multi=None, multi_param=None,
                    column_sqnorms=None, **properties):
    """Add a kernel to :data:`KERNELS`.

    Parameters
    ----------
    name : str
        New registry key; must not be registered yet.
    fn : callable
        Block function ``fn(X, Y, **params)`` returning (len(X), len(Y)) in
        the floating dtype of the inputs.
    diag : callable
        ``diag(X, **params)`` returning ``k(x, x)`` for every row.
    params : mapping of str to default
        Accepted keyword parameters with their defaults (None: required,
        except ``gamma``, where None means ``1 / n_features``).
    needs_sqnorm : bool, default=False
        Whether ``fn`` accepts precomputed ``X_sqnorm`` / ``Y_sqnorm``.
    accepts_out, multi, multi_param, column_sqnorms
        Optional capabilities, see :class:`KernelSpec`.
    **properties
        ``distance``, ``scale_rule``, ``libsvm_name``, ``pairwise_names``, ``factored``,
        ``width_grid``: what the library reads about the kernel, see :class:`KernelSpec` (the
        defaults: no distance, the variance rule, no scikit-learn names, no fast path, the
        default grid).

    Returns
    -------
    spec : KernelSpec
        The registered entry.

    Raises
    ------
    ValueError
        If ``name`` is already registered or is not a non-empty string, or a property is unknown
        or out of its range.
    TypeError
        If ``fn`` or ``diag`` is not callable.

    Notes
    -----
    :class:`~kmp_dask.kernels.Kernel` objects look their function up by name
    when called, so on a distributed cluster the registration must also run
    on the workers (register at import time of the module defining ``fn``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"Kernel name must be a non-empty string. Got {name!r} instead.")
    if name in KERNELS:
        raise ValueError(
            f"Kernel {name!r} is already registered; choose another name "
            f"(registered: {sorted(KERNELS)})."
        )
    for label, func in (("fn", fn), ("diag", diag)):
        if not callable(func):
            raise TypeError(f"register_kernel: {label!r} must be callable. Got {func!r} instead.")
    spec = KernelSpec(name, fn, diag, MappingProxyType(dict(params)), bool(needs_sqnorm), bool(accepts_out),
                      multi, multi_param, column_sqnorms, **_checked_properties(properties))
    KERNELS[name] = spec
    return spec


def _checked_properties(properties: dict) -> dict:
    """``properties`` if each is a :class:`KernelSpec` property in its range; ValueError naming it."""
    known = ("distance", "scale_rule", "libsvm_name", "pairwise_names", "factored", "width_grid")
    unknown = sorted(set(properties) - set(known))
    if unknown:
        raise ValueError(f"register_kernel: unknown kernel properties {unknown}; accepted: {list(known)}.")
    rule = properties.get("scale_rule", "variance")
    if rule not in SCALE_RULES:
        raise ValueError(f"register_kernel: scale_rule must be one of {list(SCALE_RULES)}; got {rule!r}.")
    out = dict(properties)
    if "pairwise_names" in out:
        out["pairwise_names"] = tuple(out["pairwise_names"])
    if "width_grid" in out:
        out["width_grid"] = tuple(float(g) for g in out["width_grid"])
    return out


def libsvm_names() -> dict:
    """libsvm kernel name -> registry name, over the registered kernels."""
    return {s.libsvm_name: n for n, s in KERNELS.items() if s.libsvm_name}


def pairwise_names() -> dict:
    """``sklearn.metrics.pairwise`` kernel name -> registry name, over the registered kernels."""
    return {alias: n for n, s in KERNELS.items() for alias in s.pairwise_names}


register_kernel("rbf", rbf, rbf_diag, {"gamma": None}, needs_sqnorm=True, accepts_out=True, multi=rbf_multi,
                multi_param="gamma", distance=("sqeuclidean", "squared distance"), libsvm_name="rbf",
                pairwise_names=("rbf",), factored=True)
register_kernel("laplacian", laplacian, laplacian_diag, {"gamma": None}, distance=("cityblock", "L1 distance"),
                scale_rule="std", pairwise_names=("laplacian",))
register_kernel(
    "polynomial", polynomial, polynomial_diag, {"gamma": None, "degree": 3, "coef0": 1.0}, libsvm_name="poly",
    pairwise_names=("poly", "polynomial"),
)
register_kernel("sigmoid", sigmoid, sigmoid_diag, {"gamma": None, "coef0": 1.0}, libsvm_name="sigmoid",
                pairwise_names=("sigmoid",))
register_kernel("linear", linear, linear_diag, {}, libsvm_name="linear", pairwise_names=("linear",))
