"""CVM / MMDA: the problems' one configuration record, handed over whole (no keyword relay)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from kmp_dask.greedy import core_vector_machine
from kmp_dask.greedy._cvm import CVMConfig
from kmp_dask.greedy._cvm_problems import (
    ProblemConfig,
    fit_binary_problems,
    run_problem,
)


def test_the_drivers_take_the_config_whole_or_its_fields_as_keywords():
    """fit_binary_problems and core_vector_machine take ``config=`` or the config's fields (through
    ``config_given``), not a relay of every field as a named parameter; run_problem takes the record."""
    for f in (fit_binary_problems, core_vector_machine):
        params = inspect.signature(f).parameters
        assert "config" in params and len(params) <= 10, (f.__name__, list(params))
    assert issubclass(ProblemConfig, CVMConfig)
    assert {f.name for f in dataclasses.fields(ProblemConfig)} - {f.name for f in dataclasses.fields(CVMConfig)} \
        == {"n_components"}
    assert list(inspect.signature(run_problem).parameters)[:3] == ["engine", "positive", "config"]


def test_a_mixture_unknown_or_missing_keyword_is_refused_before_any_pass():
    c = ProblemConfig(None, 1.0, 1.0, 1e-3, 10, None, 100)
    with pytest.raises(ValueError, match="not both"):
        fit_binary_problems(None, None, [1], seeds=[0], config=c, eps=0.1)
    with pytest.raises(ValueError, match="unknown keyword"):
        fit_binary_problems(None, None, [1], seeds=[0], kernel=None, kappa=1.0, C=1.0, eps=1e-3, n_rows=10,
                            max_cores=3)
    with pytest.raises(ValueError, match="needs eps="):
        core_vector_machine(None, kernel=None, kappa=1.0, C=1.0, n_rows=10)
    with pytest.raises(ValueError, match="unknown keyword"):  # MMDA's field is not the loop's
        core_vector_machine(None, kernel=None, kappa=1.0, C=1.0, eps=1e-3, n_rows=10, n_components=2)


def test_is_frozen():
    c = ProblemConfig(None, 1.0, 1.0, 1e-3, 10, None, 100)
    assert c.n_components == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.eps = 0.1
