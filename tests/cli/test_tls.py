"""The CLI against a TLS-only ``dask scheduler`` + ``dask worker`` with self-made certificates;
a client without them is refused."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from _loaded_machine import stop_in_order

from ._run import dask_cmd as _dask_cli
from ._run import run_cli

pytestmark = pytest.mark.timeout(600)


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d):
    """A CA and one certificate it signs (for 127.0.0.1), used by scheduler, worker and client."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=kmp-dask-test-ca", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "node.pem", "-days", "2", "-extfile", "san.ext", cwd=d)
    return {k: str(d / v) for k, v in (("ca", "ca.pem"), ("cert", "node.pem"), ("key", "node.key"))}


def _address(sched_file):
    """The scheduler file's address, or None while the file is missing or half-written."""
    try:
        return json.loads(sched_file.read_text()).get("address")
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    certs = make_certs(tmp)
    tls = ["--tls-ca-file", certs["ca"], "--tls-cert", certs["cert"], "--tls-key", certs["key"]]
    sched_file = tmp / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = open(tmp / "cluster.log", "w")
    procs = [subprocess.Popen(_dask_cli() + ["scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                                             "--no-dashboard", "--scheduler-file", str(sched_file), *tls],
                              stdout=log, stderr=subprocess.STDOUT, env=env)]
    try:
        deadline = time.monotonic() + 180  # the file appears before its JSON is written: wait until it parses
        while not _address(sched_file):
            assert time.monotonic() < deadline and procs[0].poll() is None, (tmp / "cluster.log").read_text()
            time.sleep(0.1)
        procs.append(subprocess.Popen(
            _dask_cli() + ["worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1", "--nworkers", "2",
                           "--nthreads", "1", "--no-dashboard", "--death-timeout", "60", *tls],
            stdout=log, stderr=subprocess.STDOUT, env=env))
        address = _address(sched_file)
        assert address.startswith("tls://")
        yield address, tls
    finally:
        stop_in_order(procs[::-1])  # the workers before their scheduler
        log.close()


@pytest.fixture(scope="module")
def train_store(tmp_path_factory):
    """One ingested store for the module's tests (they only read it): one ingest process, not three."""
    path = tmp_path_factory.mktemp("tls-data") / "train.zarr"
    run_cli("ingest", "synthetic:classification", path, "--n-rows", 2000, "--chunk-rows", 500)
    return path


def test_train_and_evaluate_over_tls(tmp_path, tls_cluster, train_store):
    address, tls = tls_cluster
    out = run_cli("train", train_store, "--model", tmp_path / "m.kmp", "--n-basis", 5,
                  "--scheduler", address, *tls)
    assert "2 workers" in out.stderr
    ev = run_cli("evaluate", tmp_path / "m.kmp", train_store, "--json", "--scheduler", address, *tls)
    assert json.loads(ev.stdout)["n_rows"] == 2000


@pytest.mark.parametrize("scheme", ["tls", "tcp"])
def test_client_without_certificates_is_refused(tmp_path, tls_cluster, train_store, scheme):
    address, _ = tls_cluster
    addr = address if scheme == "tls" else address.replace("tls://", "tcp://")
    proc = run_cli("train", train_store, "--model", tmp_path / "m.kmp", "--n-basis", 3,
                   "--scheduler", addr, "--connect-timeout", 5, check=False, timeout=120)
    assert proc.returncode in (1, 2), proc.stderr  # 2: refused before connecting (usage), 1: by the scheduler
    err = proc.stderr.strip().splitlines()
    assert err[-1].startswith("Error:") and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "m.kmp").exists()
