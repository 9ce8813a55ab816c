"""Exceptions and warnings shared across kmp_dask.

Every error a user can trigger through the public API derives from a built-in
exception class, so callers who do not import kmp_dask can still catch it
(``except ValueError`` also catches :class:`DataValidationError`).
"""
from __future__ import annotations

__all__ = [
    "DataValidationError",
    "NumericalWarning",
    "PrematureStopWarning",
    "StoreExistsError",
    "StoreSchemaError",
]


class StoreSchemaError(ValueError):
    """A store does not follow the kmp_dask layout (missing array, attribute, bad chunking)."""


class StoreExistsError(FileExistsError):
    """The ingest target already exists and ``overwrite=True`` was not passed."""


class DataValidationError(ValueError):
    """Input data cannot be stored: wrong shape, non-numeric, non-finite or empty."""


class PrematureStopWarning(RuntimeWarning):
    """A greedy loop stopped before its requested size, e.g. on linear dependence."""


class NumericalWarning(RuntimeWarning):
    """A numerical fallback was taken (e.g. a singular Newton system solved by least squares)."""
