"""The Dataset record returned by the loaders."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["Dataset"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A small in-memory dataset with its description.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        Real-valued features (categorical columns already one-hot encoded).
    y : ndarray of shape (n_samples,)
        Class codes (int32, indices into ``classes``) or real targets.
    classes : list or None
        Original class labels (JSON-safe) for classification, else None.
    feature_names : list of str
        One name per column of ``X``.
    name : str
        Qualified name, e.g. ``"keel:banana"`` or ``"sklearn:digits"``.
    task : {"classification", "regression"}
    """

    X: np.ndarray
    y: np.ndarray
    classes: list[Any] | None
    feature_names: list[str]
    name: str
    task: Literal["classification", "regression"]

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of ``X``."""
        return tuple(self.X.shape)
