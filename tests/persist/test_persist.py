"""The open model format: round trips with identical predictions, refusals, atomicity, no dask."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_moons
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVC

import kmp_dask
from kmp_dask import (
    MMDA,
    CVMClassifier,
    KMPClassifier,
    KMPRegressor,
    ReducedSetCompressor,
    SparseKCCA,
    SparseKernelPCA,
    load,
    save,
)
from kmp_dask.persist import FORMAT_VERSION, model_info
from kmp_dask.reduced import ReducedSetClassifier, ReducedSetRegressor

X, Y = make_moons(240, noise=0.2, random_state=0)
YR = np.sin(3 * X[:, 0]) + X[:, 1]
LABELS = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]

MODELS = {
    "kmp-classifier": lambda: KMPClassifier(n_basis=12, random_state=0, validation_fraction=0.2).fit(X, Y),
    "kmp-logistic-multiclass-mixed": lambda: KMPClassifier(n_basis=10, loss="logistic",
                                                           gamma=[0.1, 1.0]).fit(X, LABELS),
    "kmp-regressor-bound": lambda: KMPRegressor(n_basis=12, stopping="bound", bound_threshold=0.3).fit(X, YR),
    "kmp-regressor-2d": lambda: KMPRegressor(n_basis=8).fit(X, np.c_[YR, -YR]),
    "cvm": lambda: CVMClassifier(random_state=0).fit(X, Y),
    "mmda": lambda: MMDA(n_components=2, random_state=0).fit(X, LABELS),
    "sparse-kpca": lambda: SparseKernelPCA(n_components="bound", max_components=15, random_state=0).fit(X),
    "sparse-kcca": lambda: SparseKCCA(n_components=4, random_state=0).fit(X, np.c_[YR, YR ** 2]),
    "compressor": lambda: ReducedSetCompressor(n_vectors=10).fit(SVC(gamma=1).fit(X, Y), X, Y),
    # a compressed regression model has classes_ None: its file summary must not iterate it
    "compressor-regression": lambda: ReducedSetCompressor(n_vectors=10).fit(
        KernelRidge(kernel="rbf", gamma=1.0, alpha=0.1).fit(X, YR), X),
    "rs-classifier": lambda: ReducedSetClassifier(n_vectors=8).fit(X, Y),
    "rs-regressor": lambda: ReducedSetRegressor(n_vectors=8).fit(X, YR),
}


def _outputs(model):
    out = {}
    for meth in ("predict", "decision_function", "predict_proba", "transform"):
        if hasattr(model, meth):
            r = getattr(model, meth)(X)
            out[meth] = np.asarray(r[0] if isinstance(r, tuple) else r)
    return out


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {k: f() for k, f in MODELS.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_gives_identical_outputs(tmp_path, fitted, name):
    model = fitted[name]
    save(model, tmp_path / "m")
    back = load(tmp_path / "m")
    assert type(back) is type(model)
    a, b = _outputs(model), _outputs(back)
    assert a.keys() == b.keys() and a
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert clone(back).get_params() == clone(model).get_params()
    if hasattr(model, "expansion_at") and getattr(model, "_path", None) is not None:
        assert model.expansion_at(3).allclose(back.expansion_at(3), rtol=0, atol=0)
    info = model_info(tmp_path / "m")
    assert info["class"] == type(model).__name__ and info["format_version"] == FORMAT_VERSION


def test_expansion_round_trip(tmp_path, fitted):
    exp = fitted["kmp-classifier"].expansion_
    save(exp, tmp_path / "e")
    np.testing.assert_array_equal(load(tmp_path / "e").evaluate_block(X), exp.evaluate_block(X))


def test_refuses_to_overwrite_and_swaps_atomically(tmp_path, fitted, monkeypatch):
    a, b = fitted["kmp-classifier"], fitted["cvm"]
    save(a, tmp_path / "m")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        save(b, tmp_path / "m")
    calls = {"n": 0}
    real = np.save

    def failing(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(*args, **kw)

    monkeypatch.setattr(np, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        save(b, tmp_path / "m", overwrite=True)
    monkeypatch.setattr(np, "save", real)
    assert type(load(tmp_path / "m")) is KMPClassifier  # the old model is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary directories left
    save(b, tmp_path / "m", overwrite=True)
    assert type(load(tmp_path / "m")) is CVMClassifier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_bad_inputs(tmp_path, fitted):
    with pytest.raises(ValueError, match="not fitted"):
        save(KMPClassifier(), tmp_path / "u")
    with pytest.raises(TypeError, match="SVC"):
        save(SVC().fit(X, Y), tmp_path / "s")
    with pytest.raises(FileNotFoundError, match="no kmp_dask model"):
        load(tmp_path / "missing")
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="not a kmp_dask model: it has no model.json"):
        load(tmp_path / "d")
    (tmp_path / "d" / "model.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load(tmp_path / "d")
    save(fitted["kmp-classifier"], tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    (tmp_path / "m" / "model.json").write_text(json.dumps({**doc, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(ValueError, match="Upgrade kmp_dask"):
        load(tmp_path / "m")
    (tmp_path / "m" / "model.json").write_text(json.dumps({**doc, "class": "os.system"}))
    with pytest.raises(ValueError, match="does not load"):
        load(tmp_path / "m")


def test_load_imports_no_dask_and_unpickles_nothing(tmp_path, fitted):
    save(fitted["kmp-logistic-multiclass-mixed"], tmp_path / "m")
    code = ("import sys, pickle, numpy as np\n"
            "pickle.loads = pickle.load = None\n"
            "import kmp_dask\n"
            f"m = kmp_dask.load({str(tmp_path / 'm')!r})\n"
            "m.predict(np.zeros((3, 2)))\n"
            "assert not [k for k in sys.modules if k.split('.')[0] in ('dask', 'distributed')], 'dask imported'\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    assert kmp_dask.load is load


def test_compressor_saved_and_pickled_before_any_prediction(tmp_path):
    """Regression: level coefficients solved lazily (a closure per level) made a freshly fitted
    compressor unsavable ('_levels[0]._coef is a builtins.function') and unpicklable."""
    import pickle

    from kmp_dask.store import create_store

    svc = SVC(gamma=1).fit(X, Y)
    pool = create_store(tmp_path / "pool.zarr", X, Y, classes=[0, 1])  # a store pool: the engine's lazy levels
    comp = ReducedSetCompressor(n_vectors=10, client="sync").fit(svc, pool)
    assert any(callable(lv._coef) for lv in comp._levels)  # the case this guards
    save(comp, tmp_path / "c")  # before any predict has solved a level
    twin = pickle.loads(pickle.dumps(ReducedSetCompressor(n_vectors=10, client="sync").fit(svc, pool)))
    back = load(tmp_path / "c")
    for other in (back, twin):
        np.testing.assert_array_equal(other.decision_function(X), comp.decision_function(X))
        np.testing.assert_array_equal(other.expansion_at(4).coef, comp.expansion_at(4).coef)


@pytest.mark.parametrize("name", ["kmp-classifier", "cvm", "sparse-kpca"])
def test_a_model_saved_before_a_parameter_existed_loads_with_its_default(tmp_path, fitted, name):
    """A file from before ``standardize`` / ``atoms_per_pass`` existed: the parameters take their
    declared defaults (get_params and clone work), the outputs are the file's."""
    model = fitted[name]
    save(model, tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    dropped = [k for k in ("standardize", "atoms_per_pass") if k in doc["state"]]
    assert dropped
    for k in dropped:
        del doc["state"][k]
    (tmp_path / "m" / "model.json").write_text(json.dumps(doc))
    back = load(tmp_path / "m")
    defaults = type(model)().get_params()
    assert {k: back.get_params()[k] for k in dropped} == {k: defaults[k] for k in dropped}
    clone(back)
    for meth, out in _outputs(model).items():
        np.testing.assert_array_equal(_outputs(back)[meth], out)
