"""The :class:`Kernel` value object and :func:`get_kernel`, its resolver.

Pure Python/NumPy. A ``Kernel`` is a name plus fully resolved parameters; it
is hashable, picklable and JSON round-trippable, and dispatches to the block
function registered under its name in :data:`KERNELS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from ._registry import KERNELS, KernelSpec

_JSON_SCALARS = (str, int, float, bool, type(None))


def _lookup(name) -> KernelSpec:
    """Registry entry for ``name``; ValueError listing the available names."""
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown kernel {name!r}. Available kernels: {sorted(KERNELS)}; "
            "add new ones with kmp_dask.kernels.register_kernel."
        ) from None


def kernel_spec(kernel) -> KernelSpec:
    """The registry entry of a kernel name or a :class:`Kernel` (its properties: distance, width
    rule, scikit-learn names, fast path, width grid); ValueError for an unknown name."""
    return _lookup(kernel.name if isinstance(kernel, Kernel) else kernel)


def _check_gamma(value) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if not ok or not (math.isfinite(value) and value > 0):
        raise ValueError(
            "The 'gamma' kernel parameter must be a finite float > 0. "
            f"Got {value!r} instead. Pass a positive number, or gamma=None "
            "together with n_features to use 1 / n_features."
        )
    return float(value)


def _check_degree(value) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(
            "The 'degree' kernel parameter must be an int >= 1. "
            f"Got {value!r} instead. Pass a positive integer such as degree=3."
        )
    return int(value)


def _check_coef0(value) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(value):
        raise ValueError(
            "The 'coef0' kernel parameter must be a finite float. "
            f"Got {value!r} instead. Pass a number such as coef0=1.0."
        )
    return float(value)


def _check_other(key, value):
    if not isinstance(value, _JSON_SCALARS):
        raise ValueError(
            f"The {key!r} kernel parameter must be a str, int, float, bool or None "
            f"so that the kernel can be saved as JSON. Got {value!r} instead."
        )
    return value


_CHECKERS = {"gamma": _check_gamma, "degree": _check_degree, "coef0": _check_coef0}


def _check_param(key: str, value):
    """Validate one parameter value and return it as a plain Python scalar."""
    if isinstance(value, np.generic):
        value = value.item()
    checker = _CHECKERS.get(key)
    return checker(value) if checker else _check_other(key, value)


def _resolve_params(spec: KernelSpec, given: dict) -> tuple:
    """Sorted, validated ``(key, value)`` pairs: ``given`` plus spec defaults."""
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        raise ValueError(
            f"Kernel {spec.name!r} does not accept parameter(s) {unknown}; "
            f"accepted: {sorted(spec.params)}."
        )
    params = {**{k: v for k, v in spec.params.items() if v is not None}, **given}
    missing = sorted(set(spec.params) - set(params))
    if missing:
        raise ValueError(
            f"Kernel {spec.name!r} needs parameter(s) {missing}. Pass them explicitly, "
            "or use get_kernel(name, n_features=...) to derive gamma = 1 / n_features."
        )
    return tuple(sorted((k, _check_param(k, v)) for k, v in params.items()))


@dataclass(frozen=True)
class Kernel:
    """A kernel function with resolved parameters.

    Parameters
    ----------
    name : str
        Key in :data:`KERNELS` (``'rbf'``, ``'laplacian'``, ``'polynomial'``,
        ``'sigmoid'``, ``'linear'`` or a registered extension).
    params : dict or tuple of (str, value) pairs, default=()
        Parameter values; missing ones take the registry default when it is
        not None. Stored as sorted ``(key, value)`` pairs so that the object is
        hashable and picklable.

    Raises
    ------
    ValueError
        On an unknown name, unknown or missing parameters, or invalid values.

    Examples
    --------
    >>> import numpy as np
    >>> k = Kernel("rbf", {"gamma": 0.5})
    >>> k
    Kernel('rbf', gamma=0.5)
    >>> k(np.zeros((2, 3)), np.zeros((1, 3))).shape
    (2, 1)
    """

    name: str
    params: tuple = ()

    def __post_init__(self):
        spec = _lookup(self.name)
        object.__setattr__(self, "params", _resolve_params(spec, dict(self.params)))

    @property
    def params_dict(self) -> dict:
        """Parameters as a new ``dict``."""
        return dict(self.params)

    def get(self, key: str, default=None):
        """Value of parameter ``key``, or ``default`` if the kernel has none."""
        return self.params_dict.get(key, default)

    @property
    def needs_sqnorm(self) -> bool:
        """Whether the block function uses precomputed squared row norms."""
        return _lookup(self.name).needs_sqnorm

    def __call__(self, X, Y, *, X_sqnorm=None, Y_sqnorm=None):
        """Kernel block ``K[i, j] = k(X[i], Y[j])``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        Y : ndarray of shape (n_basis, n_features)
        X_sqnorm : ndarray of shape (n_samples,), default=None
            Precomputed squared row norms of ``X``; used only when
            :attr:`needs_sqnorm` is True, ignored otherwise.
        Y_sqnorm : ndarray of shape (n_basis,), default=None
            Same for ``Y``.

        Returns
        -------
        K : ndarray of shape (n_samples, n_basis)
            In the floating dtype of the inputs.
        """
        spec = _lookup(self.name)
        if spec.needs_sqnorm:
            return spec.fn(X, Y, X_sqnorm=X_sqnorm, Y_sqnorm=Y_sqnorm, **self.params_dict)
        return spec.fn(X, Y, **self.params_dict)

    def block(self, X, Y, *, X_sqnorm=None, Y_sqnorm=None, out=None):
        """Like calling the kernel, writing into ``out`` when the kernel can (``accepts_out``)
        and ``out`` has the result's dtype; otherwise ``out`` is ignored and a new block returned."""
        spec = _lookup(self.name)
        if out is not None and spec.accepts_out and out.dtype == np.result_type(X, Y):
            norms = {"X_sqnorm": X_sqnorm, "Y_sqnorm": Y_sqnorm} if spec.needs_sqnorm else {}
            return spec.fn(X, Y, out=out, **norms, **self.params_dict)
        if spec.needs_sqnorm:  # as __call__ (without looking the kernel up again)
            return spec.fn(X, Y, X_sqnorm=X_sqnorm, Y_sqnorm=Y_sqnorm, **self.params_dict)
        return spec.fn(X, Y, **self.params_dict)

    def column_sqnorms(self, X, Y):
        """``Σ_i k(X[i], Y[j])²`` per row of ``Y`` when the kernel holds these sums already (see
        :class:`~kmp_dask.kernels._registry.KernelSpec`), bit for bit those of the block; else None."""
        spec = _lookup(self.name)
        return None if spec.column_sqnorms is None else spec.column_sqnorms(X, Y, **self.params_dict)

    def diag(self, X):
        """Diagonal ``k(X[i], X[i])``, shape (n_samples,), dtype of ``X``."""
        return _lookup(self.name).diag(X, **self.params_dict)

    def to_dict(self) -> dict:
        """JSON-safe description ``{'name': ..., 'params': {...}}``."""
        return {"name": self.name, "params": self.params_dict}

    @classmethod
    def from_dict(cls, d) -> Kernel:
        """Inverse of :meth:`to_dict`."""
        extra = sorted(set(d) - {"name", "params"})
        if extra or "name" not in d:
            raise ValueError(
                "Kernel.from_dict expects a dict with keys 'name' and optional "
                f"'params' (as written by Kernel.to_dict). Got keys {sorted(d)}."
            )
        return cls(d["name"], dict(d.get("params", {})))

    def __repr__(self) -> str:
        args = [repr(self.name), *(f"{k}={v!r}" for k, v in self.params)]
        return f"Kernel({', '.join(args)})"


def _default_gamma(n_features) -> float:
    """``1 / n_features``, as scikit-learn's pairwise kernels use for gamma=None."""
    if n_features is None:
        raise ValueError(
            "gamma=None means gamma = 1 / n_features, but n_features was not given. "
            "Pass n_features=X.shape[1] or an explicit gamma."
        )
    if not isinstance(n_features, Integral) or isinstance(n_features, bool) or n_features < 1:
        raise ValueError(f"n_features must be an int >= 1. Got {n_features!r} instead.")
    return 1.0 / int(n_features)


def _explicit_args(gamma, degree, coef0, kernel_params) -> dict:
    """Parameters the caller set to something other than get_kernel's defaults."""
    explicit = {"gamma": gamma, "degree": degree, "coef0": coef0}
    defaults = {"gamma": None, "degree": 3, "coef0": 1.0}
    explicit = {k: v for k, v in explicit.items() if v is not None and v != defaults[k]}
    clash = sorted(set(explicit) & set(kernel_params))
    if clash:
        raise ValueError(
            f"Parameter(s) {clash} given both as arguments and in kernel_params; "
            "pass each parameter once."
        )
    return {**explicit, **kernel_params}


def _check_unchanged(kernel: Kernel, overrides: dict) -> None:
    """Refuse overrides that would change a ready-made Kernel."""
    own = kernel.params_dict
    conflicts = {k: v for k, v in overrides.items() if k not in own or own[k] != v}
    if conflicts:
        raise ValueError(
            f"kernel is already a resolved {kernel!r}, so its parameters cannot be "
            f"changed by get_kernel; got conflicting {conflicts}. Either pass the "
            f"name kernel={kernel.name!r} with the parameters, or build the Kernel "
            "with the values you want."
        )


def get_kernel(
    kernel, *, gamma=None, degree=3, coef0=1.0, kernel_params=None, n_features=None
) -> Kernel:
    """Resolve a kernel name and parameters into a :class:`Kernel`.

    Parameters
    ----------
    kernel : str or Kernel
        Registry name, or a ``Kernel`` (returned unchanged).
    gamma : float, default=None
        Bandwidth / scale for kernels that accept it. None means
        ``1 / n_features`` (scikit-learn's ``sklearn.metrics.pairwise`` rule).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Additive constant of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Further parameters (for registered extension kernels).
    n_features : int, default=None
        Number of input features; required when gamma is None and the kernel
        accepts gamma.

    Returns
    -------
    kernel : Kernel

    Raises
    ------
    ValueError
        Unknown name; invalid parameter values; gamma=None without
        n_features; parameters that conflict with a given ``Kernel``.
    TypeError
        If ``kernel`` is neither a str nor a ``Kernel``.

    Notes
    -----
    Only the parameters the kernel accepts are used: ``rbf`` and
    ``laplacian`` take gamma; ``polynomial`` gamma, degree, coef0; ``sigmoid``
    gamma, coef0; ``linear`` none. The others are ignored, as in
    ``sklearn.metrics.pairwise.pairwise_kernels``.

    Examples
    --------
    >>> get_kernel("rbf", n_features=4)
    Kernel('rbf', gamma=0.25)
    >>> get_kernel("polynomial", gamma=0.5, degree=2)
    Kernel('polynomial', coef0=1.0, degree=2, gamma=0.5)
    """
    kernel_params = dict(kernel_params or {})
    if isinstance(kernel, Kernel):
        _check_unchanged(kernel, _explicit_args(gamma, degree, coef0, kernel_params))
        return kernel
    if not isinstance(kernel, str):
        raise TypeError(
            f"kernel must be a kernel name (one of {sorted(KERNELS)}) or a Kernel. "
            f"Got {type(kernel).__name__} instead."
        )
    spec = _lookup(kernel)
    _explicit_args(gamma, degree, coef0, kernel_params)
    named = {"gamma": gamma, "degree": degree, "coef0": coef0}
    params = {k: named[k] for k in spec.params if k in named}
    params.update(kernel_params)
    if "gamma" in spec.params and params.get("gamma") is None:
        params["gamma"] = _default_gamma(n_features)
    return Kernel(kernel, params)


def shared_blocks(kernels, X, Y, *, X_sqnorm=None, Y_sqnorm=None) -> dict:
    """Blocks of the kernels in ``kernels`` that can share one pass, keyed by list position.

    Kernels of one registry entry that has a ``multi`` function (e.g. RBF of several widths)
    and appears more than once are computed together (one GEMM and one distance pass for all);
    the others are not in the result and are computed one by one by the caller.
    """
    groups: dict[str, list[int]] = {}
    for q, k in enumerate(kernels):
        if _lookup(k.name).multi is not None:
            groups.setdefault(k.name, []).append(q)
    out = {}
    for name, members in groups.items():
        if len(members) > 1:
            spec = _lookup(name)
            values = [kernels[q].get(spec.multi_param) for q in members]
            out.update(zip(members, spec.multi(X, Y, values, X_sqnorm=X_sqnorm, Y_sqnorm=Y_sqnorm), strict=True))
    return out
