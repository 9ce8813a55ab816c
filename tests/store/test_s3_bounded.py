"""Object storage bounded and explained (kmp_dask/store/_remote.py): an S3 endpoint that accepts
connections and never answers, one that refuses them, one that denies every request (403), no
credentials at all and a missing bucket each end in one clear error — from Python an exception
naming the URL, the endpoint and the fix, from ``kmp-dask`` one ``Error:`` line — and the silent
endpoint within about twice the timeout (``--connect-timeout`` / ``kmp_dask.storage-timeout``).

Before: the silent endpoint kept ``open_store`` / ``kmp-dask info`` running past 200 s (botocore's
5 attempts of a 15 s read inside s3fs's 5 retries); no credentials and a refused endpoint were
botocore tracebacks (``NoCredentialsError``, ``EndpointConnectionError``).

The servers: a plain socket that accepts and stays silent (``SilentServer``), a closed port, a
tiny HTTP server answering every request with S3's 403 ``AccessDenied``, and moto's S3 server
(tests/_s3_server.py) for the credential-less and missing-bucket cases.
"""

from __future__ import annotations

import time

import dask
import numpy as np
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from _environment_faults import SilentServer  # noqa: E402
from _s3_server import DenyingServer, refused_endpoint  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from kmp_dask.cli import main as cli  # noqa: E402
from kmp_dask.store import create_store, open_store  # noqa: E402
from kmp_dask.store._remote import (  # noqa: E402
    StorageAccessDeniedError,
    StorageCredentialsError,
    StorageUnreachableError,
)

X = np.random.default_rng(44).normal(size=(30, 3))
Y = (X[:, 0] > 0).astype(int)

#: The timeout in these tests (seconds); a silent endpoint must end within 2 × T (+ SLACK for a
#: loaded machine: the first request builds botocore's client, about a second here at load 15).
T = 3.0
SLACK = 5.0


@pytest.fixture
def silent():
    with SilentServer() as srv:
        yield f"http://127.0.0.1:{srv.port}"


@pytest.fixture
def refused():
    return refused_endpoint()


@pytest.fixture
def denying():
    srv = DenyingServer()
    try:
        yield srv.endpoint_url
    finally:
        srv.close()


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """botocore finds no credentials anywhere (variables, files, instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _options(endpoint, credentials=True):
    return {"endpoint_url": endpoint, **({"key": "k", "secret": "s"} if credentials else {}),
            "skip_instance_cache": True}


@pytest.fixture(autouse=True)
def _timeout():
    """The test's timeout; fsspec's cache of S3 file systems emptied around it (its key holds the
    arguments, not the AWS_* variables the commands read, so a command in this process would reuse
    the file system of an earlier test's endpoint)."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    with dask.config.set({"kmp_dask.storage-timeout": T}):
        yield
    s3fs.S3FileSystem.clear_instance_cache()


def _timed(fn):
    t0 = time.monotonic()
    try:
        fn()
    finally:
        _timed.elapsed = time.monotonic() - t0


# --- Python: one clear exception each -------------------------------------------------------------
def test_a_silent_endpoint_ends_within_twice_the_timeout(silent):
    with pytest.raises(StorageUnreachableError) as info:
        _timed(lambda: open_store("s3://bucket/x.zarr", storage_options=_options(silent)))
    assert _timed.elapsed < 2 * T + SLACK, f"took {_timed.elapsed:.1f} s with a {T:g} s timeout"
    for words in ("did not answer", "'s3://bucket/x.zarr'", silent, f"within {T:g} s", "--connect-timeout",
                  "kmp_dask.storage-timeout"):
        assert words in str(info.value), (words, str(info.value))


def test_a_silent_endpoint_as_an_ingest_target_ends_within_twice_the_timeout(silent):
    """The bucket check before a write: s3fs's own ``exists`` of a bucket swallowed every error
    (two probes, then 'does not exist')."""
    with pytest.raises(StorageUnreachableError, match="did not answer"):
        _timed(lambda: create_store("s3://bucket/new.zarr", X, Y, storage_options=_options(silent)))
    assert _timed.elapsed < 2 * T + SLACK, f"took {_timed.elapsed:.1f} s with a {T:g} s timeout"


def test_a_refused_endpoint_is_one_clear_error(refused):
    with pytest.raises(StorageUnreachableError) as info:
        open_store("s3://bucket/x.zarr", storage_options=_options(refused))
    for words in ("could not connect to the object store", refused, "endpoint_url", "server is running"):
        assert words in str(info.value), (words, str(info.value))


def test_denied_access_is_one_clear_error(denying):
    with pytest.raises(StorageAccessDeniedError) as info:
        open_store("s3://bucket/x.zarr", storage_options=_options(denying))
    assert isinstance(info.value, PermissionError)
    for words in ("denied access to 's3://bucket/x.zarr'", denying, "bucket's policy"):
        assert words in str(info.value), (words, str(info.value))


def test_missing_credentials_are_one_clear_error(no_credentials):
    from _s3_server import s3_server

    with pytest.raises(StorageCredentialsError) as info:
        open_store("s3://bucket/x.zarr", storage_options=_options(s3_server().endpoint_url, credentials=False))
    for words in ("no credentials for 's3://bucket/x.zarr'", "AWS_ACCESS_KEY_ID", "storage_options"):
        assert words in str(info.value), (words, str(info.value))


def test_the_caller_s_own_timeouts_win(silent):
    """``storage_options={'config_kwargs': {...}}`` given by the user are kept."""
    from kmp_dask.store._remote import bounded_options

    opts = bounded_options("s3://b/x", {"config_kwargs": {"read_timeout": 99}})
    assert opts["config_kwargs"]["read_timeout"] == 99 and opts["config_kwargs"]["connect_timeout"] == T / 2
    assert bounded_options("gs://b/x", {"a": 1}) == {"a": 1}


# --- the command line: one Error: line, within the bound --------------------------------------------
def _env(endpoint, credentials=True):
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    if credentials:
        env.update(AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s")
    return env


def _one_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}"
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


@pytest.mark.parametrize("args", [["info"], ["train", "--connect-timeout", f"{T:g}", "--model", "MODEL"]],
                         ids=["info", "train"])
def test_commands_on_a_silent_endpoint_end_in_one_line_within_twice_the_timeout(silent, args, tmp_path):
    """``info`` takes the timeout from dask config (30 s by default), ``train`` from --connect-timeout."""
    args = [a.replace("MODEL", str(tmp_path / "m")) for a in args]
    # the same command on a missing local store first: the imports it makes are not the wait measured
    _one_error(CliRunner().invoke(cli, [args[0], str(tmp_path / "missing.zarr"), *args[1:]]))
    with dask.config.set({"kmp_dask.storage-timeout": None if args[0] == "train" else T}):
        t0 = time.monotonic()
        result = CliRunner().invoke(cli, [args[0], "s3://bucket/x.zarr", *args[1:]], env=_env(silent))
        elapsed = time.monotonic() - t0
    line = _one_error(result)
    assert "did not answer" in line and f"within {T:g} s" in line, line
    assert elapsed < 2 * T + SLACK, f"took {elapsed:.1f} s with a {T:g} s timeout"


@pytest.mark.parametrize("case", ["refused", "denied", "no-credentials", "missing-bucket"])
def test_commands_name_the_object_store_s_failure_in_one_line(case, refused, denying, no_credentials, tmp_path):
    import s3fs
    from _s3_server import s3_server

    endpoint = {"refused": refused, "denied": denying}.get(case, s3_server().endpoint_url)
    words = {"refused": "could not connect to the object store", "denied": "denied access",
             "no-credentials": "no credentials for", "missing-bucket": "no store at"}[case]
    env = _env(endpoint, credentials=case != "no-credentials")
    bucket = "no-such-bucket-kmp44"
    for args in (["info", f"s3://{bucket}/x.zarr"],
                 ["train", f"s3://{bucket}/x.zarr", "--model", str(tmp_path / "m"), "--connect-timeout", "5"]):
        s3fs.S3FileSystem.clear_instance_cache()
        line = _one_error(CliRunner().invoke(cli, args, env=env))
        assert words in line and f"s3://{bucket}/x.zarr" in line, (args, line)
