"""Fixtures for dataset tests."""
from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def memory_url_for_datasets():
    """A fresh memory:// URL (the fsspec memory file system is process-global)."""
    return f"memory://kmp-dataset-tests/{uuid.uuid4().hex}/data.zarr"
