"""The ``procs`` fixture: start scripts of cluster/ as process groups, all stopped at teardown."""

from __future__ import annotations

import pytest
from _cluster_helpers import Procs


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop()
