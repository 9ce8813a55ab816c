"""Store attribute schema (version 1) and streaming per-feature statistics.

The attribute layout is documented in docs/store.md. This module builds and
checks the attribute dictionary; it does not know where the data lives.
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._version import __version__
from ..exceptions import DataValidationError, StoreSchemaError

SCHEMA_VERSION = 1
MARKER_KEY = "kmp_dask_store"
MARKER_VALUE = "dataset"
REQUIRED_ATTRS = ("n_rows", "feature_names", "classes", "mean", "std", "provenance")


@dataclass(frozen=True)
class RunningStats:
    """Count, mean and sum of squared deviations per feature (float64).

    Partial statistics of disjoint row blocks combine exactly with
    :meth:`merge` (Chan, Golub and LeVeque's pairwise update), so the mean and
    standard deviation of a store come from one streaming pass.
    """

    n: int
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def empty(cls, n_features: int) -> RunningStats:
        """Statistics of zero rows."""
        return cls(0, np.zeros(n_features), np.zeros(n_features))

    @classmethod
    def of_block(cls, X: np.ndarray) -> RunningStats:
        """Statistics of one block of rows, accumulated in float64."""
        if X.shape[0] == 0:
            return cls.empty(X.shape[1])
        Xf = np.asarray(X, dtype=np.float64)
        mean = Xf.mean(axis=0)
        return cls(Xf.shape[0], mean, ((Xf - mean) ** 2).sum(axis=0))

    @classmethod
    def from_attrs(cls, n: int, mean: Sequence[float], std: Sequence[float]) -> RunningStats:
        """Rebuild the statistics from stored ``n_rows``, ``mean`` and ``std``."""
        std = np.asarray(std, dtype=np.float64)
        return cls(int(n), np.asarray(mean, dtype=np.float64), std**2 * int(n))

    def merge(self, other: RunningStats) -> RunningStats:
        """Statistics of the union of the two row sets."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        m2 = self.m2 + other.m2 + delta**2 * (self.n * other.n / n)
        return RunningStats(n, mean, m2)

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation (ddof=0), as scikit-learn's StandardScaler."""
        if self.n == 0:
            return np.zeros_like(self.m2)
        return np.sqrt(self.m2 / self.n)


def make_provenance(provenance: Mapping[str, Any] | None, source: str) -> dict[str, Any]:
    """Provenance dict with ``source``, ``created`` (UTC ISO time) and the kmp_dask version."""
    base = {
        "source": source,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "kmp_dask_version": __version__,
    }
    base.update(dict(provenance or {}))
    return base


def check_feature_names(feature_names: Sequence[str] | None, n_features: int) -> list[str]:
    """Return feature names as a list of str, defaulting to ``x0, x1, ...``."""
    if feature_names is None:
        return [f"x{j}" for j in range(n_features)]
    names = [str(name) for name in feature_names]
    if len(names) != n_features:
        raise DataValidationError(
            f"feature_names has {len(names)} entries but X has {n_features} columns; "
            "pass one name per column or None for x0, x1, ..."
        )
    return names


def json_safe_classes(classes: Sequence[Any] | None) -> list[Any] | None:
    """Convert class labels to plain Python scalars (JSON-safe) or None."""
    if classes is None:
        return None
    return [c.item() if isinstance(c, np.generic) else c for c in np.asarray(classes).tolist()]


def make_attrs(
    *,
    n_rows: int,
    feature_names: list[str],
    classes: list[Any] | None,
    stats: RunningStats,
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """The full attribute dict of a version-1 store."""
    return {
        "schema_version": SCHEMA_VERSION,
        MARKER_KEY: MARKER_VALUE,
        "n_rows": int(n_rows),
        "feature_names": list(feature_names),
        "classes": classes,
        "mean": [float(v) for v in stats.mean],
        "std": [float(v) for v in stats.std],
        "provenance": provenance,
    }


def check_attrs(attrs: Mapping[str, Any], where: str) -> None:
    """Raise :class:`StoreSchemaError` naming the first missing or invalid attribute."""
    if "schema_version" not in attrs:
        raise StoreSchemaError(
            f"attribute 'schema_version' missing: not a kmp_dask store (at {where!r})."
        )
    if attrs.get(MARKER_KEY) != MARKER_VALUE:
        raise StoreSchemaError(
            f"attribute {MARKER_KEY!r} missing or not {MARKER_VALUE!r}: not a kmp_dask "
            f"dataset store (at {where!r})."
        )
    if attrs["schema_version"] != SCHEMA_VERSION:
        raise StoreSchemaError(
            f"store at {where!r} has schema_version {attrs['schema_version']!r}; this "
            f"kmp_dask reads version {SCHEMA_VERSION}. Upgrade kmp_dask or re-ingest the data."
        )
    for key in REQUIRED_ATTRS:
        if key not in attrs:
            raise StoreSchemaError(f"store at {where!r} is missing attribute {key!r}.")
