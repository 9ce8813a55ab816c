"""resolve_client: failed connections leave no global state; the embedded cluster stays on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

from kmp_dask import KMPClassifier  # noqa: E402
from kmp_dask.parallel import resolve_client  # noqa: E402
from kmp_dask.parallel._client import check_scheduler_address  # noqa: E402


def _xy(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)


def _global_state():
    """What a failed connection must not change: default client, dask scheduler setting."""
    from distributed.client import _get_global_client

    return _get_global_client(), dask.config.get("scheduler", None)


def _bad_scheduler_file(tmp_path):
    path = tmp_path / "garbage.json"
    path.write_text("{not json")
    return str(path)


def _empty_address_file(tmp_path):
    path = tmp_path / "noaddr.json"
    path.write_text(json.dumps({"id": "x"}))
    return str(path)


# (id, client value or factory(tmp_path), exception type, words the message must contain)
FAILED_CONNECTIONS = [
    ("malformed-no-port", "localhost", ValueError, ["client='localhost'", "missing port", "tcp://127.0.0.1:8786"]),
    ("malformed-bad-port", "tcp://127.0.0.1:http", ValueError, ["client='tcp://127.0.0.1:http'", "tcp://127.0.0.1:8786"]),
    ("unknown-protocol", "foo://127.0.0.1:8786", ValueError, ["unknown protocol 'foo'", "scheduler file"]),
    ("no-host", "tcp://:8786", ValueError, ["host is missing"]),
    ("port-zero", "tcp://127.0.0.1:0", ValueError, ["port 0"]),
    ("unreachable", "tcp://127.0.0.1:1", ConnectionError, ["tcp://127.0.0.1:1", "within 2 s", "dask scheduler"]),
    ("missing-scheduler-file", lambda p: str(p / "nope" / "scheduler.json"), FileNotFoundError,
     ["no scheduler file", "dask scheduler --scheduler-file"]),
    ("garbage-scheduler-file", _bad_scheduler_file, ValueError, ["not a readable dask scheduler file", "'address'"]),
    ("scheduler-file-no-address", _empty_address_file, ValueError, ["'address'"]),
]


@pytest.fixture
def short_connect_timeout():
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        yield


@pytest.mark.parametrize("case", FAILED_CONNECTIONS, ids=[c[0] for c in FAILED_CONNECTIONS])
def test_failed_connection_leaves_nothing_behind(case, tmp_path, short_connect_timeout):
    _, client, exc_type, words = case
    client = client(tmp_path) if callable(client) else client
    X, y = _xy()
    before, threads = _global_state(), threading.active_count()
    t0 = time.monotonic()
    with pytest.raises(exc_type) as info:
        KMPClassifier(client=client, n_basis=5, random_state=0).fit(X, y)
    assert time.monotonic() - t0 < 15, "a failed connection must fail within a bounded time"
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert _global_state() == before
    deadline = time.monotonic() + 5
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads, "the half-made client's threads must be stopped"
    # a regression once seen: the next fit in the same process (numpy input) works
    ok = KMPClassifier(n_basis=5, random_state=0).fit(X, y)
    assert ok.n_basis_ == 5 and ok.score(X, y) > 0.8


def test_failed_connection_keeps_previous_default_client(thread_cluster, short_connect_timeout):
    from distributed import Client, default_client

    X, y = _xy()
    with Client(thread_cluster) as previous:  # registered as the default client
        for bad in ("localhost", "tcp://127.0.0.1:1"):
            with pytest.raises((ValueError, ConnectionError)):
                KMPClassifier(client=bad, n_basis=3).fit(X, y)
            assert default_client() is previous
        assert KMPClassifier(n_basis=3, random_state=0).fit(X, y).n_basis_ == 3


def test_connected_client_is_closed_and_not_left_as_default(thread_cluster):
    from distributed.client import _get_global_client

    before = _get_global_client()
    with resolve_client(thread_cluster.scheduler_address, in_memory=True) as c:
        assert c.status == "running"
        assert distributed.get_client() is c  # current for the fit (actors bind to it)
    assert c.status == "closed"
    assert _get_global_client() is before


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "tls://host.example:8786",
                                     "tcp://[::1]:8786", "inproc://10.0.0.1/1234/1"])
def test_well_formed_addresses_pass(address):
    assert check_scheduler_address(address) == address


def test_broken_default_client_is_ignored():
    """A user's own failed ``Client("localhost")`` stays registered (distributed's doing); a
    numpy fit must not try to use it. Run in a fresh interpreter: the poison is process-wide."""
    code = textwrap.dedent("""
        import numpy as np
        from distributed import Client
        from kmp_dask import KMPClassifier
        try:
            Client("localhost")
        except ValueError:
            pass
        rng = np.random.default_rng(0)
        X = rng.normal(size=(100, 3)); y = (X[:, 0] > 0).astype(int)
        print("n_basis", KMPClassifier(n_basis=4, random_state=0).fit(X, y).n_basis_)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "n_basis 4" in out.stdout


_SOCKETS_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from kmp_dask import KMPClassifier
    from kmp_dask.parallel import embedded_cluster
    from kmp_dask.store import create_store

    if __name__ == "__main__":
        rng = np.random.default_rng(0)
        X = rng.normal(size=(2000, 3)); y = (X[:, 0] > 0).astype(int)
        store = create_store(sys.argv[1], X, y, chunk_rows=500, classes=[0, 1])
        with embedded_cluster(2) as client:
            clf = KMPClassifier(client=client, n_basis=5, random_state=0).fit(store)
            print("READY", clf.n_basis_, flush=True)
            sys.stdin.readline()
""")


def _inet_sockets(pid):
    import psutil

    root = psutil.Process(pid)
    out = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        out += [(proc.pid, c.status, c.laddr) for c in conns]
    return out


def test_embedded_cluster_sockets_are_loopback_only(tmp_path):
    pytest.importorskip("psutil")
    script = tmp_path / "fit_and_wait.py"
    script.write_text(_SOCKETS_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "s.zarr")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # the fit ran on the cluster, which is still up
        assert line.startswith("READY 5"), (line, proc.stderr.read() if proc.poll() is not None else "")
        sockets = _inet_sockets(proc.pid)
        listening = [s for s in sockets if s[1] == "LISTEN"]
        assert len(listening) >= 4  # scheduler, dashboard, 2 nannies, 2 workers
        exposed = [s for s in sockets if s[2].ip != "127.0.0.1"]
        assert not exposed, f"sockets not on 127.0.0.1: {exposed}"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# -- a script without the __main__ guard -----------------------------------------------------------


def test_embedded_cluster_refused_while_a_worker_process_imports_the_script(monkeypatch):
    import multiprocessing

    from kmp_dask.parallel._client import UnguardedMainError, check_not_importing_main

    check_not_importing_main()  # this process is not importing __main__: nothing happens
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(UnguardedMainError, match=r'if __name__ == "__main__":.*client=\'sync\''):
        check_not_importing_main()


def test_a_script_without_the_main_guard_fails_fast_and_names_the_fix(tmp_path):
    """Without the guard every spawned worker imports the script and asks for a cluster of its own:
    the parent's LocalCluster used to wait for workers that never started (measured: past 300 s, no
    error). Now each worker process ends with UnguardedMainError and the parent with NoWorkersError."""
    script = tmp_path / "unguarded.py"
    script.write_text("from kmp_dask.parallel._client import embedded_cluster\n"
                      "with embedded_cluster(n_workers=1, dashboard=False):\n"
                      "    print('started')\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode != 0 and "started" not in proc.stdout, proc.stdout + proc.stderr
    assert "UnguardedMainError" in proc.stderr and str(script) in proc.stderr, proc.stderr
    assert "NoWorkersError" in proc.stderr and 'if __name__ == "__main__":' in proc.stderr, proc.stderr
    print(f"failed in {time.monotonic() - t0:.1f} s")
