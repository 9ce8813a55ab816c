"""Reading kmp_dask's own pickles (checkpoints, paged partition state) with a restricted unpickler.

Two kinds of kmp_dask file are pickles, because they hold algorithm state that has no stable
schema: a fit's checkpoint (the driver's :class:`~kmp_dask.greedy._kmp.Pursuit` and the engine
journal) and a streamed partition's state in a worker's scratch directory. Fitted *models* are not
(``kmp_dask.save`` writes JSON + ``.npy``, docs/models.md).

A plain ``pickle.load`` runs whatever callable the file names (``os.system``, ``builtins.eval``,
...). :class:`RestrictedUnpickler` resolves only (Python docs, "Restricting Globals"):

* classes defined in kmp_dask's numerical layers (``blockops``, ``greedy`` except its checkpoint
  module, ``linalg``, ``kernels``, ``losses``, ``expansion``) — the state objects;
* functions defined in ``kmp_dask.blockops`` — the per-partition operations a journal names (they
  compute on partitions in memory and touch no file), and the sampler's ``_all_eligible``;
* NumPy's array, dtype and scalar reconstruction, and ``set`` / ``frozenset`` / ``slice`` /
  ``complex`` from builtins.

Anything else is refused with :class:`UnsafePickleError` *before* it is called. This bounds what a
tampered file can do to constructing kmp_dask state objects and running their numerics; it is not
a sandbox, and a checkpoint should still come only from its owner (docs/engine.md "Checkpoints").
"""

from __future__ import annotations

import io
import pickle

__all__ = ["RestrictedUnpickler", "UnsafePickleError", "restricted_loads"]

_STATE_PACKAGES = ("kmp_dask.blockops", "kmp_dask.greedy", "kmp_dask.linalg", "kmp_dask.kernels",
                   "kmp_dask.losses", "kmp_dask.expansion")
_EXCLUDED_MODULES = ("kmp_dask.greedy._checkpoint",)
_FUNCTIONS = ("kmp_dask.greedy._sampling._all_eligible",)
_NUMPY = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
}
_BUILTINS = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"), ("builtins", "complex")}


class UnsafePickleError(pickle.UnpicklingError):
    """The file names a global that kmp_dask does not load from its own pickles."""


def _in(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only kmp_dask's state classes, blockops functions and NumPy."""

    def find_class(self, module, name):
        if (module, name) in _NUMPY or (module, name) in _BUILTINS:
            return super().find_class(module, name)
        if "." not in name and _in(module, _STATE_PACKAGES) and not _in(module, _EXCLUDED_MODULES):
            obj = super().find_class(module, name)
            defined_in = getattr(obj, "__module__", "") or ""
            if isinstance(obj, type) and _in(defined_in, _STATE_PACKAGES):
                return obj
            if callable(obj) and (_in(defined_in, ("kmp_dask.blockops",)) or f"{defined_in}.{name}" in _FUNCTIONS):
                return obj
        raise UnsafePickleError(
            f"refusing to load {module}.{name} from a kmp_dask state file: only kmp_dask's own algorithm "
            "state and NumPy arrays may appear there. The file was not written by this kmp_dask (or was "
            "tampered with); do not resume from it."
        )


def restricted_loads(data: bytes):
    """``pickle.loads`` through :class:`RestrictedUnpickler`."""
    return RestrictedUnpickler(io.BytesIO(data)).load()
