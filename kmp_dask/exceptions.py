"""Exceptions and warnings shared across kmp_dask.

Every error a user can trigger through the public API derives from a built-in
exception class, so callers who do not import kmp_dask can still catch it
(``except ValueError`` also catches :class:`DataValidationError`).
"""
from __future__ import annotations

__all__ = [
    "DataValidationError",
    "DegenerateFitWarning",
    "KernelWidthWarning",
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


class DegenerateFitWarning(RuntimeWarning):
    """The fitted model is degenerate: no basis function could be used (the model is the
    constant / majority class). ``stop_reason_`` says why (``"no_usable_candidate"``,
    ``"constant_kernel"``, ``"linear_dependence"``) and the message says what to change
    (``gamma``, ``ridge``, duplicate rows in the data)."""


class KernelWidthWarning(DegenerateFitWarning):
    """The kernel width is extreme for the data (measured on a sample of rows after the fit):
    so narrow that every basis function fits only its own row, or so wide that the kernel is
    almost constant. The message gives the measured ratio and a ``gamma`` to try."""
