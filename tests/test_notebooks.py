"""The notebooks run top to bottom (small mode), draw their figures, and are stored stripped."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
# Executing a notebook takes 8–14 s: the default run executes the quickstart, the rest run with
# `pytest -m slow` (every notebook is still checked against notebooks/_build.py by default).
DEFAULT_RUN = {"01_quickstart"}
RUN_PARAMS = [pytest.param(n, marks=() if n in DEFAULT_RUN else pytest.mark.slow) for n in NAMES]


def _builder():
    spec = importlib.util.spec_from_file_location("kmp_notebooks_build", NOTEBOOKS / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_stored_notebooks_are_exactly_the_generated_ones():
    # a notebook added to _build.py but not written, or an .ipynb left behind after its removal
    assert NAMES == sorted(_builder().build()), "rerun notebooks/_build.py and commit what it writes"


@pytest.mark.parametrize("name", NAMES)
def test_stored_stripped_and_as_generated(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: outputs stored in git"
    assert nb == _builder().build()[name], f"{name}.ipynb differs from notebooks/_build.py: rerun it"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", RUN_PARAMS)
def test_runs_and_draws(name, tmp_path, monkeypatch):
    """... and leave nothing behind in the system temp dir (here a fresh one: the kernel, its dask
    workers and everything they start inherit TMPDIR)."""
    from nbclient import NotebookClient

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "already-there").mkdir()  # what others wrote before the run stays
    before = sorted(p.name for p in tmp.iterdir())
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("KMP_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('print(f"SMALL={SMALL}")'))  # what the kernel itself saw
    NotebookClient(nb, timeout=500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [base64.b64decode(o["data"]["image/png"]) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if "data" in o and "image/png" in o["data"]]
    assert images, f"{name} drew no figure"
    assert all(len(img) > 5000 for img in images), [len(i) for i in images]
    seen = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    assert seen.strip() == "SMALL=True", f"{name} did not run in small mode: {seen!r}"
    assert sorted(p.name for p in tmp.iterdir()) == before, f"{name} left files in the temp dir"
    if name == "01_quickstart":
        _quickstart_text_says_what_its_output_shows(nb)


def _quickstart_text_says_what_its_output_shows(nb):
    """Notebook 01's text names the stop reason, the basis size and the saved model's entries its
    (small) run prints (checked on the run above: executing a notebook takes most of a minute)."""
    import re

    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                  if o.get("output_type") == "stream" and o.get("name") == "stdout")
    fitted = re.search(r"(\d+) basis functions in [\d.]+ s, stop: (\w+)", out)
    assert fitted, out
    assert f"`{fitted.group(2)}`" in text and f"{fitted.group(1)} basis functions" in text, (fitted.group(0), text)
    listing = re.search(r"\[('[^\]]*')\] identical predictions: True", out)
    assert listing, out
    for entry in re.findall(r"'([^']+)'", listing.group(1)):
        assert f"`{entry}" in text, (entry, text)
