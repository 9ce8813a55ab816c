"""A real S3-compatible server for the object-storage tests: moto's server mode on 127.0.0.1.

One server per test process, started on first use (``s3_server()``, about a second) and stopped at
exit. Buckets are created per test module / workspace with unique names, so tests never share
objects. Python calls reach it through ``storage_options`` (:attr:`MotoS3.storage_options`: the
endpoint and dummy credentials); commands through the standard AWS environment variables
(:meth:`MotoS3.environ`: ``AWS_ENDPOINT_URL`` and dummy keys), as docs/store.md "Object storage"
tells users to do.
"""
from __future__ import annotations

import atexit
import logging
import socket
import uuid

KEY = SECRET = "testing"
_SERVER: list = []


class MotoS3:
    """moto's ThreadedMotoServer on a free port of 127.0.0.1."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request otherwise

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        self.endpoint_url = f"http://127.0.0.1:{port}"

    @property
    def storage_options(self) -> dict:
        """fsspec/s3fs options reaching this server."""
        return {"endpoint_url": self.endpoint_url, "key": KEY, "secret": SECRET}

    def environ(self) -> dict:
        """Environment variables with which s3fs (botocore) in any process reaches this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_ACCESS_KEY_ID": KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}

    def fs(self):
        """An s3fs file system on this server (not from fsspec's instance cache)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def new_bucket(self, prefix: str = "kmp") -> str:
        """Create a bucket with a unique name and return the name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.fs().mkdir(name)
        return name

    def listing(self, bucket: str) -> dict:
        """Every object of ``bucket``: key -> (size, ETag)."""
        fs = self.fs()
        return {p: (info["size"], info.get("ETag")) for p, info in fs.find(bucket, detail=True).items()}

    def stop(self) -> None:
        self._server.stop()


def s3_server() -> MotoS3:
    """The process's server, started on first use."""
    if not _SERVER:
        _SERVER.append(MotoS3())
        atexit.register(_SERVER[0].stop)
    return _SERVER[0]


class DenyingServer:
    """An HTTP server on 127.0.0.1 answering every request as S3 does one these credentials may
    not make: 403 ``AccessDenied``. Closed on :meth:`close`."""

    def __init__(self):
        import http.server
        import threading

        class Deny(http.server.BaseHTTPRequestHandler):
            def _deny(self):
                body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                        b'<Message>Access Denied</Message></Error>')
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _deny

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deny)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="denying-s3").start()
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def refused_endpoint() -> str:
    """An http:// endpoint on 127.0.0.1 where nothing listens (a port just bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
