"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_cluster(monkeypatch):
    """Starting or connecting to a cluster fails the test (a command that should run in process
    cannot start one unnoticed)."""
    from kmp_dask import parallel

    def refuse(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(parallel, "embedded_cluster", refuse)
    monkeypatch.setattr(parallel, "connect", refuse)
