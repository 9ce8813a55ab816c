"""Failure catalogue rows, area "s3": stores on object storage (docs/store.md "Object storage").

The rows run against moto's S3-compatible server (tests/_s3_server.py), started on the first S3 row of
the process, with one bucket holding a good store, a store with a damaged chunk object and a prefix
of a user's objects. Besides the workspace check of every row (nothing on the local disk changed),
each row here checks that nothing in the bucket changed: a changed object raises ``AssertionError``
in place of the expected error, so the row fails. Commands reach the server through the standard AWS
environment variables (set in this process when the first command row runs), as users' commands do.
"""
from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import numpy as np
from _catalogue import Case, Command

from kmp_dask import KMPClassifier
from kmp_dask._overwrite import ForeignTargetError
from kmp_dask.exceptions import StoreExistsError
from kmp_dask.store import StoreCorruptError, create_store, open_store
from kmp_dask.store._remote import StorageAccessDeniedError, StorageCredentialsError, StorageUnreachableError

_RNG = np.random.default_rng(264)
X = _RNG.normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(int)
_SPACE: list = []


def _space() -> SimpleNamespace:
    """The server and its bucket, built once per process."""
    if not _SPACE:
        from _s3_server import s3_server

        s3 = s3_server()
        bucket = s3.new_bucket("kmp-catalogue")
        so = s3.storage_options
        create_store(f"s3://{bucket}/good.zarr", X, Y, chunk_rows=20, storage_options=so)
        create_store(f"s3://{bucket}/corrupt.zarr", X, Y, chunk_rows=20, storage_options=so)
        fs = s3.fs()
        fs.pipe(f"{bucket}/corrupt.zarr/X/c/1/0", b"not a blosc frame")
        fs.pipe(f"{bucket}/foreign/notes.txt", b"a user's notes")
        url = f"s3://{bucket}"
        _SPACE.append(SimpleNamespace(s3=s3, bucket=bucket, so=so, good=f"{url}/good.zarr",
                                      corrupt=f"{url}/corrupt.zarr", foreign=f"{url}/foreign",
                                      missing=f"{url}/missing.zarr"))
    return _SPACE[0]


def _unchanged(fn):
    """``fn(space)`` as a row's ``run``; the bucket must be the same afterwards."""
    def run(ws):
        s = _space()
        before = s.s3.listing(s.bucket)
        try:
            return fn(s)
        finally:
            after = s.s3.listing(s.bucket)
            if after != before:
                raise AssertionError(f"the failure changed objects on the S3 server: "
                                     f"{sorted(set(after) ^ set(before))}")
    return run


def _env(s) -> SimpleNamespace:
    os.environ.update(s.s3.environ())
    _forget_file_systems()
    return s


def _forget_file_systems():
    """Empty fsspec's cache of S3 file systems: its key is the arguments, not the AWS_* variables
    the commands read, so a command would reuse the file system of another row's endpoint."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


_FAULTY: dict = {}


def _faulty(kind: str) -> str:
    """The endpoint of a faulty S3 server of ``kind`` (kept for the process): 'silent' accepts and
    never answers, 'refused' has nothing listening, 'denied' answers 403 AccessDenied."""
    if kind not in _FAULTY:
        from _environment_faults import SilentServer
        from _s3_server import DenyingServer, refused_endpoint

        if kind == "silent":
            srv = SilentServer()
            _FAULTY[kind] = (srv, f"http://127.0.0.1:{srv.port}")
        elif kind == "denied":
            srv = DenyingServer()
            _FAULTY[kind] = (srv, srv.endpoint_url)
        else:
            _FAULTY[kind] = (None, refused_endpoint())
    return _FAULTY[kind][1]


def _open_at(kind: str, seconds: float = 2.0):
    """``open_store`` of an S3 URL on a faulty endpoint, with a ``seconds`` timeout."""
    def run(ws):
        import dask

        with dask.config.set({"kmp_dask.storage-timeout": seconds}):
            open_store("s3://bucket/x.zarr", storage_options={"endpoint_url": _faulty(kind), "key": "k",
                                                              "secret": "s", "skip_instance_cache": True})
    return run


_NO_CREDENTIALS = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/kmp-credentials",
                   "AWS_CONFIG_FILE": "/nonexistent/kmp-config", "AWS_EC2_METADATA_DISABLED": "true"}


def _without_credentials(ws):
    """``open_store`` on moto's endpoint with no credentials anywhere (variables, files, metadata)."""
    from unittest import mock

    s = _space()
    keep = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ACCESS_KEY") and not k.startswith(
        "AWS_SECRET") and k not in ("AWS_SESSION_TOKEN", "AWS_PROFILE")}
    with mock.patch.dict(os.environ, {**keep, **_NO_CREDENTIALS}, clear=True):
        open_store(s.good, storage_options={"endpoint_url": s.s3.endpoint_url, "skip_instance_cache": True})


def _command_at(kind: str, args):
    """A command row whose AWS_ENDPOINT_URL is a faulty endpoint (set in this process)."""
    def make(ws):
        _space()
        os.environ.update(AWS_ENDPOINT_URL=_faulty(kind), AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s")
        _forget_file_systems()
        return args(ws)
    return make


def _command_without_credentials(args):
    def make(ws):
        s = _env(_space())
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.pop(k, None)
        os.environ.update(_NO_CREDENTIALS)  # the next S3 row's _env sets the keys again
        return args(s)
    return make


class _NoS3fs:
    """fsspec as if s3fs were not installed (its registry entry pointed at a missing module)."""

    def __enter__(self):
        reg = importlib.import_module("fsspec.registry")  # fsspec.registry is also a mapping attribute

        self._saved = (reg._registry.pop("s3", None), reg.known_implementations["s3"])
        reg.known_implementations["s3"] = {"class": "kmp_no_such_module.S3FileSystem",
                                           "err": "Install s3fs to access S3"}

    def __exit__(self, *exc):
        reg = importlib.import_module("fsspec.registry")  # fsspec.registry is also a mapping attribute

        cls, reg.known_implementations["s3"] = self._saved
        if cls is not None:
            reg._registry["s3"] = cls


def _without_s3fs(fn):
    def run(ws):
        with _NoS3fs():
            return fn(ws)
    return run


def _args(fn):
    """A command row's arguments; the AWS variables pointing at the server are set first."""
    return lambda ws: fn(_env(_space()))


def _bucket_deleted_mid_read(ws):
    """A store opened, then its bucket deleted (another bucket than the rows' shared one), then read."""
    s = _space()
    bucket = s.s3.new_bucket("kmp-catalogue-gone")
    create_store(f"s3://{bucket}/d.zarr", X, Y, chunk_rows=20, storage_options=s.so)
    store = open_store(f"s3://{bucket}/d.zarr", storage_options=s.so)
    s.s3.fs().rm(bucket, recursive=True)
    KMPClassifier(n_basis=3, client="sync").fit(store)


CASES = [
    Case("s3-bucket-deleted-mid-read", _bucket_deleted_mid_read, FileNotFoundError,
         ("the bucket 'kmp-catalogue-gone-", "of the store 's3://", "no longer exists at http://127.0.0.1:",
          "deleted while the store was read", "run the command again")),
    Case("s3-storage-options-not-dict",
         _unchanged(lambda s: create_store(s.missing, X, Y, storage_options="endpoint_url=http://h:9000,secret=hunter3")),
         TypeError, ("storage_options must be a dict of fsspec options", "'endpoint_url'", "got str",
                     "the value is not shown"), ("hunter3",)),
    Case("s3-storage-options-local-path",
         lambda ws: create_store(ws.root / "new.zarr", X, Y, storage_options={"key": "AKIA1", "secret": "hunter2"}),
         ValueError, ("apply to URLs such as s3://bucket/data.zarr", "new.zarr", "is a local path",
                      "Drop storage_options", "'***'"), ("hunter2", "AKIA1")),
    Case("s3-missing-bucket",
         _unchanged(lambda s: create_store("s3://no-such-bucket-kmp26/x.zarr", X, Y, storage_options=s.so)),
         FileNotFoundError, ("'s3://no-such-bucket-kmp26/x.zarr'", "the bucket 'no-such-bucket-kmp26' does not exist",
                             "http://127.0.0.1:", "aws s3 mb s3://no-such-bucket-kmp26")),
    Case("s3-open-missing",
         _unchanged(lambda s: open_store(s.missing, storage_options=s.so)),
         FileNotFoundError, ("no store at 's3://", "missing.zarr", "check the bucket, the path and endpoint_url"),
         ("testing",)),
    Case("s3-exists",
         _unchanged(lambda s: create_store(s.good, X, Y, storage_options=s.so)),
         StoreExistsError, ("a store already exists at 's3://", "good.zarr", "pass overwrite=True")),
    Case("s3-overwrite-foreign",
         _unchanged(lambda s: create_store(s.foreign, X, Y, overwrite=True, storage_options=s.so)),
         ForeignTargetError, ("foreign", "is not a kmp_dask store", "no zarr.json with the attribute kmp_dask_store",
                              "nothing was deleted")),
    Case("s3-corrupt-chunk-fit",
         _unchanged(lambda s: KMPClassifier(n_basis=3, client="sync").fit(open_store(s.corrupt, storage_options=s.so))),
         StoreCorruptError, ("chunk 1 (rows 20..39)", "array 'X'", "corrupt.zarr/X/c/1/0", "kmp-dask info --verify")),
    Case("s3-without-s3fs", _without_s3fs(lambda ws: open_store("s3://bucket/x.zarr")),
         ImportError, ("'s3://bucket/x.zarr'", "fsspec implementation of s3://", "is not installed",
                       "pip install 'kmp_dask[s3]'")),
    Case("s3-silent-endpoint", _open_at("silent"), StorageUnreachableError,
         ("did not answer a request for 's3://bucket/x.zarr' within 2 s", "2 attempts of 1 s", "endpoint_url",
          "--connect-timeout", "kmp_dask.storage-timeout")),
    Case("s3-refused-endpoint", _open_at("refused"), StorageUnreachableError,
         ("could not connect to the object store at http://127.0.0.1:", "'s3://bucket/x.zarr'",
          "that the server is running")),
    Case("s3-access-denied", _open_at("denied"), StorageAccessDeniedError,
         ("denied access to 's3://bucket/x.zarr'", "key and secret", "bucket's policy")),
    Case("s3-no-credentials", _without_credentials, StorageCredentialsError,
         ("no credentials for 's3://", "good.zarr", "AWS_ACCESS_KEY_ID", "storage_options={'key'", "'anon': True")),
    Case("s3-unknown-protocol", lambda ws: open_store("s4://bucket/x.zarr"),
         ValueError, ("'s4://bucket/x.zarr'", "protocol 's4'", "fsspec does not know", "s3://bucket/data.zarr")),
]

COMMANDS = [
    Command("ingest-s3-overwrite-foreign", _args(lambda s: ["ingest", "sklearn:iris", s.foreign, "--overwrite"]), 1,
            ("foreign", "is not a kmp_dask store", "nothing was deleted")),
    Command("ingest-s3-missing-bucket",
            _args(lambda s: ["ingest", "sklearn:iris", "s3://no-such-bucket-kmp26/i.zarr"]), 1,
            ("the bucket 'no-such-bucket-kmp26' does not exist", "AWS_* environment variables")),
    Command("info-s3-missing-store", _args(lambda s: ["info", s.missing]), 1, ("no store at 's3://", "missing.zarr")),
    Command("train-s3-silent-endpoint",
            _command_at("silent", lambda ws: ["train", "s3://bucket/x.zarr", "--model", str(ws.root / "m"),
                                              "--connect-timeout", "2"]), 1,
            ("Error: the object store at http://127.0.0.1:", "did not answer", "within 2 s", "--connect-timeout")),
    Command("info-s3-refused-endpoint", _command_at("refused", lambda ws: ["info", "s3://bucket/x.zarr"]), 1,
            ("Error: could not connect to the object store", "AWS_ENDPOINT_URL")),
    Command("info-s3-access-denied", _command_at("denied", lambda ws: ["info", "s3://bucket/x.zarr"]), 1,
            ("Error: the object store at", "denied access to 's3://bucket/x.zarr'")),
    Command("info-s3-no-credentials", _command_without_credentials(lambda s: ["info", s.good]), 1,
            ("Error: no credentials for 's3://", "AWS_ACCESS_KEY_ID")),
    Command("info-s3-verify-corrupt", _args(lambda s: ["info", s.corrupt, "--verify", "--no-progress"]), 1,
            ("chunk 1 (rows 20..39)", "array 'X'", "X/c/1/0")),
]
