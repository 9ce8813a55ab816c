"""Encoding a fitted model's attributes as JSON plus ``.npy`` arrays, and back — no pickle.

Values map to JSON as follows (every non-JSON value is a small object with a ``"__kind__"``):

* ``None``, ``bool``, ``int``, ``float``, ``str`` → themselves;
* a numeric / string / bool ndarray → ``{"__kind__": "array", "file": "arrays/a0007.npy"}``,
  written with ``np.save(allow_pickle=False)`` and read with ``np.load(allow_pickle=False)``;
* an object ndarray of JSON scalars → ``{"__kind__": "objarray", "items": [...], "shape": [...]}``;
* a NumPy scalar → ``{"__kind__": "scalar", "dtype": "float32", "value": ...}`` (dtype kept, so
  predictions stay bit-identical);
* ``tuple`` → ``{"__kind__": "tuple", "items": [...]}``; ``list`` → a JSON list;
  ``dict`` → ``{"__kind__": "dict", "items": [[key, value], ...]}`` (any encodable keys);
* an ``Enum`` of kmp_dask → ``{"__kind__": "enum", "class": ..., "value": ...}``; loading looks the
  member up among the class's members by value (nothing is called; a class that is not an
  ``Enum`` in :data:`ALLOWED`, or a value that is no member, is an error);
* an object of one of kmp_dask's own classes listed in :data:`ALLOWED` → ``{"__kind__":
  "object", "class": "kmp_dask.expansion.KernelExpansion", "state": {attribute: value}}``.
  Loading makes it with ``cls.__new__`` and sets the attributes: no ``__init__``, no
  ``__setstate__``, nothing from the file is executed, and a class not in :data:`ALLOWED` is
  an error. This is the same idea as skops' trusted types, with the list fixed in our code
  instead of passed by each caller (docs/models.md explains why skops itself is not used).
"""

from __future__ import annotations

import enum
import importlib

import numpy as np

__all__ = ["Encoder", "decode", "ALLOWED", "UnsupportedValue"]

#: The classes a model file may contain (qualified names); load refuses any other.
ALLOWED = frozenset({
    "kmp_dask.estimators._kmp.KMPClassifier", "kmp_dask.estimators._kmp.KMPRegressor",
    "kmp_dask.estimators._cvm.CVMClassifier", "kmp_dask.estimators._cvm.MMDA",
    "kmp_dask.estimators._kpca.SparseKernelPCA", "kmp_dask.estimators._kpca.SparseKCCA",
    "kmp_dask.reduced._compressor.ReducedSetCompressor", "kmp_dask.reduced._compressor._Level",
    "kmp_dask.reduced._level._Level",
    "kmp_dask.reduced._meta.ReducedSetClassifier", "kmp_dask.reduced._meta.ReducedSetRegressor",
    "kmp_dask.reduced._models.CompressionTarget", "kmp_dask.estimators._calibration.PlattCalibrator",
    "kmp_dask.expansion.KernelExpansion", "kmp_dask.kernels._base.Kernel",
    "kmp_dask.greedy._result.PursuitResult", "kmp_dask.greedy._result.StopReason",
    "kmp_dask.greedy._hmp.HMPResult", "kmp_dask.greedy._cvm.CVMResult",
    "kmp_dask.losses.SquaredLoss", "kmp_dask.losses.LogisticLoss", "kmp_dask.losses.TanhLoss",
    "kmp_dask.losses.ExponentialLoss", "kmp_dask.losses.SquaredHingeLoss", "kmp_dask.losses.HuberLoss",
})


class UnsupportedValue(TypeError):
    """A value the open format cannot hold; the message names where it was found."""


def qualname(obj_or_cls) -> str:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve(name: str):
    """The class called ``name`` if it is in :data:`ALLOWED`, else a clear error."""
    if name not in ALLOWED:
        raise ValueError(f"the model file names class {name!r}, which kmp_dask does not load "
                         "(only its own model classes are allowed)")
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _state(obj) -> dict:
    if hasattr(type(obj), "_persist_state"):
        return dict(obj._persist_state())  # the class says what its state is (e.g. lazy values solved)
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    return {s: getattr(obj, s) for s in slots if hasattr(obj, s)}


class Encoder:
    """Turns values into JSON; arrays are collected in :attr:`arrays` (file name → array)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, a: np.ndarray, where: str):
        if a.dtype == object:
            items = a.ravel().tolist()
            if not all(v is None or isinstance(v, (bool, int, float, str)) for v in items):
                raise UnsupportedValue(f"{where}: an object array holding {type(items[0]).__name__}")
            return {"__kind__": "objarray", "items": items, "shape": list(a.shape)}
        name = f"arrays/a{len(self.arrays):04d}.npy"
        self.arrays[name] = np.ascontiguousarray(a) if a.flags.c_contiguous or a.flags.f_contiguous else a.copy()
        return {"__kind__": "array", "file": name}

    def encode(self, v, where: str = "model"):
        if isinstance(v, enum.Enum):  # before str: StopReason is a str enum
            resolve(qualname(v))
            return {"__kind__": "enum", "class": qualname(v), "value": self.encode(v.value, where)}
        if v is None or isinstance(v, (bool, str)) or type(v) in (int, float):
            return v
        if isinstance(v, np.ndarray):
            return self.array(v, where)
        if isinstance(v, np.generic):
            return {"__kind__": "scalar", "dtype": v.dtype.str, "value": v.item()}
        if isinstance(v, (list, tuple)):
            items = [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]
            return items if isinstance(v, list) else {"__kind__": "tuple", "items": items}
        if isinstance(v, dict):
            return {"__kind__": "dict",
                    "items": [[self.encode(k, where), self.encode(x, f"{where}[{k!r}]")] for k, x in v.items()]}
        if isinstance(v, (int, float)):  # int / float subclasses (e.g. bool-like flags)
            return self.encode(type(v).__mro__[-2](v), where)
        name = qualname(v)
        if name not in ALLOWED:
            raise UnsupportedValue(f"{where} is a {name}, which the open model format does not store")
        return {"__kind__": "object", "class": name,
                "state": {k: self.encode(x, f"{where}.{k}") for k, x in _state(v).items()}}


def decode(v, load_array):
    """Inverse of :meth:`Encoder.encode`; ``load_array(file)`` reads one ``.npy`` member."""
    if isinstance(v, list):
        return [decode(x, load_array) for x in v]
    if not isinstance(v, dict):
        return v
    kind = v.get("__kind__")
    if kind == "array":
        return load_array(v["file"])
    if kind == "objarray":
        out = np.empty(len(v["items"]), dtype=object)
        out[:] = v["items"]
        return out.reshape(v["shape"])
    if kind == "scalar":
        return _scalar(v)
    if kind == "tuple":
        return tuple(decode(x, load_array) for x in v["items"])
    if kind == "dict":
        return {_hashable(decode(k, load_array)): decode(x, load_array) for k, x in v["items"]}
    if kind == "enum":
        return _member(v["class"], decode(v["value"], load_array))
    if kind == "object":
        cls = resolve(v["class"])
        if issubclass(cls, enum.Enum):
            raise ValueError(f"the model file stores {v['class']!r} as an object; it is an enum (kind 'enum')")
        obj = cls.__new__(cls)
        for k, x in v["state"].items():
            object.__setattr__(obj, k, decode(x, load_array))
        return obj
    raise ValueError(f"unknown value kind {kind!r} in the model file")


def _member(name: str, value):
    """The member of the allowed enum ``name`` whose value is ``value`` — found by comparing with
    the members, so nothing (no constructor, no ``_missing_``) is called."""
    cls = resolve(name)
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
        raise ValueError(f"the model file names {name!r} as an enum, but it is not one; the file is damaged or "
                         "was not written by kmp_dask.save")
    for member in cls.__members__.values():
        if type(member.value) is type(value) and member.value == value:
            return member
    raise ValueError(f"the model file has {value!r} for the enum {name!r}, which has no such member "
                     f"(members: {', '.join(repr(m.value) for m in cls.__members__.values())})")


#: dtype kinds a stored NumPy scalar may have: bool, integers, floats (no object, void, datetime).
SCALAR_KINDS = "biuf"


def _scalar(v: dict):
    try:
        dtype = np.dtype(v["dtype"])
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in SCALAR_KINDS or not isinstance(v["value"], (bool, int, float)):
        raise ValueError(f"the model file has a scalar of dtype {v.get('dtype')!r} and value {v.get('value')!r}; "
                         "kmp_dask stores only bool, integer and float scalars")
    return dtype.type(v["value"])


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k
