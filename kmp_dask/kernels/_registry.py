"""Kernel registry: name -> block function, diagonal function, parameters.

Pure Python; the only place that knows which kernels exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ._laplacian import laplacian, laplacian_diag
from ._linear import linear, linear_diag
from ._polynomial import polynomial, polynomial_diag, sigmoid, sigmoid_diag
from ._rbf import rbf, rbf_diag, rbf_multi


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


KERNELS: dict[str, KernelSpec] = {}


def register_kernel(name, fn, diag, params, *, needs_sqnorm=False, accepts_out=False, multi=None, multi_param=None,
                    column_sqnorms=None):
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

    Returns
    -------
    spec : KernelSpec
        The registered entry.

    Raises
    ------
    ValueError
        If ``name`` is already registered or is not a non-empty string.
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
                      multi, multi_param, column_sqnorms)
    KERNELS[name] = spec
    return spec


register_kernel("rbf", rbf, rbf_diag, {"gamma": None}, needs_sqnorm=True, accepts_out=True, multi=rbf_multi,
                multi_param="gamma")
register_kernel("laplacian", laplacian, laplacian_diag, {"gamma": None})
register_kernel(
    "polynomial", polynomial, polynomial_diag, {"gamma": None, "degree": 3, "coef0": 1.0}
)
register_kernel("sigmoid", sigmoid, sigmoid_diag, {"gamma": None, "coef0": 1.0})
register_kernel("linear", linear, linear_diag, {})
