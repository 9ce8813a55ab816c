"""The in-process CLI: ``--scheduler sync|auto|local``, help per algorithm with nothing
cut, progress and fit times of every family, the kernel-width check that stops ``train``, and
``ingest --no-header``. Everything here runs in this process, with the cluster starters swapped
for ones that fail the test: a command that should not start a cluster cannot."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from kmp_dask import load
from kmp_dask.cli import main
from kmp_dask.cli._where import AUTO_CLUSTER_BYTES, Where, mode
from kmp_dask.store import create_store, open_store


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("inproc")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    create_store(root / "train.zarr", X, y, classes=["no", "yes"], chunk_rows=100)
    return root, X, y


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# -- where a command runs ----------------------------------------------------------------------


def test_auto_runs_in_process_below_the_threshold_and_starts_a_cluster_above():
    assert mode(Where(), 10) == "sync" and mode(Where(), None) == "sync"
    assert mode(Where(), AUTO_CLUSTER_BYTES) == "sync" and mode(Where(), AUTO_CLUSTER_BYTES + 1) == "local"
    assert mode(Where(scheduler="auto", workers=2), 10) == "local"  # --workers asks for the cluster
    assert mode(Where(scheduler="sync"), 10**12) == "sync" and mode(Where(scheduler="local"), 1) == "local"
    assert mode(Where(scheduler="tcp://127.0.0.1:8786"), 1) == "address"


def test_scheduler_sync_fits_evaluates_and_predicts_without_a_cluster(ws, tmp_path, no_cluster):
    root, X, y = ws
    for scheduler in ("sync", "auto"):
        model = tmp_path / f"{scheduler}.kmp"
        r = _invoke("train", root / "train.zarr", "--model", model, "--n-basis", 8, "--gamma", 0.5,
                    "--random-state", 0, "--scheduler", scheduler)
        assert r.exit_code == 0, r.output
        assert "in process, no cluster" in r.output and "8 basis functions" in r.output
    est = load(tmp_path / "sync.kmp")
    assert_array_equal(load(tmp_path / "auto.kmp").predict(X), est.predict(X))
    r = _invoke("evaluate", tmp_path / "sync.kmp", root / "train.zarr", "--json", "--scheduler", "sync")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["accuracy"] == pytest.approx(np.mean(est.predict(X) == np.array(["no", "yes"])[y]))
    r = _invoke("predict", tmp_path / "sync.kmp", root / "train.zarr", "--output", tmp_path / "p.csv", "--quiet")
    assert r.exit_code == 0, r.output
    assert_array_equal(pd.read_csv(tmp_path / "p.csv")["prediction"].to_numpy(dtype=object), est.predict(X))


@pytest.mark.parametrize("args,needle", [
    (["--gamma", "abc"], "'abc' is not a number"),
    (["--gamma", "-1"], "gamma"),
    (["--kernel", "rbff"], "Unknown kernel 'rbff'"),
    (["--algorithm", "cvm", "--gamma", "abc"], "'abc' is not a number"),
    (["--algorithm", "skpca", "--kernel", "rbff"], "Unknown kernel"),
    (["--fit-mode", "fast"], "fit_mode"),
])
def test_bad_parameter_is_refused_before_a_cluster_starts(ws, tmp_path, no_cluster, args, needle):
    root, _, _ = ws
    r = _invoke("train", root / "train.zarr", "--model", tmp_path / "m", "--scheduler", "local", *args)
    assert r.exit_code != 0 and "AssertionError" not in r.output, r.output
    assert r.output.count("Error") == 1 and needle in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "m").exists()


def test_tls_options_need_an_address(ws, tmp_path):
    root, _, _ = ws
    (tmp_path / "ca.pem").write_text("x")
    r = _invoke("train", root / "train.zarr", "--model", tmp_path / "m", "--scheduler", "sync",
                "--tls-ca-file", tmp_path / "ca.pem")
    assert r.exit_code != 0 and "tls://" in r.output, r.output


# -- help -------------------------------------------------------------------------------------


def test_plain_train_help_lists_the_algorithms_and_no_parameter_flags():
    r = _invoke("train", "--help")
    assert r.exit_code == 0, r.output
    assert "kmp-dask train --algorithm NAME --help" in r.output
    for name in ("kmp", "cvm", "mmda", "skpca"):
        assert f"\n    {name} " in r.output, r.output
    options = r.output.split("Algorithms (")[0]  # the epilog's examples name flags too
    assert "--n-basis" not in options and "--max-core" not in options and "--scheduler" in options


@pytest.mark.parametrize("algorithm,has,lacks", [
    ("cvm", ["--C ", "--max-core", "--eps", "--gamma"], ["--n-basis", "--n-components", "--fit-mode"]),
    ("mmda", ["--n-components", "--C "], ["--n-basis", "--rank-tol"]),
    ("skpca", ["--n-components", "--rank-tol"], ["--C ", "--n-basis", "--max-core"]),
    ("kmp", ["--n-basis", "--fit-mode", "--loss"], ["--max-core", "--rank-tol"]),
])
def test_train_help_per_algorithm_shows_its_flags_only(algorithm, has, lacks):
    r = _invoke("train", "--algorithm", algorithm, "--help")
    assert r.exit_code == 0, r.output
    options = r.output.split("Algorithms (")[0]  # the epilog's examples name flags too
    assert f"Parameters of --algorithm {algorithm}" in options
    assert all(h in options for h in has), options
    assert not any(x in options for x in lacks), options
    assert "--model" in options and "--scheduler" in options  # the common options


def test_config_files_algorithm_chooses_the_flags(ws, tmp_path):
    (tmp_path / "c.toml").write_text('algorithm = "cvm"\n')
    r = _invoke("train", "--config", tmp_path / "c.toml", "--help")
    options = r.output.split("Algorithms (")[0]
    assert "Parameters of --algorithm cvm" in options and "--n-basis" not in options, r.output


@pytest.mark.parametrize("algorithm", ["kmp", "cvm", "mmda", "skpca"])
def test_no_help_line_is_cut_mid_sentence(algorithm):
    from kmp_dask.cli._params import param_flags

    for name, text in param_flags(algorithm):
        assert text, f"--{name} of {algorithm} has no help"
        assert text.rstrip()[-1] in ".)", f"--{name} of {algorithm}: {text!r}"
        assert "``" not in text and ":class:" not in text, text


def test_command_list_has_no_cut_line():
    r = _invoke("--help")
    commands = r.output.split("Commands:")[1]
    assert r.exit_code == 0 and "..." not in commands, r.output
    for name in ("train", "evaluate", "predict", "compress", "report", "run", "ingest", "info", "demo"):
        assert f"  {name} " in r.output


def test_help_imports_no_estimator_and_no_dask_distributed():
    """``kmp-dask --help`` and ``train --help`` are fast: they import neither scikit-learn nor
    distributed (measured by what a fresh process has imported, robust on a loaded machine)."""
    code = ("import sys\nfrom click.testing import CliRunner\nfrom kmp_dask.cli import main\n"
            "for args in (['--help'], ['train', '--help']):\n"
            "    assert CliRunner().invoke(main, args).exit_code == 0\n"
            "print(sorted(m for m in ('sklearn', 'distributed', 'zarr', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# -- the kernel-width check stops train --------------------------------------------------------


def test_kernel_width_warning_stops_train_unless_force(ws, tmp_path, no_cluster):
    root, _, _ = ws
    base = ["train", root / "train.zarr", "--model", tmp_path / "m.kmp", "--n-basis", 5, "--gamma", 1e6,
            "--random-state", 0]
    r = _invoke(*base)
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert r.exit_code == 1 and len(errors) == 1, r.output
    assert "kernel width does not fit" in errors[0] and "--force" in errors[0] and "Nothing was saved" in errors[0]
    assert not (tmp_path / "m.kmp").exists()
    r = _invoke(*base, "--force")
    assert r.exit_code == 0, r.output
    assert load(tmp_path / "m.kmp").n_basis_ == 5
    shown = [ln for ln in r.output.splitlines() if "KernelWidthWarning" in ln]  # one line, no Python file
    assert len(shown) == 1 and shown[0].startswith("Warning (KernelWidthWarning): "), r.output
    assert ".py:" not in r.output, r.output


# -- progress and fit times of every family -----------------------------------------------------


@pytest.mark.parametrize("algorithm,stage,size", [
    ("cvm", "CVMClassifier core set", "core vectors"),
    ("mmda", "MMDA core set", "features on"),
    ("skpca", "sparse kpca", "components"),
])
def test_every_family_reports_progress_and_records_its_fit_time(tmp_path, no_cluster, algorithm, stage, size):
    from kmp_dask.report._models import fit_time

    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 2))
    create_store(tmp_path / "t.zarr", X, (X[:, 0] > 0).astype(int), classes=["a", "b"])
    extra = {"cvm": [], "mmda": ["--n-components", 2], "skpca": ["--n-components", 6]}[algorithm]
    r = _invoke("train", tmp_path / "t.zarr", "--model", tmp_path / "m", "--algorithm", algorithm, "--gamma", 0.5,
                "--random-state", 0, "--log-json", tmp_path / "log.jsonl", "--scheduler", "sync", *extra)
    assert r.exit_code == 0, r.output
    model = load(tmp_path / "m")
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    inner = [x for x in lines if x["stage"] == stage]
    if algorithm == "skpca":
        assert len(inner) == model.n_components_ == 6
    else:  # one line per core-set iteration: as many as the binary problems' iterations
        problems = [x for x in lines if x["stage"] == stage.replace(" core set", "")]
        assert len(problems) == 1 and len(inner) == problems[0]["n_iter"] > 0, (len(inner), problems)
        assert {x["problem"] for x in inner} == {0} and inner[-1]["n_core"] <= problems[0]["n_core"]
        if algorithm == "cvm":
            assert len(inner) == int(np.sum(model.n_iter_))
    assert fit_time(model) != "not recorded" and model.fit_seconds_ > 0
    assert size in r.output
    if algorithm == "cvm":
        assert f"{model.expansion_.n_vectors} core vectors" in r.output


# -- ingest --no-header ---------------------------------------------------------------------------


def test_no_header_names_columns_by_position(tmp_path, no_cluster):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3)).round(6)
    labels = np.where(X[:, 0] > 0, "up", "down")
    pd.DataFrame({"l": labels, "a": X[:, 0], "b": X[:, 1], "c": X[:, 2]}).to_csv(
        tmp_path / "raw.csv", index=False, header=False)
    r = _invoke("ingest", tmp_path / "raw.csv", tmp_path / "raw.zarr", "--no-header", "--label", 0, "--no-progress")
    assert r.exit_code == 0, r.output
    st = open_store(tmp_path / "raw.zarr")
    Xs, ys = st.read_range(0, st.n_rows)
    assert st.n_rows == 40 and st.attrs["classes"] == ["down", "up"]  # the first line is data
    assert_array_equal(Xs, X)
    assert_array_equal(np.asarray(st.attrs["classes"])[ys], labels)
    # without --no-header the first line is taken as the header: one row fewer
    r = _invoke("ingest", tmp_path / "raw.csv", tmp_path / "h.zarr", "--label", 0, "--no-progress")
    assert r.exit_code == 0 and open_store(tmp_path / "h.zarr").n_rows == 39, r.output
    r = _invoke("ingest", "keel:banana", tmp_path / "k.zarr", "--no-header")
    assert r.exit_code == 1 and "--no-header" in r.output and "applies to csv" in r.output, r.output


def test_pipeline_run_scheduler_is_checked_and_used(tmp_path, monkeypatch):
    from kmp_dask.cli._run import _where_for
    from kmp_dask.pipeline import SpecError, load_spec

    body = '[data.train]\nsource = "synthetic:classification"\nn_rows = 100\n[model]\n[run]\nscheduler = "{}"\n'
    (tmp_path / "p.toml").write_text(body.format("bogus"))
    with pytest.raises(SpecError, match="scheduler = 'bogus'"):
        load_spec(tmp_path / "p.toml")
    (tmp_path / "p.toml").write_text(body.format("sync").replace("n_rows = 100", f"n_rows = {10**7}"))
    where, nbytes = _where_for(load_spec(tmp_path / "p.toml"), Where())
    assert nbytes == 10**7 * 54 * 4 and mode(where, nbytes) == "sync"  # [run] says sync, whatever the size
    (tmp_path / "p.toml").write_text(body.format("auto").replace("n_rows = 100", f"n_rows = {10**7}"))
    where, nbytes = _where_for(load_spec(tmp_path / "p.toml"), Where())
    assert mode(where, nbytes) == "local"
    where, nbytes = _where_for(load_spec(tmp_path / "p.toml"), Where(scheduler="sync"))  # the flag wins
    assert mode(where, nbytes) == "sync"
