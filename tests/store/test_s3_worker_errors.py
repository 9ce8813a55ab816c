"""Object-store failures met by the dask workers while they read a store's chunks — after the
driver opened it: the workers have no credentials, their endpoint refuses connections, it denies
every request (403); and, mid-pass (the worker's read held at a gate while the world changes), the
credentials expire, the endpoint dies, the bucket is deleted. Each is one ``Error:`` line naming
the store and the fix (store/_remote.py's errors).

The first three were one clear line before too (the worker's first contact, opening the store,
was already explained); they guard it. Mid-pass, before: an expired token was s3fs's bare
``OSError`` (a traceback in the commands), a dead endpoint botocore's ``EndpointConnectionError`` —
not an ``OSError``, so ``read_checked`` took it for a chunk that failed to decode —, and a deleted
bucket read as missing chunks ("the store is damaged").

A real cluster: ``dask scheduler`` + one ``dask worker`` subprocess on 127.0.0.1 (tests/_one_worker.py),
the worker with its own AWS environment; moto's S3 server (tests/_s3_server.py).
"""

from __future__ import annotations

import http.client
import http.server
import os
import subprocess
import threading

import numpy as np
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")
pytest.importorskip("distributed")

from _loaded_machine import WORKER_WAIT  # noqa: E402
from _one_worker import OneWorker, gate, gate_env, kmp_dask_cli, wait_for_file  # noqa: E402
from _s3_server import DenyingServer, refused_endpoint, s3_server  # noqa: E402

from kmp_dask.store import create_store  # noqa: E402

X = np.random.default_rng(45).normal(size=(300, 3))
Y = (X[:, 0] > 0).astype(int)


def _no_credentials(tmp_path) -> dict:
    return {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None,
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "no-config"), "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def s3_store(tmp_path):
    server = s3_server()
    bucket = server.new_bucket("kmp-worker-reads")
    url = f"s3://{bucket}/data.zarr"
    create_store(url, X, Y, chunk_rows=100, storage_options=server.storage_options)
    model = tmp_path / "m"
    local = create_store(tmp_path / "local.zarr", X, Y, chunk_rows=100)
    out = subprocess.run(kmp_dask_cli() + ["train", local.url, "--model", str(model), "--scheduler", "sync",
                                           "--n-basis", "5", "-q"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return server, bucket, url, str(model)


def _run(cmd, cluster, env):
    proc = subprocess.Popen(cmd + ["--scheduler", cluster.scheduler_file, "--connect-timeout", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return proc


def _one_line(proc) -> str:
    try:
        out, _ = proc.communicate(timeout=WORKER_WAIT / 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=60)
        pytest.fail(f"still running after {WORKER_WAIT / 2:.0f} s: {out[-2000:]}")
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 1 and len(errors) == 1 and "Traceback" not in out, out
    return errors[0]


def _driver_env(server) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **server.environ(), "OMP_NUM_THREADS": "1", "DASK_KMP_DASK__STORAGE_TIMEOUT": "4"}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", ["no-credentials", "refused", "denied"])
def test_workers_that_cannot_read_the_store_give_one_clear_line(tmp_path, s3_store, case):
    server, _, url, model = s3_store
    denying = DenyingServer() if case == "denied" else None
    worker_env = {**server.environ(), "DASK_KMP_DASK__STORAGE_TIMEOUT": "4"}
    if case == "no-credentials":
        worker_env.update(_no_credentials(tmp_path))
    elif case == "refused":
        worker_env["AWS_ENDPOINT_URL"] = refused_endpoint()
    else:
        worker_env["AWS_ENDPOINT_URL"] = denying.endpoint_url
    cluster = OneWorker(tmp_path / "cluster", worker_env=worker_env)
    try:
        line = _one_line(_run(kmp_dask_cli() + ["evaluate", model, url], cluster, _driver_env(server)))
    finally:
        cluster.close()
        if denying is not None:
            denying.close()
    words = {"no-credentials": ("no credentials for", url, "AWS_ACCESS_KEY_ID"),
             "refused": ("could not connect to the object store", url),
             "denied": ("denied access to", url)}[case]
    for w in words:
        assert w in line, (w, line)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_bucket_deleted_while_the_workers_read_it_is_one_clear_line(tmp_path, s3_store):
    server, bucket, url, model = s3_store
    module, reading, go = gate(tmp_path / "gate")
    cluster = OneWorker(tmp_path / "cluster", worker_env={**server.environ(), **gate_env(tmp_path / "gate")},
                        preload=module)
    try:
        proc = _run(kmp_dask_cli() + ["evaluate", model, url], cluster,
                    {**_driver_env(server), **gate_env(tmp_path / "gate")})
        wait_for_file(reading, proc)
        server.fs().rm(bucket, recursive=True)  # the bucket and every object in it
        go.touch()
        line = _one_line(proc)
    finally:
        go.touch()
        cluster.close()
    for w in (f"the bucket {bucket!r}", "no longer exists", url):
        assert w in line, (w, line)


class SwitchableProxy:
    """An HTTP proxy on 127.0.0.1 in front of moto's server: ``mode`` "pass" forwards each request,
    "expired" answers as S3 does a session token past its expiry (400 ``ExpiredToken``), and
    :meth:`die` closes it (connections refused from then on)."""

    def __init__(self, target: str):
        host, port = target.rsplit("//", 1)[1].split(":")
        proxy = self
        self.mode = "pass"

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.mode == "expired":
                    data = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code>'
                            b'<Message>The provided token has expired.</Message></Error>')
                    self.send_response(400)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)) if self.command != "HEAD"
                                 else resp.getheader("Content-Length", "0"))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="s3-proxy").start()
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def die(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", ["credentials-expire", "endpoint-dies"])
def test_credentials_that_expire_or_an_endpoint_that_dies_mid_pass_is_one_clear_line(tmp_path, s3_store, case):
    server, _, url, model = s3_store
    proxy = SwitchableProxy(server.endpoint_url)
    module, reading, go = gate(tmp_path / "gate")
    worker_env = {**server.environ(), "AWS_ENDPOINT_URL": proxy.endpoint_url, "DASK_KMP_DASK__STORAGE_TIMEOUT": "4",
                  **gate_env(tmp_path / "gate")}
    cluster = OneWorker(tmp_path / "cluster", worker_env=worker_env, preload=module)
    try:
        proc = _run(kmp_dask_cli() + ["evaluate", model, url], cluster,
                    {**_driver_env(server), **gate_env(tmp_path / "gate")})
        wait_for_file(reading, proc)
        if case == "credentials-expire":
            proxy.mode = "expired"
        else:
            proxy.die()
        go.touch()
        line = _one_line(proc)
    finally:
        go.touch()
        cluster.close()
        if case == "credentials-expire":
            proxy.die()
    words = {"credentials-expire": ("refused a request for", url, "session token that expired", "AWS_SESSION_TOKEN"),
             "endpoint-dies": ("could not connect to the object store", url, proxy.endpoint_url)}[case]
    for w in words:
        assert w in line, (w, line)
