"""cluster/make-certs.sh + start-scheduler-tls.sh + start-worker-tls.sh on 127.0.0.1: a client with
the certificates computes (and check_versions.py passes over TLS); clients without them are
refused — over tls://, over plain tcp:// and with another CA's certificates."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from _cluster_helpers import CLUSTER, scheduler_address, script_env

pytestmark = [pytest.mark.timeout(420),
              pytest.mark.skipif(shutil.which("openssl") is None, reason="make-certs.sh needs openssl")]


def _make_certs(d):
    out = subprocess.run(["bash", str(CLUSTER / "make-certs.sh"), str(d)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return d / "ca.pem", d / "node.pem", d / "node.key"


_ATTEMPT = """
import sys
from distributed import Client, Security
addr, certs = sys.argv[1], sys.argv[2:]
security = (Security(tls_ca_file=certs[0], tls_client_cert=certs[1], tls_client_key=certs[2],
                     require_encryption=True) if certs else None)
try:
    with Client(addr, security=security, timeout="5s", set_as_default=False) as c:
        c.submit(sum, [1, 2]).result(timeout=10)
except Exception as exc:
    print("refused", type(exc).__name__)
else:
    print("connected")
"""


def _try_client(addr, certs, bound=60):
    """'connected', 'refused' or 'no answer' (still trying after ``bound`` seconds: not connected)."""
    args = [sys.executable, "-c", _ATTEMPT, addr, *([str(c) for c in certs] if certs else [])]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=bound, env=script_env())
    except subprocess.TimeoutExpired:
        return "no answer"
    return "connected" if "connected" in out.stdout.split() else "refused"


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

    # plain clients (no certificates over tls://, plain tcp:// to the TLS-only port) and a client with
    # certificates from another CA never get a working client. How fast dask's own Client gives up
    # varies (under load its plain-tcp handshake to a TLS port can outlast its timeout), so each
    # attempt runs in a process of its own, bounded here; the prompt one-line refusal users see is
    # check_versions.py's, tested above.
    other = _make_certs(tmp_path / "other")
    attempts = [(address, None), (address.replace("tls://", "tcp://"), None), (address, other)]
    for addr, certs in attempts:
        assert _try_client(addr, certs) != "connected", (addr, certs)
