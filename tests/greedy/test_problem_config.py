"""CVM / MMDA: the problems' one configuration record (no keyword relay through ``**kw``)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from kmp_dask.greedy import core_vector_machine
from kmp_dask.greedy._cvm_problems import (
    ProblemConfig,
    fit_binary_problems,
    run_problem,
)


def test_fit_binary_problems_builds_the_config_from_named_keywords():
    """Every field is a named keyword of fit_binary_problems (no ``**kw``), with the same default."""
    params = inspect.signature(fit_binary_problems).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for f in dataclasses.fields(ProblemConfig):
        assert f.name in params, f.name
        if f.default is not dataclasses.MISSING:
            assert params[f.name].default == f.default


def test_fields_are_core_vector_machine_arguments_and_run_problem_takes_the_record():
    cvm = inspect.signature(core_vector_machine).parameters
    assert {f.name for f in dataclasses.fields(ProblemConfig)} - {"n_components"} <= set(cvm)
    assert list(inspect.signature(run_problem).parameters)[:3] == ["engine", "positive", "config"]


def test_is_frozen():
    c = ProblemConfig(None, 1.0, 1.0, 1e-3, 10, None, 100)
    assert c.n_components == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.eps = 0.1
