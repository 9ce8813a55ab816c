"""The compressor's level type: every field declared, lazy coefficients, and model files written
before the split (class ``kmp_dask.reduced._compressor._Level``, without the exchange fields) load."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np
from sklearn.svm import SVC

import kmp_dask
from kmp_dask.reduced import ReducedSetCompressor
from kmp_dask.reduced._level import _Level


def test_every_field_is_declared_and_coefficients_are_solved_once():
    names = [f.name for f in dataclasses.fields(_Level)]
    assert names == ["index", "_coef", "rkhs_error", "vectors", "exchanged", "is_exchanged", "n_swaps", "guarded",
                     "built"]
    calls = []
    lv = _Level([2, 0], lambda: calls.append(1) or np.ones((2, 1)), [0.5])
    assert lv.n_vectors == 2 and lv.index.dtype == np.int64 and not calls
    assert lv.coef.shape == (2, 1) and lv.coef.shape == (2, 1) and calls == [1]
    assert "built" not in lv.__getstate__() and isinstance(lv.__getstate__()["_coef"], np.ndarray)


def _as_before_the_split(value):
    """The level objects of a model file as the code before the split wrote them."""
    if isinstance(value, dict):
        if value.get("class") == "kmp_dask.reduced._level._Level":
            value["class"] = "kmp_dask.reduced._compressor._Level"
            for key in ("is_exchanged", "n_swaps", "guarded"):
                if value["state"].get(key) in (False, 0):
                    del value["state"][key]
        for v in value.values():
            _as_before_the_split(v)
    elif isinstance(value, list):
        for v in value:
            _as_before_the_split(v)


def test_a_model_file_from_before_the_split_loads(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    comp = ReducedSetCompressor(10, exchange=2).fit(SVC(gamma=0.5).fit(X, y), X, y)
    path = tmp_path / "m.kmp"
    kmp_dask.save(comp, path)
    model_json = pathlib.Path(path) / "model.json"
    doc = json.loads(model_json.read_text())
    _as_before_the_split(doc)
    assert "kmp_dask.reduced._level._Level" not in json.dumps(doc)
    model_json.write_text(json.dumps(doc))
    loaded = kmp_dask.load(path)
    np.testing.assert_array_equal(loaded.predict(X), comp.predict(X))
    assert loaded._levels[3].guarded is False and loaded._levels[3].n_swaps == 0  # class defaults
    np.testing.assert_array_equal(loaded.expansion_at(5).coef, comp.expansion_at(5).coef)
