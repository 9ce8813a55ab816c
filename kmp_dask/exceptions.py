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
    "FeatureScaleWarning",
    "BoundAtCapWarning",
    "NumericalWarning",
    "PrematureStopWarning",
    "StoreExistsError",
    "StoreContentError",
    "StoreSchemaError",
    "user_stacklevel",
]


def user_stacklevel() -> int:
    """``stacklevel`` for ``warnings.warn`` that names the first caller outside kmp_dask.

    Called in the function that warns: every frame from there up that is kmp_dask's own code is
    skipped, so a warning points at the user's line (``clf.fit(X, y)``) whatever the depth of the
    call inside the package — as pandas' ``find_stack_level``. (Python 3.12's ``skip_file_prefixes``
    does this, but not on 3.11.)"""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1  # the function that warns is stacklevel 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


class StoreSchemaError(ValueError):
    """A store does not follow the kmp_dask layout (missing array, attribute, bad chunking)."""


class StoreExistsError(FileExistsError):
    """The ingest target already exists and ``overwrite=True`` was not passed."""


class DataValidationError(ValueError):
    """Input data cannot be stored: wrong shape, non-numeric, non-finite or empty."""


class StoreContentError(DataValidationError):
    """A store's chunk holds values kmp_dask cannot use, found as the chunk is read: NaN/inf in
    ``X`` or ``y``, or (classification stores) a label code that is not an integer index into
    the store's ``classes``. Such stores were not written by ingest (which refuses them), or
    were changed afterwards.

    Attributes
    ----------
    url : str or None
        Location of the store.
    array : str
        ``"X"`` or ``"y"``.
    chunk : int
        Index of the storage chunk along rows.
    row : int
        Global row number (from 0) of the first bad value.
    column : int or None
        Its column (None for a 1-D ``y``).
    value : float
        The value found.
    """

    def __init__(self, message: str, *, url=None, array=None, chunk=None, row=None, column=None, value=None):
        super().__init__(message)
        self.url, self.array, self.chunk, self.row, self.column, self.value = url, array, chunk, row, column, value


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


class FeatureScaleWarning(UserWarning):
    """``gamma="scale"`` on features of very different scales: one width for all features, so
    the kernel hardly sees the small ones. The message names them and says to standardise
    (docs/defaults.md has the measured cost)."""


class BoundAtCapWarning(UserWarning):
    """A size chosen by a bound's minimum (``n_components="bound"``) sits at the path's cap with
    the bound still falling: a longer path may find a smaller bound. The message names the
    parameter that raises the cap."""


class IgnoredColumnsWarning(UserWarning):
    """Data given to predict / evaluate has columns the model was not fitted on (matched by name):
    they were left out, and the warning lists them (a label column in a file to predict is one)."""
