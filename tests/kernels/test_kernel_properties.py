"""A kernel's properties live in its registry entry: a kernel registered with them is used by every
place that reads them (the "scale" width, the degenerate-width hints, the scikit-learn names, the
KMP scoring pass's fast path, the cross-validation's width grid), and no module outside kernels/
tests a kernel's name."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import kmp_dask
from kmp_dask.kernels import KERNELS, WIDTH_GRID, get_kernel, kernel_spec, libsvm_names, pairwise_names
from kmp_dask.kernels._laplacian import laplacian, laplacian_diag
from kmp_dask.kernels._registry import register_kernel
from kmp_dask.kernels._table import row_table  # noqa: F401  (registers "row_table")

PACKAGE = Path(kmp_dask.__file__).parent


def test_builtin_properties():
    assert kernel_spec("rbf").distance == ("sqeuclidean", "squared distance") and kernel_spec("rbf").factored
    assert kernel_spec("laplacian").distance == ("cityblock", "L1 distance")
    assert kernel_spec("laplacian").scale_rule == "std" and kernel_spec("rbf").scale_rule == "variance"
    assert not any(kernel_spec(n).factored for n in ("laplacian", "polynomial", "sigmoid", "linear", "row_table"))
    assert libsvm_names() == {"rbf": "rbf", "poly": "polynomial", "sigmoid": "sigmoid", "linear": "linear"}
    assert pairwise_names() == {"rbf": "rbf", "laplacian": "laplacian", "poly": "polynomial",
                                "polynomial": "polynomial", "sigmoid": "sigmoid", "linear": "linear"}
    assert all(s.width_grid == WIDTH_GRID for s in KERNELS.values())
    assert kernel_spec(get_kernel("rbf", gamma=0.5)) is KERNELS["rbf"]


@pytest.fixture
def l1_kernel():
    """A new name for the L1 kernel, registered with every property in one call."""
    register_kernel("test_l1", laplacian, laplacian_diag, {"gamma": None}, distance=("cityblock", "L1 distance"),
                    scale_rule="std", pairwise_names=("test_l1_alias",), width_grid=(0.5, 2.0))
    yield "test_l1"
    del KERNELS["test_l1"]


def test_a_registered_kernel_is_complete_in_its_registration(l1_kernel):
    from kmp_dask.estimators._scale import scale_gamma
    from kmp_dask.greedy._kmp import _gamma_hint

    X = np.random.default_rng(0).normal(size=(200, 3)) * 3.0
    assert scale_gamma(X, kernel=l1_kernel) == scale_gamma(X, kernel="laplacian") != scale_gamma(X)
    hint = _gamma_hint(get_kernel(l1_kernel, gamma=0.5), X[:50])
    assert "median L1 distance" in hint
    assert pairwise_names()["test_l1_alias"] == l1_kernel
    assert kernel_spec(l1_kernel).width_grid == (0.5, 2.0)


def test_registration_refuses_unknown_or_out_of_range_properties():
    with pytest.raises(ValueError, match=r"unknown kernel properties \['metric'\]"):
        register_kernel("test_bad", laplacian, laplacian_diag, {"gamma": None}, metric="cityblock")
    with pytest.raises(ValueError, match=r"scale_rule must be one of \['variance', 'std'\]; got 'iqr'"):
        register_kernel("test_bad", laplacian, laplacian_diag, {"gamma": None}, scale_rule="iqr")
    assert "test_bad" not in KERNELS


ALIASES = {"poly"}  # scikit-learn's spelling of "polynomial"


def kernel_name_tests(root: Path) -> list[str]:
    """Places outside kernels/ that test a kernel by its name: a comparison with a kernel's name,
    or a dict / tuple literal of kernel names (a table of per-kernel properties)."""
    names = set(KERNELS) | ALIASES
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "kernels":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            consts = []
            if isinstance(node, ast.Compare):
                consts = [n for n in [node.left, *node.comparators] if isinstance(n, ast.Constant)]
                consts += [e for n in node.comparators if isinstance(n, (ast.Tuple, ast.Set, ast.List))
                           for e in n.elts if isinstance(e, ast.Constant)]
            elif isinstance(node, ast.Dict):
                consts = [k for k in node.keys if isinstance(k, ast.Constant)]
            if any(c.value in names for c in consts if isinstance(c.value, str)):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_outside_kernels_tests_a_kernel_name():
    assert kernel_name_tests(PACKAGE) == []


def test_the_name_scan_finds_a_name_test(tmp_path):
    """The scan is able to fail: the shapes the properties replaced."""
    (tmp_path / "mod.py").write_text('def f(k, m):\n    if k.name != "rbf":\n        return 1\n'
                                     '    return {"rbf": 1, "laplacian": 2}.get(m) or m in ("polynomial", "x")\n')
    assert kernel_name_tests(tmp_path) == ["mod.py:2", "mod.py:4", "mod.py:4"]
