"""Every configuration value is checked before any step runs, in one line: a pipeline's ``[run]``
counts, an ``inproc://`` scheduler given to a command, a ``memory://`` store handed to a cluster whose
workers are other processes."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from kmp_dask import KMPClassifier, save
from kmp_dask.cli import main
from kmp_dask.evaluation import evaluate, predict_to_file
from kmp_dask.parallel._setup import StoreNotVisibleError
from kmp_dask.pipeline import SpecError, load_spec
from kmp_dask.store import create_store

RNG = np.random.default_rng(2)
X = RNG.normal(size=(120, 3))
Y = (X[:, 0] > 0).astype(int)

SPEC = ('name = "t"\n[data.train]\nsource = "synthetic:classification"\nn_rows = 200\nn_features = 3\n'
        '[model]\nalgorithm = "kmp"\n[model.params]\nn_basis = 3\n[run]\n{run}\n')


def _one_error_line(res, *words):
    lines = [ln for ln in res.output.splitlines() if ln.strip() and not ln.startswith(("Usage:", "Try "))]
    assert res.exit_code in (1, 2) and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "Traceback" not in res.output and all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("run,words", [
    ("workers = -3", ("[run] workers = -3", "1 to 256")),
    ("workers = 0", ("[run] workers = 0",)),
    ("workers = 2.5", ("[run] workers = 2.5",)),
    ('workers = "4"', ("[run] workers = '4'",)),
    ("threads_per_worker = -1", ("[run] threads_per_worker = -1",)),
])
def test_bad_run_counts_are_refused_before_the_data_step(tmp_path, run, words):
    p = tmp_path / "p.toml"
    p.write_text(SPEC.format(run=run))
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert all(w in str(info.value) for w in words), str(info.value)
    res = CliRunner().invoke(main, ["run", str(p), "--output", str(tmp_path / "out")])
    _one_error_line(res, *words)
    assert not (tmp_path / "out").exists()  # no step ran: no run directory, no data written


def test_good_run_counts_pass(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text(SPEC.format(run="workers = 2\nthreads_per_worker = 1"))
    assert load_spec(p)["run"]["workers"] == 2


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfg")
    create_store(root / "d.zarr", X, Y, chunk_rows=40)
    save(KMPClassifier(n_basis=3, random_state=0).fit(X, Y), root / "m.model")
    return root


@pytest.mark.parametrize("address", ["inproc://x", "inproc://127.0.0.1/123/1"])
def test_an_inproc_scheduler_is_one_line(ws, address, no_cluster):
    res = CliRunner().invoke(main, ["evaluate", str(ws / "m.model"), str(ws / "d.zarr"), "--scheduler", address])
    _one_error_line(res, "inproc://", "cannot reach", "tcp://")


@pytest.fixture
def memory_store():
    import uuid

    return create_store(f"memory://kmp-cfg/{uuid.uuid4().hex}/d.zarr", X, Y, chunk_rows=40)


def test_a_memory_store_on_worker_processes_is_refused_before_any_pass(memory_store, process_client, tmp_path):
    with pytest.raises(StoreNotVisibleError, match="lives in this process's memory.*cannot see.*local path"):
        KMPClassifier(n_basis=3, client=process_client).fit(memory_store)
    model = KMPClassifier(n_basis=3).fit(X, Y)
    with pytest.raises(StoreNotVisibleError, match="memory://"):
        evaluate(model, memory_store, client=process_client)
    with pytest.raises(StoreNotVisibleError, match="memory://"):
        predict_to_file(model, memory_store, tmp_path / "p.csv", client=process_client)
    assert not list(tmp_path.iterdir())


def test_a_memory_store_on_worker_threads_of_this_process_still_works(memory_store, thread_client):
    est = KMPClassifier(n_basis=3, random_state=0, client=thread_client).fit(memory_store)
    ref = KMPClassifier(n_basis=3, random_state=0, client="sync").fit(memory_store)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
