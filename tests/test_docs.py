"""The documentation site's promises: the guide's examples run, and the API reference lists every
public name.

Each page of docs/guide/ runs top to bottom in a fresh directory: its ```python blocks in one
namespace (as a reader pastes them into one session) and the ``kmp-dask`` lines of its ```bash
blocks as commands, in the order they appear. ```text blocks are shown, not run. The site itself is
built by ``.ci/run`` (``python -m sphinx -W``); these tests need no Sphinx.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import warnings
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE_PAGES = sorted(p.name for p in (DOCS / "guide").glob("*.md"))
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)

# the public subpackages whose __all__ the reference documents (the rest are internal layers,
# named in docs/api/index.md)
PUBLIC_MODULES = ["kmp_dask", "kmp_dask.estimators", "kmp_dask.expansion", "kmp_dask.reduced", "kmp_dask.store",
                  "kmp_dask.datasets", "kmp_dask.persist", "kmp_dask.evaluation", "kmp_dask.kernels",
                  "kmp_dask.losses", "kmp_dask.bounds", "kmp_dask.exceptions", "kmp_dask.pipeline",
                  "kmp_dask.report"]


def code_blocks(page: Path) -> list[tuple[str, int, str]]:
    """``(language, line, body)`` of every fenced block of a Markdown page, in order (``line``: the
    0-based line of the block's first code line)."""
    return code_blocks_of(page.read_text(encoding="utf-8"))


def code_blocks_of(text: str) -> list[tuple[str, int, str]]:
    return [(m.group(1), text.count("\n", 0, m.start(2)), m.group(2)) for m in FENCE.finditer(text)]


def commands(body: str) -> list[list[str]]:
    """The ``kmp-dask`` command lines of a bash block (comments and other lines are prose)."""
    out = []
    for line in body.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("kmp-dask "):
            out.append(shlex.split(line)[1:])
    return out


def run_command(args: list[str]) -> None:
    """One ``kmp-dask`` command in this process (click's runner: the imports are paid once)."""
    from click.testing import CliRunner

    from kmp_dask.cli import main

    # as a reader runs it: kmp_dask's warnings are lines on stderr (the suite makes them errors)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, f"kmp-dask {shlex.join(args)} failed:\n{result.output}"


@pytest.mark.parametrize("name", GUIDE_PAGES)
def test_guide_page_runs(name, tmp_path, monkeypatch):
    """Every runnable block of the page succeeds, in order, in a fresh directory."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for lang, line, body in code_blocks(DOCS / "guide" / name):
        if lang == "python":  # padded so that a traceback names the page's own line
            exec(compile("\n" * line + body, f"docs/guide/{name}", "exec"), namespace)
        elif lang == "bash":
            for args in commands(body):
                run_command(args)


def test_getting_started_scores_a_csv():
    """The first page answers "how do I score a new CSV?" with code that runs (the test above)."""
    blocks = code_blocks(DOCS / "guide" / "getting_started.md")
    bash = [args[0] for lang, _, body in blocks if lang == "bash" for args in commands(body)]
    assert bash[:1] == ["ingest"] and {"train", "evaluate", "predict"} <= set(bash)
    assert any("read_csv" in body and ".score(" in body for lang, _, body in blocks if lang == "python")


def reference_entries() -> set[tuple[str, str]]:
    """``(module, name)`` of every autosummary entry of docs/api/*.md."""
    found = set()
    for page in (DOCS / "api").glob("*.md"):
        module = None
        for line in page.read_text(encoding="utf-8").splitlines():
            m = re.match(r"\.\. currentmodule:: (\S+)", line)
            if m:
                module = m.group(1)
            elif module and re.match(r"   [A-Za-z_][\w.]*$", line):
                found.add((module, line.strip()))
    return found


def test_every_public_name_is_in_the_reference():
    """Each name of each public module's ``__all__`` is listed, under its module or at the top level."""
    listed = reference_entries()
    top = importlib.import_module("kmp_dask")
    documented = {id(getattr(importlib.import_module(m), n)) for m, n in listed}
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            at_top = name in top.__all__ and getattr(top, name) is obj and ("kmp_dask", name) in listed
            if (module_name, name) not in listed and not at_top and not (
                    callable(obj) and id(obj) in documented):
                missing.append(f"{module_name}.{name}")
    assert not missing, f"docs/api/index.md does not list: {missing}"


def test_reference_lists_only_real_names():
    """An entry that names nothing would be a broken page (the build catches it too, later)."""
    bad = [f"{m}.{n}" for m, n in reference_entries() if not hasattr(importlib.import_module(m), n)]
    assert not bad


def test_readme_ten_line_example_runs(tmp_path, monkeypatch):
    """README's "In ten lines" block, on a CSV of features and a ``label`` column."""
    import numpy as np
    import pandas as pd
    from sklearn.datasets import make_moons

    readme = DOCS.parent / "README.md"
    section = readme.read_text(encoding="utf-8").split("## In ten lines", 1)[1].split("\n## ", 1)[0]
    body = next(b for lang, _, b in code_blocks_of(section) if lang == "python")
    assert len(body.strip().splitlines()) <= 10
    X, y = make_moons(300, noise=0.2, random_state=0)
    frame = pd.DataFrame(X, columns=["a", "b"]).assign(label=np.where(y == 1, "yes", "no"))
    monkeypatch.chdir(tmp_path)
    frame.iloc[:240].to_csv("mine.csv", index=False)
    frame.iloc[240:].to_csv("new.csv", index=False)
    exec(compile(body, "README.md", "exec"), {"__name__": "__readme__"})
    assert (tmp_path / "mine.model").is_dir()


def _reference_doctests():
    """The ``>>>`` examples of every public class and function (the API reference shows them)."""
    import doctest
    import inspect

    finder, seen, found = doctest.DocTestFinder(), set(), []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if name.startswith("__") or not callable(obj) or id(obj) in seen:
                continue  # constants show int's or str's docstring, not ours
            seen.add(id(obj))
            tests = finder.find(obj, name=f"{module_name}.{name}", module=inspect.getmodule(obj))
            found += [t for t in tests if t.examples]
    return found


@pytest.mark.parametrize("doctest_case", _reference_doctests(), ids=lambda t: t.name)
def test_reference_examples_run(doctest_case):
    import doctest

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(doctest_case, out=report.append)
    assert result.failed == 0, "".join(report)


def test_troubleshooting_lists_every_catalogue_case():
    """The troubleshooting page's tables (generated at build time) hold every row of the failure
    catalogue in docs/store.md exactly once, under an exit status or an exception class."""
    spec = importlib.util.spec_from_file_location("catalogue_page", DOCS / "_catalogue_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    rows = page.catalogue_rows(DOCS / "store.md")
    text = page.render(rows)
    body = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| what you did")]
    assert len(rows) > 100 and len(body) == len(rows)
    assert all(text.count(f"| {case} |") >= 1 for case, _, _ in rows)
    assert "status 1" in text and "`ValueError`" in text
