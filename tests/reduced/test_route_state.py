"""The compressor's route state: the reduced/ internals take a ``RouteState`` built from the
estimator's parameters, never the estimator, and the state holds every parameter."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

import kmp_dask.reduced as reduced
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.reduced._state import PARAMS, RouteState

INTERNALS = ("_checks.py", "_routes.py", "_build.py", "_saves.py")
REDUCED_DIR = Path(inspect.getfile(reduced)).parent


def test_the_state_holds_every_parameter_of_the_compressor():
    est = ReducedSetCompressor(7, method="l1", exchange=0, chunking="cyclic", verbose=2)
    assert set(PARAMS) == set(est.get_params(deep=False))
    route = RouteState.of(est)
    assert {name: getattr(route, name) for name in PARAMS} == est.get_params(deep=False)


def _estimator_reads(path: Path) -> list[str]:
    """Parameters named for the estimator, and its fitted or private attributes, in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [f"{node.name}({a.arg})" for a in node.args.args + node.args.kwonlyargs
                      if a.arg in ("est", "estimator", "comp", "compressor")]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "route" and (
                node.attr.endswith("_") or node.attr.startswith("_")):
            found.append(f"route.{node.attr} (line {node.lineno})")
    return found


def test_the_internals_take_the_route_state_not_the_estimator():
    bad = {name: _estimator_reads(REDUCED_DIR / name) for name in INTERNALS}
    assert not any(bad.values()), bad


def test_the_state_of_a_fitted_compressor_gives_its_levels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=120) > 0).astype(int)
    comp = ReducedSetCompressor(8, random_state=0).fit(SVC(gamma=0.5).fit(X, y), X, y)
    assert not any(isinstance(v, RouteState) for v in vars(comp).values())  # dropped with the fit
    assert "_xengine" not in vars(comp)
    np.testing.assert_array_equal(comp.expansion_at(comp.n_vectors_).decision_function(X),
                                  comp.expansion_.decision_function(X))
    route = comp._route_state()
    assert route.target is comp.target_ and route.wsq is comp.wsq_ and route.path is comp.path_


def test_a_refit_without_a_pursuit_keeps_no_stop_reason_of_the_fit_before():
    # scikit-learn's convention: fit starts afresh; an l0 route runs no pursuit, so it has no stop_reason_
    from sklearn.datasets import make_moons

    X, y = make_moons(120, noise=0.2, random_state=0)
    svc = SVC(gamma=1).fit(X, y)
    est = ReducedSetCompressor(8).fit(svc, X, y)
    assert est.stop_reason_ is not None
    est.set_params(method="l0").fit(svc, X, y)
    assert not hasattr(est, "stop_reason_")
