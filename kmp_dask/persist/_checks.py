"""Checks of a model file's contents, before and after its values are decoded (no dask, no pickle).

A model directory may come from anywhere (a colleague, a download, a damaged disk): ``load`` refuses,
with one :class:`ModelFileError` line each,

* a ``model.json`` nested deeper than :data:`MAX_DEPTH` levels (``kmp_dask.save`` writes at most a
  dozen; a deeper file would end in a ``RecursionError`` while it is decoded);
* an array reference that is not a name ``save`` writes (``arrays/<letters, digits, . _ ->.npy``):
  a NUL byte, a separator, ``..``;
* a ``.npy`` file whose header claims more (or fewer) data bytes than the file holds, checked from
  the header alone before anything is allocated — a damaged header claiming terabytes is a damaged
  file, not an out-of-memory condition;
* a kernel whose parameters the kernel itself refuses (a negative ``gamma``), re-validated as
  ``Kernel(name, params)`` would (loading makes objects without calling their constructors);
* a non-finite value (NaN, ±inf) in any float array or scalar of the model, except in the attributes
  of :data:`NONFINITE_OK` (histories and diagnostics, where NaN means "not measured"): a NaN
  coefficient makes every prediction the same class without any error.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ._codec import qualname

__all__ = ["ModelFileError", "MAX_DEPTH", "check_depth", "check_array_name", "check_npy_size", "check_values"]

#: Deepest nesting of JSON objects / lists accepted in ``model.json``.
MAX_DEPTH = 64
_ARRAY_NAME = re.compile(r"arrays/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.npy")
#: attributes (at any depth) whose float values may be NaN / inf in a valid model: fit histories and
#: diagnostics, which prediction never reads.
NONFINITE_OK = frozenset({
    "history", "history_", "_path", "path_", "cv_results_", "records", "_records", "validation_scores_",
    "bound_", "bounds_", "scores_", "scores", "train_scores", "validation_scores", "_history",
})


_KERNEL = "kmp_dask.kernels._base.Kernel"


class ModelFileError(ValueError):
    """A saved model's files are damaged, incomplete or not what ``kmp_dask.save`` writes (a truncated
    or oversized .npy, a missing array, a bad array name, NaN coefficients, an invalid kernel)."""


def _fix(path) -> str:
    return f"the model at {str(path)!r} cannot be loaded — save it again (kmp_dask.save / kmp-dask train)"


def check_depth(doc, path) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` (iterative: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ModelFileError(f"{str(path)!r}: model.json is nested more than {MAX_DEPTH} levels deep, which "
                                 f"kmp_dask.save never writes; {_fix(path)}")
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)


def check_array_name(name, path) -> str:
    """``name`` if it is an array file name ``save`` writes, else :class:`ModelFileError`."""
    if not isinstance(name, str) or not _ARRAY_NAME.fullmatch(name):
        raise ModelFileError(f"{str(path)!r}: model.json refers to the array file {name!r}, which is not a name "
                             f"kmp_dask.save writes (arrays/<letters, digits, '.', '_', '-'>.npy); {_fix(path)}")
    return name


def _read_header(fh):
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    raise ValueError(f".npy format version {version} (kmp_dask.save writes 1.0)")


def _bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def check_npy_size(f: Path, name: str, path) -> None:
    """Read the ``.npy`` header of ``f`` and refuse it when the data it announces is not exactly
    what the file holds (before NumPy allocates anything)."""
    try:
        with open(f, "rb") as fh:
            shape, fortran, dtype = _read_header(fh)
            offset = fh.tell()
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise ModelFileError(f"{str(path)!r}: the array file {name!r} has no readable .npy header "
                             f"({' '.join(str(exc).split())}); {_fix(path)}") from None
    if dtype.hasobject:
        return  # a pickle inside: np.load(allow_pickle=False) refuses it with its own words
    claimed = int(np.prod([int(s) for s in shape], dtype=object)) * dtype.itemsize
    held = f.stat().st_size - offset
    if claimed != held:
        raise ModelFileError(f"{str(path)!r}: the array file {name!r} is damaged: its header announces shape "
                             f"{tuple(shape)} of {dtype} ({_bytes(claimed)}) but the file holds {_bytes(held)} "
                             f"of data; "
                             f"{_fix(path)}")


def _nonfinite(v) -> bool:
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "fc" and v.size > 0 and not bool(np.isfinite(v).all())
    if isinstance(v, (float, np.floating, complex, np.complexfloating)):
        return not bool(np.isfinite(v))
    return False


def check_values(obj, path) -> None:
    """Walk the loaded model (objects, lists, tuples, dicts): re-validate every kernel and refuse
    non-finite floats outside :data:`NONFINITE_OK` (iterative: no recursion)."""
    stack, seen = [(obj, "model")], set()
    while stack:
        v, where = stack.pop()
        if _nonfinite(v):
            raise ModelFileError(f"{str(path)!r}: {where} holds a non-finite value (NaN or infinity), which no "
                                 f"fitted model has: every prediction would be wrong; {_fix(path)}")
        if id(v) in seen or isinstance(v, (np.ndarray, str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(v))
        if qualname(v) == _KERNEL:
            _check_kernel(v, where, path)
            continue
        if isinstance(v, dict):
            stack.extend((x, f"{where}[{k!r}]") for k, x in v.items() if str(k) not in NONFINITE_OK)
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif hasattr(v, "__dict__"):
            stack.extend((x, f"{where}.{k}") for k, x in vars(v).items() if k not in NONFINITE_OK)


def _check_kernel(k, where: str, path) -> None:
    try:  # the kernel's own constructor validates name and parameters (loading did not call it)
        type(k)(k.name, dict(k.params))
    except (ValueError, TypeError, KeyError) as exc:
        raise ModelFileError(f"{str(path)!r}: {where} is an invalid kernel ({' '.join(str(exc).split())}); "
                             f"{_fix(path)}") from None
