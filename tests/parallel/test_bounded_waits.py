"""Area "environment": every wait bounded, every foreseeable environment failure one
clear error — with real sockets, real clusters and (as root) real full / read-only file systems.

The failure catalogue (``tests/_catalogue_environment.py``) holds the one-row cases; here are the
checks it cannot make: how long a wait takes, a worker restart loop, commands whose writes happen
on dask workers, and what is on a real tmpfs before and after.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
import uuid

import numpy as np
import pytest
from _environment_faults import SilentServer, failing_writes, tree
from click.testing import CliRunner

from kmp_dask import KMPClassifier, KMPRegressor, save
from kmp_dask.cli import main as cli
from kmp_dask.cli._main import is_expected_error, one_line_message
from kmp_dask.parallel import _client, connect
from kmp_dask.store import create_store

RNG = np.random.default_rng(29)
X = RNG.normal(size=(300, 4))
Y = (X[:, 0] + X[:, 1] > 0).astype(int)


def _one_error_line(result, exit_code=1) -> str:
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}"
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


# --- the handshake: a port that accepts and never speaks dask ------------------------------------
def test_a_silent_port_fails_within_the_connect_timeout():
    """Before: `--connect-timeout 5` on such a port hung past 130 s (distributed bounds the TCP
    connect, not the handshake read that follows)."""
    with SilentServer() as srv:
        t0 = time.monotonic()
        with pytest.raises(ConnectionError, match="did not answer as a dask scheduler") as info:
            with connect(srv.address, timeout=2):
                pass
        elapsed = time.monotonic() - t0
    assert elapsed < 15, f"took {elapsed:.1f} s with a 2 s timeout"
    assert "within 2 s" in str(info.value)


def test_a_dashboard_port_fails_within_the_connect_timeout(thread_cluster):
    """The probe of the issue: the scheduler's own dashboard (HTTP) port given as its address."""
    port = thread_cluster.scheduler.services["dashboard"].port
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="not its dashboard"):
        with connect(f"tcp://127.0.0.1:{port}", timeout=2):
            pass
    assert time.monotonic() - t0 < 15


# --- workers: none arrive, all leave, or they keep dying -----------------------------------------
class _FakeClient:
    def __init__(self, n):
        self.n = n

    def scheduler_info(self, n_workers=-1):
        return {"workers": {f"tcp://w{i}": {} for i in range(self.n)}}


def test_embedded_workers_that_do_not_arrive_end_in_a_bounded_error():
    watch = _client._RestartWatch("auto")
    t0 = time.monotonic()
    with pytest.raises(_client.NoWorkersError, match=r"only 1 of the embedded dask cluster's 2 workers started "
                                                     r"within 0 s.*kmp_dask.worker-start-timeout"):
        _client._wait_for_embedded_workers(_FakeClient(1), 2, 0.3, watch)
    assert time.monotonic() - t0 < 5
    _client._wait_for_embedded_workers(_FakeClient(2), 2, 0.3, watch)  # all there: no wait


def test_memory_limits_accepted_and_refused():
    ok = ["auto", None, 0, "0", 0.5, "0.5", "2GB", "1.5GiB", 512 * 2**20, "300MB"]
    for value in ok:
        assert _client.check_memory_limit(value) == value or value in ("auto", None)
    for value, words in [("1KB", "below the smallest usable limit"), ("255MiB", "below the smallest usable"),
                         ("-1GB", "a negative size"), ("abc", "is not a memory limit"), (True, "is not a memory"),
                         ([1], "is not a memory limit"), (1e-9, "below the smallest usable limit")]:
        with pytest.raises(ValueError, match=words):
            _client.check_memory_limit(value)


@pytest.mark.slow
def test_a_worker_restart_loop_ends_the_fit_with_its_cause(tmp_path, monkeypatch):
    """`--memory-limit 1KB` sent a nanny into 281 restarts (the floor refuses it now; lowered here
    to reach the loop): the fit ends with WorkerRestartLoopError, in bounded time."""
    monkeypatch.setattr(_client, "MIN_MEMORY_LIMIT", 1)
    store = create_store(tmp_path / "s.zarr", X, Y, chunk_rows=100, classes=["a", "b"])
    t0 = time.monotonic()
    with pytest.raises(_client.WorkerRestartLoopError, match="restarted 5 times .*memory_limit='1KB'"):
        with _client.embedded_cluster(2, memory_limit="1KB", dashboard=False) as client:
            KMPClassifier(n_basis=5, client=client).fit(store.url)
    assert time.monotonic() - t0 < 240


# --- the environment's OSErrors and MemoryError at the command line ------------------------------
@pytest.mark.parametrize("code,words", [(errno.ENOSPC, "No space left on device (ENOSPC)"),
                                        (errno.EROFS, "Read-only file system (EROFS)")])
def test_cli_ingest_and_report_on_a_full_or_read_only_disk(tmp_path, code, words):
    """One `Error:` line saying what to do, and nothing half-written (simulated in this process:
    ingest and report write from the driver)."""
    src = tmp_path / "data.csv"
    src.write_text("a,b,label\n" + "".join(f"{i},{i * 2},{'x' if i % 3 else 'y'}\n" for i in range(50)))
    model = tmp_path / "model"
    save(KMPClassifier(n_basis=3).fit(X, Y), model)
    out = tmp_path / "out"
    out.mkdir()
    before = tree(tmp_path)
    for args in (["ingest", str(src), str(out / "s.zarr"), "--label", "label"],
                 ["report", str(model), "--output", str(out / "r.html")]):
        with failing_writes(out, code):
            result = CliRunner().invoke(cli, args)
        line = _one_error_line(result)
        assert words in line and str(out) in line and "then run the command again" in line, line
        assert tree(tmp_path) == before, f"{args[0]} left something behind"


def test_environment_errors_found_through_causes_and_memory_error():
    inner = OSError(errno.ENOSPC, "No space left on device", "/data/x.zarr/c/0")
    try:
        try:
            raise inner
        except OSError as exc:
            raise RuntimeError("zarr could not write a chunk") from exc
    except RuntimeError as outer:
        assert is_expected_error(outer)
        assert one_line_message(outer).startswith("No space left on device (ENOSPC) writing in '/data/x.zarr/c'")
    mem = MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000, 1000000)")
    assert is_expected_error(mem)
    assert "out of memory (Unable to allocate 7.28 TiB" in one_line_message(mem)
    assert not is_expected_error(OSError(errno.EIO, "I/O error"))  # not the environment's: keeps its traceback


# --- a huge n_basis: capped before anything is sized by it ---------------------------------------
@pytest.mark.parametrize("fit_mode", ["basic", "backfit", "prefit", "refit"])
def test_a_huge_n_basis_is_the_same_fit_as_the_cap(fit_mode):
    """Before: n_basis=10**6 allocated a 7.28 TiB Cholesky factor (MemoryError) before the basis
    stopped at N. The cap is one atom per training row and kernel (+3): same model, same reason."""
    Xs, ys = X[:40], X[:40, 0]
    huge = KMPRegressor(n_basis=10**12, fit_mode=fit_mode, random_state=0).fit(Xs, ys)
    capped = KMPRegressor(n_basis=43, fit_mode=fit_mode, random_state=0).fit(Xs, ys)
    assert huge.n_basis_ == capped.n_basis_ and huge.stop_reason_ == capped.stop_reason_
    assert huge.predict(Xs).tobytes() == capped.predict(Xs).tobytes()


# --- a real full / read-only file system (root: a small tmpfs) -----------------------------------
@pytest.fixture
def small_tmpfs(tmp_path):
    """An 8 kiB tmpfs (root only; skipped elsewhere), unmounted after."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    where = tmp_path / f"fs-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.slow
def test_every_writing_command_on_a_real_full_then_read_only_disk(tmp_path, small_tmpfs):
    """ingest / train / predict / evaluate --output / report onto an 8 kiB tmpfs that fills up,
    then the same remounted read-only (with a model kept there, replaced with --overwrite): one
    `Error:` line each, and the tmpfs holds exactly what it held before."""
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    Xb = rng.normal(size=(3000, 8))
    store = create_store(data / "s.zarr", Xb, (Xb[:, 0] > 0).astype(int), chunk_rows=1000, classes=["a", "b"])
    csv = data / "big.csv"
    np.savetxt(csv, np.c_[Xb, Xb[:, 0] > 0], delimiter=",", header=",".join([f"f{i}" for i in range(8)] + ["y"]),
               comments="")
    model = data / "m"
    save(KMPClassifier(n_basis=20).fit(Xb, (Xb[:, 0] > 0).astype(int)), model)
    fs = small_tmpfs
    run = ["--workers", "1", "-q"]
    commands = [
        ["ingest", str(csv), str(fs / "s.zarr"), "--label", "y"],
        ["train", store.url, "--model", str(fs / "m"), "--n-basis", "20", *run],
        ["predict", str(model), store.url, "--output", str(fs / "p.zarr"), *run],
        ["evaluate", str(model), store.url, "--output", str(fs / "e.json"), *run],
        ["report", str(model), "--output", str(fs / "r.html")],
    ]
    for code, words in ((errno.ENOSPC, "No space left on device (ENOSPC)"), (errno.EROFS, "Read-only file system")):
        if code == errno.EROFS:
            assert subprocess.run(["mount", "-o", "remount,size=1m", str(fs)]).returncode == 0
            shutil.copytree(model, fs / "kept")
            assert subprocess.run(["mount", "-o", "remount,ro", str(fs)]).returncode == 0
            commands.append(["train", store.url, "--model", str(fs / "kept"), "--overwrite", "--n-basis", "5", *run])
        before = tree(fs)
        for args in commands:
            result = CliRunner().invoke(cli, args)
            if code == errno.ENOSPC and args[0] == "evaluate" and result.exit_code == 0:
                os.remove(fs / "e.json")  # the metrics JSON is small enough to fit
                continue
            line = _one_error_line(result)
            assert words in line, (args[0], line)
            assert tree(fs) == before, f"{args[0]} left something behind: {tree(fs)}"
