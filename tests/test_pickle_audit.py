"""Audit: nothing in kmp_dask unpickles a file it did not write, unless the user said so.

The test reads every module of the package (AST, not grep, so comments and strings don't count) and
finds every call that can unpickle: ``pickle.load(s)``, ``pickle.Unpickler``, ``joblib.load``,
``cloudpickle.load(s)``, ``dill.load(s)``, ``pandas.read_pickle``, ``marshal.load(s)``,
``shelve.open``, ``torch.load``, ``np.load(..., allow_pickle=<anything but False>)`` and the same
names imported with ``from ... import``. Each site must be in :data:`SITES` with its guard, and the
guard is checked in the code:

* ``restricted`` — the restricted unpickler of ``kmp_dask/blockops/_safe_pickle.py`` (only
  kmp_dask's state classes and NumPy resolve); other unpicklers must subclass it;
* ``trust_pickle`` — the enclosing function takes ``trust_pickle`` and raises before the call
  unless it is true; its callers are followed up to the public entry points, which must expose
  the flag (``--trust-pickle``);

Pipelines unpickle nothing: a scikit-learn model they train is kept in the open format (its
``CompressionTarget``), and a ``model.joblib`` planted in a run directory is refused (tested below
by running it).

A new unpickling call anywhere fails this test until it is guarded and listed here.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kmp_dask"

#: (module path relative to the package, enclosing function) -> guard
SITES = {
    ("blockops/_safe_pickle.py", "RestrictedUnpickler"): "restricted",
    ("cli/_post.py", "_load_any"): "trust_pickle",
}
UNPICKLING = {("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"), ("joblib", "load"),
              ("cloudpickle", "load"), ("cloudpickle", "loads"), ("dill", "load"), ("dill", "loads"),
              ("pandas", "read_pickle"), ("pd", "read_pickle"), ("marshal", "load"), ("marshal", "loads"),
              ("shelve", "open"), ("torch", "load"), ("_pickle", "load"), ("_pickle", "loads")}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"), str(path))


class _Finder(ast.NodeVisitor):
    """Unpickling call sites of one module, with their enclosing function."""

    def __init__(self):
        self.stack, self.sites, self.aliases = [], [], {}

    def visit_ImportFrom(self, node):
        for a in node.names:
            if ((node.module or "").split(".")[0] in {m for m, _ in UNPICKLING}
                    and (node.module.split(".")[0], a.name) in UNPICKLING):
                self.aliases[a.asname or a.name] = (node.module, a.name)

    def _function(self, node):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        for base in node.bases:
            name = ast.unparse(base)
            if name.endswith("Unpickler") and name != "RestrictedUnpickler" and not name.endswith("._Unpickler"):
                self.sites.append((node.name, f"class {node.name}({name})", node.lineno))
        self._function(node)

    def visit_Call(self, node):
        f = node.func
        where = self.stack[-1] if self.stack else "<module>"
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            mod, attr = f.value.id, f.attr
            if (mod, attr) in UNPICKLING:
                self.sites.append((where, f"{mod}.{attr}", node.lineno))
            if attr == "load" and mod in ("np", "numpy"):
                kw = {k.arg: k.value for k in node.keywords}
                if "allow_pickle" in kw and not (isinstance(kw["allow_pickle"], ast.Constant)
                                                 and kw["allow_pickle"].value is False):
                    self.sites.append((where, f"{mod}.load(allow_pickle={ast.unparse(kw['allow_pickle'])})",
                                       node.lineno))
        if isinstance(f, ast.Name) and f.id in self.aliases:
            self.sites.append((where, ".".join(self.aliases[f.id]), node.lineno))
        self.generic_visit(node)


def _all_sites():
    out = []
    for rel, tree in _modules():
        finder = _Finder()
        finder.visit(tree)
        out += [(rel, fn, what, line) for fn, what, line in finder.sites]
    return out


def _function(rel: str, name: str) -> ast.FunctionDef:
    tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"{rel}: {name} defined {len(found)} times"
    return found[0]


def _raises_before(fn: ast.FunctionDef, line: int, test) -> bool:
    """An ``if`` before ``line`` in ``fn`` whose condition satisfies ``test`` and whose body raises."""
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and node.lineno < line and test(node.test) \
                and any(isinstance(s, ast.Raise) for s in node.body):
            return True
    return False


def test_every_unpickling_call_is_known_and_guarded():
    sites = _all_sites()
    unknown = [s for s in sites if (s[0], s[1]) not in SITES]
    assert not unknown, f"unpickling call sites not audited (add a guard and list them in SITES): {unknown}"
    assert {(s[0], s[1]) for s in sites} <= set(SITES)
    for (rel, fn_name), guard in SITES.items():
        lines = [s[3] for s in sites if (s[0], s[1]) == (rel, fn_name)]
        if not lines:
            continue  # a site removed: nothing to guard
        if guard == "restricted":  # the one pickle.Unpickler subclass: it overrides find_class with an allowlist
            assert rel == "blockops/_safe_pickle.py"
            from kmp_dask.blockops._safe_pickle import RestrictedUnpickler, UnsafePickleError, restricted_loads

            assert "find_class" in vars(RestrictedUnpickler)
            with pytest.raises(UnsafePickleError):
                restricted_loads(b"cos\nsystem\n(S'true'\ntR.")  # protocol 0: os.system('true')
            continue
        fn = _function(rel, fn_name)
        if guard == "trust_pickle":
            assert "trust_pickle" in [a.arg for a in fn.args.args]
            assert all(_raises_before(fn, ln, lambda t: ast.unparse(t) == "not trust_pickle") for ln in lines), \
                f"{rel}:{fn_name} unpickles without raising first unless trust_pickle"
        else:  # pragma: no cover
            raise AssertionError(guard)


def test_other_unpicklers_are_restricted():
    """Every Unpickler subclass in the package derives from the restricted one."""
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith("Unpickler") for b in bases) and rel != "blockops/_safe_pickle.py":
                    assert all(b in ("RestrictedUnpickler", "_Unpickler") or b.endswith(".RestrictedUnpickler")
                               for b in bases if b.endswith("Unpickler")), f"{rel}: {node.name}{bases}"


def _callers(name: str) -> list[tuple[str, str, ast.FunctionDef]]:
    out = []
    for rel, tree in _modules():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != name and any(
                    isinstance(c, ast.Call) and ast.unparse(c.func).split(".")[-1] == name for c in ast.walk(fn)):
                out.append((rel, fn.name, fn))
    return out


def test_trust_pickle_reaches_the_user_only_through_the_flag():
    """Follow the calls: ``_load_any`` is called only by the ``compress`` command, which passes
    its own ``--trust-pickle`` value (default off) and nothing else."""
    callers = _callers("_load_any")
    assert [(rel, fn) for rel, fn, _ in callers] == [("cli/_post.py", "compress")]
    _, _, fn = callers[0]
    call = next(c for c in ast.walk(fn) if isinstance(c, ast.Call) and ast.unparse(c.func) == "_load_any")
    assert ast.unparse(call.args[1]) == "trust_pickle"
    decorators = " ".join(ast.unparse(d) for d in fn.decorator_list)
    assert "'--trust-pickle', is_flag=True" in decorators

    from click.testing import CliRunner

    from kmp_dask.cli import main
    assert "--trust-pickle" in CliRunner().invoke(main, ["compress", "--help"]).output


def test_a_pipeline_keeps_its_scikit_learn_model_openly_and_a_planted_pickle_is_not_run(tmp_path):
    """The model step saves an SVC as its open-format CompressionTarget (predicting as the SVC);
    ``load_model`` never unpickles: a ``model.joblib`` planted in the run directory is refused and
    its ``os.system`` never runs."""
    import joblib
    from sklearn.svm import SVC

    from kmp_dask import load
    from kmp_dask.pipeline._runner import RunDirectory
    from kmp_dask.pipeline._steps import SOURCE_MODEL, load_model

    flag = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    run = RunDirectory(tmp_path / "run", overwrite=False, resume=False)
    joblib.dump(Planted(), run.path("model.joblib"))
    with pytest.raises(FileNotFoundError, match="no longer unpickle anything"):
        load_model(run)
    assert not flag.exists()

    from kmp_dask import save
    from kmp_dask.reduced import as_compression_target

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    svc = SVC(C=3.0, gamma=0.7).fit(X, y)
    save(as_compression_target(svc), run.path(SOURCE_MODEL))
    target = load_model(run)
    assert type(target).__name__ == "CompressionTarget" and type(load(run.path(SOURCE_MODEL))) is type(target)
    Xt = rng.normal(size=(200, 3))
    assert (target.predict(target.expansion.decision_function(Xt)) == svc.predict(Xt)).all()
    assert not flag.exists()


def test_the_audit_sees_a_new_site(tmp_path, monkeypatch):
    """The finder itself: an unguarded joblib.load, a from-import alias and np.load(allow_pickle=True) show."""
    src = ("import joblib\nimport numpy as np\nfrom pickle import loads as L\n"
           "def f(p):\n    joblib.load(p)\n    np.load(p, allow_pickle=True)\n    L(p)\n"
           "    np.load(p, allow_pickle=False)\n")
    finder = _Finder()
    finder.visit(ast.parse(src))
    assert [s[1] for s in finder.sites] == ["joblib.load", "np.load(allow_pickle=True)", "pickle.loads"]
