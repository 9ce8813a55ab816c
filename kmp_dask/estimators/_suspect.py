"""Keep the warnings that say a fitted result is suspect on the model (``fit_warnings_``).

A fit emits them as usual (Python warnings, each with its own class) and records their class
and message on the estimator, so that a saved model, ``kmp-dask`` and the HTML report can show
them later (report: a "warnings" row per model).
"""

from __future__ import annotations

import contextlib
import functools
import warnings

from ..exceptions import (
    BoundAtCapWarning,
    DegenerateFitWarning,
    FeatureScaleWarning,
    NumericalWarning,
    PrematureStopWarning,
)

__all__ = ["SUSPECT", "recording_fit_warnings", "records_fit_warnings"]

#: The warning classes a model keeps in ``fit_warnings_`` (KernelWidthWarning is a DegenerateFitWarning).
SUSPECT = (DegenerateFitWarning, FeatureScaleWarning, BoundAtCapWarning, PrematureStopWarning, NumericalWarning)


@contextlib.contextmanager
def recording_fit_warnings(est):
    """Run a fit; set ``est.fit_warnings_`` to ``"ClassName: message"`` for every :data:`SUSPECT`
    warning it emitted, and pass every warning on to the caller's filters unchanged (also when
    the fit fails)."""
    seen = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                seen = list(caught)
        est.fit_warnings_ = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in seen
                                               if issubclass(w.category, SUSPECT)))
    finally:
        for w in seen:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def records_fit_warnings(fit):
    """Decorate an estimator's ``fit`` with :func:`recording_fit_warnings`."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        with recording_fit_warnings(self):
            return fit(self, *args, **kwargs)

    return wrapper
