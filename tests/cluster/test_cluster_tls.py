"""cluster/make-certs.sh + start-scheduler-tls.sh + start-worker-tls.sh on 127.0.0.1: a client with
the certificates computes (and check_versions.py passes over TLS); clients without them are
refused — over tls:// and over plain tcp:// — with an exception within a bounded timeout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from _cluster_helpers import CLUSTER, scheduler_address, script_env

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("openssl") is None, reason="make-certs.sh needs openssl")]


def _make_certs(d):
    out = subprocess.run(["bash", str(CLUSTER / "make-certs.sh"), str(d)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return d / "ca.pem", d / "node.pem", d / "node.key"


def test_make_certs_refuses_to_overwrite_and_issues_more_from_the_same_ca(tmp_path):
    ca, cert, key = _make_certs(tmp_path)
    assert oct(key.stat().st_mode & 0o777) == "0o600" and oct((tmp_path / "ca.key").stat().st_mode & 0o777) == "0o600"
    again = subprocess.run(["bash", str(CLUSTER / "make-certs.sh"), str(tmp_path)], capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 1 and "exists" in again.stderr
    ca_before = ca.read_bytes()
    other = subprocess.run(["bash", str(CLUSTER / "make-certs.sh"), "--name", "client", str(tmp_path), "10.1.2.3",
                            "node7"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stderr
    assert ca.read_bytes() == ca_before  # same CA
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(tmp_path / "client.pem"), str(cert)],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    text = subprocess.run(["openssl", "x509", "-in", str(tmp_path / "client.pem"), "-noout", "-text"],
                          capture_output=True, text=True, timeout=60).stdout
    assert "IP Address:10.1.2.3" in text and "DNS:node7" in text and "IP Address:127.0.0.1" in text


def test_tls_scripts_accept_certified_clients_and_refuse_others(tmp_path, procs):
    from distributed import Client, Security

    ca, cert, key = _make_certs(tmp_path / "certs")
    sched_file = tmp_path / "scheduler.json"
    sched = procs.start("start-scheduler-tls.sh", "scheduler.log", KMP_TLS_DIR=tmp_path / "certs",
                        KMP_SCHEDULER_PORT=0, KMP_SCHEDULER_FILE=sched_file)
    worker = procs.start("start-worker-tls.sh", "worker.log", KMP_TLS_DIR=tmp_path / "certs",
                         KMP_SCHEDULER_FILE=sched_file, KMP_NWORKERS=1, KMP_MEMORY_LIMIT="1GiB",
                         KMP_LOCAL_DIRECTORY=tmp_path / "scratch")
    procs.wait_for_line(sched, "start-scheduler: ready", timeout=90)
    procs.wait_for_line(worker, "1 worker process(es)", timeout=90)
    assert "--protocol tls --tls-ca-file" in (tmp_path / "scheduler.log").read_text()
    address = scheduler_address(sched_file)
    assert address.startswith("tls://127.0.0.1:")

    security = Security(tls_ca_file=str(ca), tls_client_cert=str(cert), tls_client_key=str(key),
                        require_encryption=True)
    with Client(address, security=security, timeout="30s", set_as_default=False) as client:
        client.wait_for_workers(1, timeout=60)
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6

    ok = subprocess.run([sys.executable, str(CLUSTER / "check_versions.py"), address, "--timeout", "30",
                         "--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)],
                        capture_output=True, text=True, timeout=120, env=script_env())
    assert ok.returncode == 0, ok.stderr
    # check_versions without certificates: a one-line refusal, at once
    no = subprocess.run([sys.executable, str(CLUSTER / "check_versions.py"), "--scheduler-file", str(sched_file),
                         "--timeout", "5"], capture_output=True, text=True, timeout=60, env=script_env())
    assert no.returncode == 2 and "TLS scheduler" in no.stderr, no.stderr

    # plain clients: no certificates over tls://, and plain tcp:// to the TLS-only port
    for addr in (address, address.replace("tls://", "tcp://")):
        t0 = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - TypeError (no SSL context) / OSError / CommClosedError
            Client(addr, timeout="5s", set_as_default=False)
        assert time.monotonic() - t0 < 30
    # a client with certificates from another CA is refused too
    other = _make_certs(tmp_path / "other")
    foreign = Security(tls_ca_file=str(other[0]), tls_client_cert=str(other[1]), tls_client_key=str(other[2]),
                       require_encryption=True)
    t0 = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - the handshake fails: OSError / TimeoutError
        Client(address, security=foreign, timeout="5s", set_as_default=False)
    assert time.monotonic() - t0 < 30
