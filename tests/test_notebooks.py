"""The notebooks run top to bottom (small mode), draw their figures, and are stored stripped."""

from __future__ import annotations

import base64
import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


def test_all_six_notebooks_exist():
    assert NAMES == ["01_quickstart", "02_stochastic_vs_exact", "03_compress_an_svm", "04_mmda_features",
                     "05_sparse_kpca_and_bounds", "06_out_of_core"]


def _builder():
    spec = importlib.util.spec_from_file_location("kmp_notebooks_build", NOTEBOOKS / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_stored_stripped_and_as_generated(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: outputs stored in git"
    assert nb == _builder().build()[name], f"{name}.ipynb differs from notebooks/_build.py: rerun it"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_runs_and_draws(name, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("KMP_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [base64.b64decode(o["data"]["image/png"]) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if "data" in o and "image/png" in o["data"]]
    assert images, f"{name} drew no figure"
    assert all(len(img) > 5000 for img in images), [len(i) for i in images]
    assert os.environ["KMP_NOTEBOOK_SMALL"] == "1"
