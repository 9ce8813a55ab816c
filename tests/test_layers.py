"""The layer rule, read from the source with ``ast`` (every import statement, also inside functions).

* The numerical layers — ``kernels/``, ``linalg/``, ``losses.py``, ``bounds.py``, ``blockops/``, ``greedy/`` and
  ``expansion.py`` — import no dask, distributed, zarr or scikit-learn, and none of the kmp_dask
  modules that do (``parallel/``, ``store/``, ``estimators/``, ``datasets/``, ``cli.py``, the package
  root); nor does anything they import, transitively. The one exception: functions in
  ``expansion.py`` may import ``kmp_dask.parallel`` / ``kmp_dask.store`` (chunk-wise evaluation of
  dask and store input).
* ``estimators/`` and ``reduced/`` (the estimator layers) import no dask, distributed or zarr: they
  hand dask arrays and clusters to ``parallel/``.
* ``store/`` imports neither ``estimators/`` nor the package root (which imports the estimators).
* Between the rooms of the package (its sub-packages and top-level modules), only the imports the
  declared table :data:`ALLOWED` lists, plus the few :data:`EXCEPTIONS` named module by module
  (docs/engine.md, "Layers", shows the same table).
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG_DIR = Path(__file__).resolve().parents[1] / "kmp_dask"
ROOT = "kmp_dask"

NUMERIC_LAYERS = ("kernels", "linalg", "losses", "bounds", "blockops", "greedy", "expansion")
THIRD_PARTY_DASK_SIDE = ("dask", "distributed", "zarr", "sklearn")
KMP_DASK_SIDE = ("parallel", "store", "estimators", "reduced", "datasets", "cli")
#: scikit-learn-facing layers: no dask, distributed or zarr
ESTIMATOR_LAYERS = ("estimators", "reduced", "report", "persist")
EXPANSION_LAZY_OK = ("kmp_dask.parallel", "kmp_dask.store")


FOUNDATION = ("_version", "exceptions", "_temporaries")  #: every room may import these (standard library only)
_NUMERIC = ("kernels", "linalg", "losses", "bounds")
_BELOW_ESTIMATORS = (*_NUMERIC, "blockops", "expansion", "greedy", "parallel", "store")

#: room -> the other rooms its modules may import (besides :data:`FOUNDATION`), top-level or inside
#: functions. A room is a sub-package (``greedy``) or a top-level module (``expansion``); ``root`` is
#: the package ``kmp_dask`` itself (its ``__init__``, which re-exports lazily).
ALLOWED = {
    "_version": (),
    "exceptions": (),
    "_temporaries": (),
    "kernels": (),
    "linalg": (),
    "losses": (),
    "bounds": (),
    "blockops": ("kernels", "linalg", "losses"),                  # per-partition numerics
    "expansion": ("kernels", "blockops"),                          # the model (+ EXCEPTIONS: dask input)
    "greedy": (*_NUMERIC, "blockops", "expansion"),                # every family's loop; no dask
    "store": ("_overwrite",),                                      # data on disk / in memory
    "datasets": ("store",),
    "parallel": ("kernels", "linalg", "blockops", "store"),        # engines and generic task runners
    "_predictions_file": (),
    "_overwrite": ("store", "persist", "_predictions_file"),      # inside functions: what a path holds
    "persist": ("_overwrite",),
    "report": ("_overwrite",),
    "estimators": tuple(r for r in _BELOW_ESTIMATORS if r != "blockops"),  # composes greedy + parallel
    "reduced": (*_BELOW_ESTIMATORS, "estimators"),
    "evaluation": (*_BELOW_ESTIMATORS, "estimators", "reduced", "_overwrite", "_predictions_file"),
    "pipeline": (*_BELOW_ESTIMATORS, "estimators", "reduced", "evaluation", "datasets", "persist", "report",
                 "_overwrite", "root"),
    "cli": (*_BELOW_ESTIMATORS, "estimators", "reduced", "evaluation", "datasets", "persist", "report",
            "pipeline", "_overwrite", "root"),
    "root": ("estimators", "expansion", "kernels", "persist", "reduced", "store"),
}

#: (importing module, imported room) -> why this import crosses the table, each still needed
EXCEPTIONS = {
    ("kmp_dask.expansion", "parallel"): "inside a function: decision_function on dask input maps over chunks",
    ("kmp_dask.expansion", "store"): "inside functions: decision_function on a store reads it chunk by chunk",
    ("kmp_dask.store._sources", "datasets"): "inside functions: a named data set as a store source",
    ("kmp_dask.store._ingest", "parallel"): "inside a function: a parallel ingest's chunk tasks are waited for by "
                                            "parallel._waits, the one place that bounds waits on dask",
}


@dataclass(frozen=True)
class Import:
    """One imported module: the full dotted name, where, and whether inside a function."""

    module: str
    path: str
    line: int
    in_function: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _module_name(path: Path, pkg_dir: Path = PKG_DIR) -> str:
    parts = list(path.relative_to(pkg_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _submodules(pkg_dir: Path) -> set[str]:
    return {_module_name(p, pkg_dir) for p in pkg_dir.rglob("*.py")}


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, path: str, known: set[str]):
        self.package = module if is_package else module.rpartition(".")[0]
        self.path, self.known, self.depth, self.found = path, known, 0, []

    def _add(self, module: str, node: ast.AST):
        self.found.append(Import(module, self.path, node.lineno, self.depth > 0))

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            base = ".".join(base + ([node.module] if node.module else []))
        else:
            base = node.module
        for alias in node.names:  # `from pkg import sub` imports pkg.sub when sub is a module
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.known else base, node)

    def visit_Call(self, node: ast.Call):  # importlib.import_module("x") / __import__("x")
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith("."):
            self._add(node.args[0].value, node)
        self.generic_visit(node)


def imports_of(source: str, module: str, *, is_package: bool = False, path: str = "<string>",
               known: set[str] = frozenset()) -> list[Import]:
    """Every module ``source`` imports (relative imports resolved against ``module``)."""
    c = _Collector(module, is_package, path, set(known))
    c.visit(ast.parse(source, filename=path))
    return c.found


def _scan(pkg_dir: Path = PKG_DIR) -> dict[str, list[Import]]:
    known = _submodules(pkg_dir)
    out = {}
    for p in sorted(pkg_dir.rglob("*.py")):
        rel = str(p.relative_to(pkg_dir.parent))
        out[_module_name(p, pkg_dir)] = imports_of(p.read_text(encoding="utf-8"), _module_name(p, pkg_dir),
                                                   is_package=_is_package(p), path=rel, known=known)
    return out


MODULES = _scan()


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _layer_modules(layers) -> list[str]:
    return sorted(m for m in MODULES if _under(m, [f"{ROOT}.{x}" for x in layers]))


def _forbidden_for_numeric(imp: Import) -> str | None:
    """Why ``imp`` breaks the numerical layers' rule, or None."""
    if _under(imp.module, THIRD_PARTY_DASK_SIDE):
        return imp.module.partition(".")[0]
    if imp.module == ROOT:
        return "the package root kmp_dask (it imports the estimators)"
    if _under(imp.module, [f"{ROOT}.{x}" for x in KMP_DASK_SIDE]):
        return imp.module
    return None


def _report(title: str, bad: list[str]) -> str:
    return f"{title}:\n  " + "\n  ".join(bad)


def test_the_layers_exist():
    """Guard against a vacuous pass (a renamed directory, a wrong path)."""
    for layer in NUMERIC_LAYERS + ("estimators", "reduced", "store", "parallel"):
        assert _layer_modules([layer]), f"no module found for layer {layer!r} under {PKG_DIR}"


def test_numeric_layers_import_no_dask_side_module():
    bad = []
    for mod in _layer_modules(NUMERIC_LAYERS):
        for imp in MODULES[mod]:
            why = _forbidden_for_numeric(imp)
            if why is None:
                continue
            if mod == f"{ROOT}.expansion" and imp.in_function and _under(imp.module, EXPANSION_LAZY_OK):
                continue
            bad.append(f"{imp.where()}: imports {imp.module} ({why})")
    assert not bad, _report(
        "kernels/, linalg/, losses.py, blockops/, greedy/ and expansion.py must not import dask, distributed, "
        "zarr, scikit-learn or kmp_dask's parallel/store/estimators/datasets/cli/root; route dask work "
        "through kmp_dask.parallel", bad)


def _closure_path(start: str, *, functions: bool, stop) -> list[Import] | None:
    """Module-level (or all, ``functions=True``) import chain from ``start`` to a module for which
    ``stop(import)`` holds, following kmp_dask modules (and their parent packages below the root)."""
    seen, queue = {start}, deque([(start, [])])
    while queue:
        mod, chain = queue.popleft()
        for imp in MODULES.get(mod, ()):
            if imp.in_function and not functions:
                continue
            if stop(imp):
                return chain + [imp]
            parts = imp.module.split(".")
            for k in range(2, len(parts) + 1):  # kmp_dask.a, kmp_dask.a.b: each one's code runs
                nxt = ".".join(parts[:k])
                if parts[0] == ROOT and nxt in MODULES and nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, chain + [imp]))
    return None


def _chains(layers, *, functions: bool, stop) -> list[str]:
    """The shortest offending chain per offending import statement, from any module of ``layers``."""
    best = {}
    for mod in _layer_modules(layers):
        chain = _closure_path(mod, functions=functions, stop=stop)
        if chain and (chain[-1] not in best or len(chain) < len(best[chain[-1]])):
            best[chain[-1]] = chain
    return [" -> ".join(f"{i.where()} imports {i.module}" for i in c) for _, c in sorted(best.items(),
            key=lambda kv: (kv[0].path, kv[0].line))]


def test_numeric_layers_stay_dask_free_transitively():
    """What a numerical module imports at module level imports no dask-side module either."""
    bad = _chains(NUMERIC_LAYERS, functions=False, stop=lambda i: _forbidden_for_numeric(i) is not None)
    assert not bad, _report("numerical layers reach a dask-side module through their imports", bad)


def test_estimators_use_parallel_for_dask():
    bad = [f"{imp.where()}: imports {imp.module}"
           for mod in _layer_modules(ESTIMATOR_LAYERS) for imp in MODULES[mod]
           if _under(imp.module, ("dask", "distributed", "zarr"))]
    assert not bad, _report(
        "estimators/ and reduced/ must not import dask, distributed or zarr (also inside functions); put the dask "
        "code in kmp_dask/parallel/ and call it", bad)


def test_store_does_not_import_estimators_or_package_root():
    """Directly or through other kmp_dask modules, also inside functions."""
    def forbidden(imp):
        return imp.module == ROOT or _under(imp.module, [f"{ROOT}.estimators"])

    bad = _chains(["store"], functions=True, stop=forbidden)
    assert not bad, _report(
        "store/ must not import kmp_dask.estimators or names from the package root (e.g. take "
        "__version__ from kmp_dask._version)", bad)


def room_of(module: str) -> str | None:
    """The room of a kmp_dask module (``kmp_dask.greedy._kmp`` → ``greedy``; ``kmp_dask`` → ``root``),
    None outside kmp_dask."""
    parts = module.split(".")
    if parts[0] != ROOT:
        return None
    return "root" if len(parts) == 1 else parts[1]


def table_violations(modules=None, allowed=None, exceptions=None) -> list[str]:
    """Every import between two rooms that :data:`ALLOWED` does not list and :data:`EXCEPTIONS`
    does not name."""
    modules, allowed = MODULES if modules is None else modules, ALLOWED if allowed is None else allowed
    exceptions = EXCEPTIONS if exceptions is None else exceptions
    bad = []
    for mod, imps in sorted(modules.items()):
        src = room_of(mod)
        for imp in imps:
            dst = room_of(imp.module)
            if dst is None or dst == src or dst in FOUNDATION or dst in allowed.get(src, ()):
                continue
            if (mod, dst) not in exceptions:
                bad.append(f"{imp.where()}: {src} imports {imp.module} ({dst} is not in ALLOWED[{src!r}])")
    return bad


def test_every_room_is_in_the_table():
    rooms = {room_of(m) for m in MODULES}
    assert rooms <= set(ALLOWED), \
        f"rooms missing from ALLOWED (declare what they may import): {sorted(rooms - set(ALLOWED))}"
    assert set(ALLOWED) <= rooms, f"ALLOWED names rooms that do not exist: {sorted(set(ALLOWED) - rooms)}"


def test_imports_follow_the_layer_table():
    bad = table_violations()
    assert not bad, _report("imports across rooms not in the layer table (tests/test_layers.py ALLOWED; "
                            "docs/engine.md, Layers): move the code to the right room or hand it the function", bad)


def test_declared_exceptions_are_still_needed():
    """An exception whose import is gone is removed from the table (it would let a new one in silently)."""
    used = {(mod, room_of(imp.module)) for mod, imps in MODULES.items() for imp in imps}
    stale = sorted(k for k in EXCEPTIONS if k not in used)
    assert not stale, f"EXCEPTIONS no longer needed (remove them): {stale}"


@pytest.mark.parametrize("src, dst", [
    ("parallel", "greedy"), ("parallel", "expansion"), ("parallel", "estimators"), ("parallel", "reduced"),
    ("estimators", "blockops"), ("greedy", "parallel"), ("greedy", "estimators"), ("blockops", "greedy"),
    ("store", "estimators"), ("estimators", "reduced"), ("estimators", "cli"),
])
def test_the_table_forbids(src, dst):
    """The directions the layer rules forbid (and their neighbours) are not in the table."""
    assert dst not in ALLOWED[src]


def test_table_check_finds_a_forbidden_import():
    """The check itself fails on an import the table does not allow, and an exception silences it."""
    src = "from ..greedy._hmp import hyperplane_pursuit\ndef f():\n    from ..estimators import _inputs"
    mods = {"kmp_dask.parallel._x": imports_of(src, "kmp_dask.parallel._x", path="parallel/_x.py",
                                               known={"kmp_dask.greedy._hmp", "kmp_dask.estimators._inputs"})}
    bad = table_violations(mods)
    assert [b.split(":")[1] for b in bad] == ["1", "3"] and "greedy" in bad[0] and "estimators" in bad[1]
    assert table_violations(mods, exceptions={("kmp_dask.parallel._x", "greedy"): "",
                                              ("kmp_dask.parallel._x", "estimators"): ""}) == []


# --- the scanner itself: each rule can fail ----------------------------------------------------------

KNOWN = {"kmp_dask", "kmp_dask.greedy", "kmp_dask.greedy._kmp", "kmp_dask.parallel", "kmp_dask.exceptions",
         "kmp_dask._version"}


@pytest.mark.parametrize("source, expect", [
    ("import dask.array as da", "dask.array"),
    ("def f():\n    import dask.array as da", "dask.array"),
    ("class A:\n    def f(self):\n        from distributed import Client", "distributed"),
    ("from sklearn.utils import check_array", "sklearn.utils"),
    ("import importlib\nm = importlib.import_module('zarr')", "zarr"),
    ("from ..parallel import make_engine", "kmp_dask.parallel"),
    ("from .. import parallel", "kmp_dask.parallel"),
    ("from .. import __version__", "kmp_dask"),
    ("from kmp_dask import KMPClassifier", "kmp_dask"),
])
def test_scanner_finds_forbidden_imports(source, expect):
    found = imports_of(source, "kmp_dask.greedy._kmp", path="greedy/_kmp.py", known=KNOWN)
    assert expect in [i.module for i in found]
    assert any(_forbidden_for_numeric(i) for i in found)


@pytest.mark.parametrize("source", [
    "import numpy as np\nfrom ..exceptions import PrematureStopWarning",
    "from .. import exceptions",
    "from .._version import __version__",
    "from . import _kmp",
])
def test_scanner_accepts_allowed_imports(source):
    found = imports_of(source, "kmp_dask.greedy._kmp", path="greedy/_kmp.py", known=KNOWN)
    assert found and not any(_forbidden_for_numeric(i) for i in found)


def test_scanner_resolves_package_relative_imports_and_lines():
    found = imports_of("\n\nfrom ._kmp import x\nfrom .. import parallel", "kmp_dask.greedy", is_package=True,
                       path="greedy/__init__.py", known=KNOWN)
    assert [(i.module, i.where(), i.in_function) for i in found] == [
        ("kmp_dask.greedy._kmp", "greedy/__init__.py:3", False), ("kmp_dask.parallel", "greedy/__init__.py:4", False)]


# -- the estimators' sessions ---------------------------------------------------------------
#: what ``parallel/`` sets up a fit with; estimators/ and reduced/ get these only from ``parallel._session``
SESSION_ONLY = ("resolve_client", "connect", "embedded_cluster", "make_engine", "InProcessEngine", "ActorEngine",
                "Tasks")
#: modules outside parallel/ that still resolve a client themselves, and why (each still needed)
SESSION_EXCEPTIONS = {
    "kmp_dask.evaluation": "makes a client current for a chunk-wise dask.array predict (no engine, no estimator)",
    "kmp_dask.cli._demo": "the demo's own cluster (an address, or an embedded cluster it reports on)",
    "kmp_dask.cli._where": "the command line's cluster (--scheduler with TLS and timeouts, or --workers), "
                           "handed to the estimators as a Client",
}


def session_bypasses(source: str, path: str = "<string>") -> list[str]:
    """Every name, attribute or import of :data:`SESSION_ONLY` in ``source`` (``path:line name``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.ImportFrom)
                 else [node.id] if isinstance(node, ast.Name)
                 else [node.attr] if isinstance(node, ast.Attribute) else [])
        found += [f"{path}:{node.lineno} {n}" for n in names if n in SESSION_ONLY]
    return found


def _session_scan(prefixes) -> dict[str, list[str]]:
    out = {}
    for p in sorted(PKG_DIR.rglob("*.py")):
        mod = _module_name(p, PKG_DIR)
        if _under(mod, prefixes):
            out[mod] = session_bypasses(p.read_text(encoding="utf-8"), str(p.relative_to(PKG_DIR.parent)))
    return out


def test_estimator_layers_get_clients_engines_and_tasks_through_the_session_helpers():
    scanned = _session_scan([f"{ROOT}.estimators", f"{ROOT}.reduced"])
    assert len(scanned) > 10  # not vacuous
    bad = [hit for hits in scanned.values() for hit in hits]
    assert not bad, _report("estimators/ and reduced/ must resolve clients and build engines / Tasks through "
                            "kmp_dask.parallel._session (engine_session, engine_on, task_session, client_session)", bad)


def test_outside_parallel_only_the_declared_modules_resolve_clients_themselves():
    scanned = _session_scan([ROOT])
    bypass = {m for m, hits in scanned.items() if hits and not _under(m, [f"{ROOT}.parallel"])}
    assert bypass == set(SESSION_EXCEPTIONS), _report(
        "modules outside parallel/ that set up clients / engines themselves (use parallel._session, or declare "
        "them in SESSION_EXCEPTIONS)", sorted(bypass ^ set(SESSION_EXCEPTIONS)))


@pytest.mark.parametrize("source, name", [
    ("from ..parallel import make_engine", "make_engine"),
    ("def f(c):\n    with parallel.resolve_client(c, in_memory=True):\n        pass", "resolve_client"),
    ("from ..parallel import Tasks as T", "Tasks"),
])
def test_session_scan_finds_a_bypass(source, name):
    assert [h.split()[-1] for h in session_bypasses(source)] == [name]
    assert not session_bypasses("from ..parallel._session import engine_session\nwith engine_session(c, s): pass")
