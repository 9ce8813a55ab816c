"""Fixtures for store tests: small datasets and a factory over every store implementation."""
from __future__ import annotations

import uuid

import numpy as np
import pytest

from kmp_dask.store import InMemoryStore, create_store

STORE_KINDS = ["zarr-local", "zarr-memory", "memory"]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def xy(rng):
    """1003 rows x 5 float64 features with int labels (ragged last chunk for chunk_rows=100)."""
    X = rng.normal(size=(1003, 5)) * np.arange(1, 6) + np.arange(5)
    y = rng.integers(0, 3, size=1003)
    return X, y


@pytest.fixture
def memory_url():
    """A fresh memory:// URL (the fsspec memory file system is process-global)."""
    return f"memory://kmp-tests/{uuid.uuid4().hex}/data.zarr"


@pytest.fixture(params=STORE_KINDS)
def make_store(request, tmp_path):
    """``make_store(X, y=None, **kw)`` building the parametrised implementation."""
    kind = request.param

    def build(X, y=None, **kw):
        if kind == "memory":
            return InMemoryStore(X, y, **kw)
        if kind == "zarr-local":
            target = tmp_path / f"{uuid.uuid4().hex}.zarr"
        else:
            target = f"memory://kmp-tests/{uuid.uuid4().hex}/data.zarr"
        return create_store(target, X, y, **kw)

    build.kind = kind
    return build
