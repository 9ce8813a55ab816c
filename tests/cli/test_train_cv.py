"""``kmp-dask train --cv K`` and a pipeline's ``[model] cv = K``: γ and the size chosen
by cross-validation along the pursuit, the refitted model saved in the open format. In process
(``--scheduler sync``), with the cluster starters swapped for ones that fail the test."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from kmp_dask import KMPClassifierCV, load
from kmp_dask.cli import main
from kmp_dask.estimators import _kmp_cv
from kmp_dask.store import create_store, open_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_cv")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3)) * [1.0, 50.0, 0.02]  # raw features on different scales
    y = (X[:, 0] + X[:, 1] / 50.0 > 0).astype(int)
    create_store(root / "train.zarr", X, y, classes=["no", "yes"], chunk_rows=80)
    return root / "train.zarr"


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_train_cv_saves_the_model_the_python_search_chooses(store_path, tmp_path, no_cluster):
    r = _invoke("train", store_path, "--model", tmp_path / "m", "--cv", 3, "--n-basis", 20, "--random-state", 0,
                "--scheduler", "sync", "--quiet")
    assert r.exit_code == 0, r.output
    saved = load(tmp_path / "m")
    ref = KMPClassifierCV(cv=3, n_basis=20, random_state=0, client="sync").fit(str(store_path))
    assert type(saved).__name__ == "KMPClassifier"
    assert saved.n_basis_ == ref.n_basis_ and saved.get_params()["gamma"] == ref.best_params_["gamma"]
    # a store: the default atoms_per_pass="auto" is k > 1 (no in-process kernel table)
    assert saved.atoms_per_pass == ref.atoms_per_pass_ == _kmp_cv.AUTO_ATOMS_PER_PASS > 1
    X, _ = open_store(store_path).read_range(0, 240)
    assert_array_equal(saved.decision_function(X), ref.decision_function(X))


def test_train_cv_shows_the_search_flags_and_refuses_other_algorithms(store_path, tmp_path, no_cluster):
    r = _invoke("train", "--cv", 3, "--help")
    assert r.exit_code == 0 and "--gammas" in r.output and "kmp-cv" in r.output, r.output
    r = _invoke("train", store_path, "--model", tmp_path / "m", "--cv", 3, "--algorithm", "cvm",
                "--scheduler", "sync")
    assert r.exit_code != 0 and "--cv works with --algorithm kmp only" in r.output, r.output
    for bad in (1, "three"):
        r = _invoke("train", store_path, "--model", tmp_path / "m", "--cv", bad, "--scheduler", "sync")
        assert r.exit_code != 0 and "--cv" in r.output and "--cv auto" in r.output, r.output
    assert not (tmp_path / "m").exists()


def test_train_cv_auto_is_the_estimators_auto(store_path, tmp_path, no_cluster):
    """``--cv auto``: KMPClassifierCV's cv="auto" (5 folds here: 240 rows < 3,000)."""
    r = _invoke("train", store_path, "--model", tmp_path / "m", "--cv", "auto", "--n-basis", 12, "--random-state", 0,
                "--scheduler", "sync", "--quiet")
    assert r.exit_code == 0, r.output
    saved = load(tmp_path / "m")
    ref = KMPClassifierCV(cv="auto", n_basis=12, random_state=0, client="sync").fit(str(store_path))
    assert ref.n_splits_ == 5 and saved.cv_search_["n_splits"] == 5
    assert saved.n_basis_ == ref.n_basis_ and saved.get_params()["gamma"] == ref.best_params_["gamma"]


@pytest.mark.parametrize("value, message", [(1, "model.cv = 1"), ("5", "model.cv = '5'")])
def test_pipeline_model_cv_is_checked(tmp_path, value, message):
    from kmp_dask.pipeline import SpecError, load_spec

    body = '[data.train]\nsource = "synthetic:classification"\nn_rows = 100\n[model]\ncv = {}\n'
    (tmp_path / "p.toml").write_text(body.format(value if isinstance(value, int) else f'"{value}"'))
    with pytest.raises(SpecError, match=message):
        load_spec(tmp_path / "p.toml")
    (tmp_path / "p.toml").write_text(body.format(4).replace("[model]\n", '[model]\nalgorithm = "cvm"\n'))
    with pytest.raises(SpecError, match="model.cv works with algorithm"):
        load_spec(tmp_path / "p.toml")
    for good, text in ((4, "4"), ("auto", '"auto"')):
        (tmp_path / "p.toml").write_text(body.format(text))
        m = load_spec(tmp_path / "p.toml")["model"]
        assert m["algorithm"] == "kmp-cv" and m["params"]["cv"] == good


@pytest.mark.parametrize("flags, message", [(["--kernel", "polynomial"], "constant k(x, x)"),
                                            (["--C", "-1"], "or a float > 0 (the L2-SVM's penalty); got -1")])
def test_cvm_parameters_are_refused_before_a_cluster_starts(store_path, tmp_path, no_cluster, flags, message):
    # --scheduler local would start a cluster (which fails this test): the check must come first
    r = _invoke("train", store_path, "--model", tmp_path / "c", "--algorithm", "cvm", *flags, "--scheduler", "local")
    assert r.exit_code == 1 and message in r.output and "a cluster was started" not in str(r.exception), r.output
    assert not (tmp_path / "c").exists()


class _Killed(Exception):
    """Raised in the search's third (γ, fold) pursuit: the train dies there."""


def _dies_in_call(n, calls, original):
    """A stand-in for ``_CVSearch._fold_fit`` that counts its calls in ``calls`` and raises
    :class:`_Killed` in the ``n``-th (the driver dying inside that pursuit)."""
    def fold_fit(self, *a, **k):
        calls.append(1)
        if len(calls) == n:
            raise _Killed()
        return original(self, *a, **k)
    return fold_fit


def test_train_cv_checkpoint_and_resume_give_the_uninterrupted_model(store_path, tmp_path, no_cluster, monkeypatch):
    """``--cv 3 --checkpoint DIR``: a train that dies in its third (γ, fold) pursuit, then the same
    command with ``--resume``, saves the model of an uninterrupted train (bit for bit); without
    ``--resume`` the checkpoint is refused, and ``--cv`` with ``--sample-weight`` still is."""
    args = ("train", store_path, "--cv", 3, "--n-basis", 12, "--random-state", 0, "--scheduler", "sync", "--quiet")
    assert _invoke(*args, "--model", tmp_path / "ref").exit_code == 0
    calls, original = [], _kmp_cv._CVSearch._fold_fit

    fold_fit = _dies_in_call(3, calls, original)

    with monkeypatch.context() as m:
        m.setattr(_kmp_cv._CVSearch, "_fold_fit", fold_fit)
        r = _invoke(*args, "--model", tmp_path / "m", "--checkpoint", tmp_path / "ck")
    assert isinstance(r.exception, _Killed) and not (tmp_path / "m").exists(), r.output
    r = _invoke(*args, "--model", tmp_path / "m", "--checkpoint", tmp_path / "ck")
    assert r.exit_code != 0 and "pass resume=True to continue it" in r.output + str(r.exception)
    r = _invoke(*args, "--model", tmp_path / "m", "--checkpoint", tmp_path / "ck", "--resume")
    assert r.exit_code == 0, r.output
    ref, resumed = load(tmp_path / "ref"), load(tmp_path / "m")
    assert resumed.cv_search_["best_n_basis"] == ref.cv_search_["best_n_basis"]
    assert_array_equal(resumed.cv_search_["scores"], ref.cv_search_["scores"])
    assert np.array_equal(resumed.dual_coef_, ref.dual_coef_) and np.array_equal(resumed.intercept_, ref.intercept_)
    (tmp_path / "w.npy").write_bytes(b"")
    r = _invoke(*args, "--model", tmp_path / "w", "--sample-weight", tmp_path / "w.npy")
    assert r.exit_code != 0 and "--cv cannot be combined with --sample-weight" in r.output, r.output


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pipeline_cv_step_killed_in_its_search_resumes_to_the_same_model(tmp_path, monkeypatch):
    """A pipeline's ``[model] cv = 3`` step gets the run's checkpoint: a run that dies in the
    search's third pursuit, resumed, saves the model of an uninterrupted run (bit for bit)."""
    from kmp_dask.pipeline import load_spec, run_pipeline

    (tmp_path / "p.toml").write_text('[data.train]\nsource = "synthetic:classification"\nn_rows = 200\n'
                                     '[model]\ncv = 3\n[model.params]\nn_basis = 12\nrandom_state = 0\n')
    spec = load_spec(tmp_path / "p.toml")
    quiet = {"client": "sync", "log": lambda *a, **k: None}
    calls, original = [], _kmp_cv._CVSearch._fold_fit
    counted = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    with monkeypatch.context() as m:
        m.setattr(_kmp_cv._CVSearch, "_fold_fit", counted)
        run_pipeline(spec, tmp_path / "ref", **quiet)
    n_units = len(calls)
    calls.clear()

    fold_fit = _dies_in_call(3, calls, original)

    with monkeypatch.context() as m:
        m.setattr(_kmp_cv._CVSearch, "_fold_fit", fold_fit)
        with pytest.raises(_Killed):
            run_pipeline(spec, tmp_path / "run", **quiet)
    assert any((tmp_path / "run" / "checkpoint").glob("unit-*.ckpt"))  # the search's first two pursuits
    calls.clear()
    with monkeypatch.context() as m:
        m.setattr(_kmp_cv._CVSearch, "_fold_fit", counted)
        run_pipeline(spec, tmp_path / "run", resume=True, **quiet)
    ref, resumed = load(tmp_path / "ref" / "model"), load(tmp_path / "run" / "model")
    assert np.array_equal(resumed.dual_coef_, ref.dual_coef_) and resumed.cv_search_["best_n_basis"] == \
        ref.cv_search_["best_n_basis"]
    assert_array_equal(resumed.cv_search_["scores"], ref.cv_search_["scores"])
    assert len(calls) == n_units - 2  # the two recorded pursuits are not fitted again
