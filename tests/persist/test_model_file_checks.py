"""A damaged or edited model file is refused on load, in one line (Python: a ``ModelFileError``,
a ``ValueError``; the CLI: one ``Error:`` line, exit 1) — never loaded into a model that predicts
nonsense, never a traceback, never "out of memory"."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.datasets import make_moons

from kmp_dask import KMPClassifier, load, save
from kmp_dask.cli import main
from kmp_dask.persist import ModelFileError
from kmp_dask.persist._checks import MAX_DEPTH
from kmp_dask.store import create_store

X, Y = make_moons(120, noise=0.2, random_state=0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    save(KMPClassifier(n_basis=6, random_state=0).fit(X, Y), root / "good.model")
    create_store(root / "data.zarr", X, Y, chunk_rows=40)
    return root


def _copy(saved, tmp_path, name="m.model"):
    import shutil

    shutil.copytree(saved / "good.model", tmp_path / name)
    return tmp_path / name


def _doc(model):
    return json.loads((model / "model.json").read_text())


def _write(model, doc):
    (model / "model.json").write_text(json.dumps(doc))


def _coef_file(model) -> str:
    """The array file of the expansion's coefficients."""
    exp = _doc(model)["state"]["expansion_"]["state"]
    return exp["coef"]["file"]


def _kernel_state(doc):
    return doc["state"]["expansion_"]["state"]["kernels"]["items"][0]["state"]


def nan_coefficients(m):
    f = m / _coef_file(m)
    a = np.load(f)
    a[1] = np.nan
    np.save(f, a)


def negative_gamma(m):
    doc = _doc(m)
    params = _kernel_state(doc)["params"]["items"]
    for pair in params:
        if pair["items"][0] == "gamma":
            pair["items"][1] = -0.5
    _write(m, doc)


def nul_in_array_name(m):
    doc = _doc(m)
    doc["state"]["expansion_"]["state"]["coef"]["file"] = "arrays/a\x00.npy"
    _write(m, doc)


def huge_npy_header(m):
    f = m / _coef_file(m)
    raw = f.read_bytes()
    a = np.load(f)
    header = np.lib.format.header_data_from_array_1_0(a)
    header["shape"] = (2**40, 8)  # 64 TiB of float64 claimed by a file of a few hundred bytes
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    f.write_bytes(buf.getvalue() + raw[len(raw) - a.nbytes:])


def deep_json(m):  # deeper than the JSON parser goes (a RecursionError before)
    text = json.dumps(_doc(m))
    depth = 100_000
    (m / "model.json").write_text(text[:-2] + ', "deep_": ' + "[" * depth + "0" + "]" * depth + "}}")


def moderately_deep_json(m):  # parses, but deeper than any model save writes
    doc = _doc(m)
    deep = 0
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    doc["state"]["deep_"] = deep
    _write(m, doc)


DAMAGES = {
    "nan-coefficients": (nan_coefficients, ("non-finite", "coef")),
    "negative-gamma": (negative_gamma, ("invalid kernel", "gamma", "-0.5")),
    "nul-in-array-name": (nul_in_array_name, ("arrays/a\\x00.npy", "not a name")),
    "npy-header-claims-64-tib": (huge_npy_header, ("is damaged: its header announces shape (1099511627776, 8) of "
                                                   "float64 (64.0 TiB)",)),
    "json-nested-100000-deep": (deep_json, ("nested", "save it again")),
    "json-nested-past-the-limit": (moderately_deep_json, ("nested more than", "save it again")),
}


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_a_damaged_model_is_refused_in_python(saved, tmp_path, name):
    damage, words = DAMAGES[name]
    m = _copy(saved, tmp_path)
    damage(m)
    with pytest.raises(ModelFileError) as info:
        load(m)
    text = str(info.value)
    assert "\n" not in text and all(w in text for w in words), text
    assert text.count("save it again") == 1, text  # said once: not wrapped in a second message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_a_damaged_model_is_one_error_line_in_the_cli(saved, tmp_path, name):
    damage, words = DAMAGES[name]
    m = _copy(saved, tmp_path)
    damage(m)
    res = CliRunner().invoke(main, ["evaluate", str(m), str(saved / "data.zarr")])
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "Traceback" not in res.output and "out of memory" not in res.output
    assert all(w in lines[0] for w in words), lines[0]


def test_the_undamaged_copy_still_loads(saved, tmp_path):
    m = _copy(saved, tmp_path)
    np.testing.assert_array_equal(load(m).predict(X), load(saved / "good.model").predict(X))
