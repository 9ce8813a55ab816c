"""Object storage (``s3://``) bounded and explained: timeouts, attempts and one clear error each.

s3fs / botocore wait for an endpoint with their own defaults — a 5 s connect and a 15 s read
timeout per attempt, up to 5 attempts in botocore inside up to 5 in s3fs — so an endpoint that
accepts connections and never answers kept ``kmp-dask info s3://...`` running past 300 s, and a
missing credential or a refused endpoint came out as an 83-line botocore traceback. Here:

* :func:`bounded_options` gives every S3 file system we open (the driver's and, through the
  pickled reader's location, the workers') ``connect_timeout`` and ``read_timeout`` of half of
  :func:`storage_timeout` and :data:`ATTEMPTS` attempts in botocore (its "standard" retry mode),
  unless the caller's ``storage_options`` set them (``config_kwargs``); :func:`bound_fs` stops
  s3fs's own retry loop around them (one pass). A silent endpoint then ends after about
  ``storage_timeout()`` seconds.
* :func:`storage_timeout` is dask config ``kmp_dask.storage-timeout`` when set, else dask's
  ``distributed.comm.timeouts.connect`` (30 s by default) — the commands set the first from
  ``--connect-timeout``, so one option bounds the wait for the scheduler and for the store.
* :func:`explained` turns what botocore / s3fs raise at the first contact with a store (its
  existence check, the bucket check before a write) into :class:`StorageCredentialsError`
  (no credentials found, or credentials the server refuses: expired, revoked, wrong),
  :class:`StorageUnreachableError` (refused, unreachable, no answer within the timeout) or
  :class:`StorageAccessDeniedError` (403), each naming the URL, the endpoint and what to change.
  A missing bucket or store was already a ``FileNotFoundError``. The chunk reads on the workers
  (``_zarr.read_checked``) raise the same errors, so a failure mid-fit is one line too.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["bounded_options", "bound_fs", "storage_timeout", "explained", "StorageCredentialsError",
           "StorageUnreachableError", "StorageAccessDeniedError", "StorageRequestError", "ATTEMPTS"]

#: fsspec protocols served by s3fs.
S3_PROTOCOLS = ("s3", "s3a")

ATTEMPTS = 2
"""Attempts botocore makes for one request to an S3 endpoint (the first and one retry)."""

DEFAULT_TIMEOUT = 30.0


class StorageCredentialsError(PermissionError):
    """No credentials were found for an object store."""


class StorageUnreachableError(ConnectionError):
    """An object store's endpoint refused, could not be reached or did not answer in time."""


class StorageAccessDeniedError(PermissionError):
    """An object store answered 403: these credentials may not do that."""


class StorageRequestError(OSError):
    """An object store refused a request with an error kmp_dask has no other name for (e.g. HTTP 400)."""


def storage_timeout() -> float:
    """Seconds an object store may take to connect plus answer one request (all attempts of it)."""
    import dask
    from dask.utils import parse_timedelta

    value = dask.config.get("kmp_dask.storage-timeout", None)
    if value is None:
        value = dask.config.get("distributed.comm.timeouts.connect", DEFAULT_TIMEOUT)
    return float(parse_timedelta(value, "s"))


def bounded_options(url: str, options: dict) -> dict:
    """``options`` for fsspec with the S3 timeouts and attempts of this module (the caller's own
    ``config_kwargs`` entries win); other protocols' options unchanged."""
    if url.split("://", 1)[0] not in S3_PROTOCOLS:
        return options
    t = storage_timeout()
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("connect_timeout", t / ATTEMPTS)
    config.setdefault("read_timeout", t / ATTEMPTS)
    config.setdefault("retries", {"total_max_attempts": ATTEMPTS, "mode": "standard"})
    return {**options, "config_kwargs": config}


def bound_fs(fs):
    """``fs`` with s3fs's own retry loop (5 passes around botocore's attempts) cut to one pass."""
    if type(fs).__module__.split(".")[0] == "s3fs" and getattr(fs, "retries", 1) > 1:
        fs.retries = 1
    return fs


def endpoint(options: dict) -> str:
    """The endpoint a store's requests go to, as the user set it (or 'the default AWS endpoint')."""
    return (options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            or os.environ.get("FSSPEC_S3_ENDPOINT_URL") or "the default AWS endpoint")


def _chain(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _named(exc, *names) -> bool:
    return any(type(e).__name__ in names for e in _chain(exc))


#: S3 error codes of credentials the server no longer (or never) accepts: expired session tokens,
#: deleted or wrong keys. s3fs turns them into a bare ``OSError`` (a traceback in the commands).
CREDENTIAL_CODES = ("ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired", "InvalidToken",
                    "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId")


def _aws_code(exc) -> str | None:
    """The S3 error code of a botocore ``ClientError`` in ``exc``'s chain (None: none)."""
    for e in _chain(exc):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            return str((response.get("Error") or {}).get("Code") or "") or None
    return None


def explain(exc: BaseException, url: str, options: dict) -> BaseException | None:
    """The clear error for ``exc`` raised by a request about ``url`` (None: not one of ours)."""
    where = endpoint(options)
    t = storage_timeout()
    code = _aws_code(exc)
    if code in CREDENTIAL_CODES:
        return StorageCredentialsError(
            f"the object store at {where} refused the credentials for {url!r} ({code}: they expired, were revoked "
            "or are wrong): renew them — AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or "
            "AWS_PROFILE, ~/.aws/credentials) in every process that reads it, or Python storage_options — and run "
            "the command again (a fit started with checkpoint=DIR continues with --resume).")
    if _named(exc, "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
        return StorageCredentialsError(
            f"no credentials for {url!r} at {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, "
            "~/.aws/credentials) in every process that reads it, or in Python storage_options={'key': ..., "
            "'secret': ...} (or {'anon': True} for a public bucket).")
    if _named(exc, "ReadTimeoutError", "ConnectTimeoutError", "FSTimeoutError", "SocketTimeoutError",
              "ServerTimeoutError", "TimeoutError", "timeout"):
        return StorageUnreachableError(
            f"the object store at {where} did not answer a request for {url!r} within {t:g} s ({ATTEMPTS} attempts "
            f"of {t / ATTEMPTS:g} s): check the endpoint (storage_options endpoint_url / AWS_ENDPOINT_URL) and the "
            "network, or give it longer (CLI: --connect-timeout SECONDS; Python: dask config "
            "'kmp_dask.storage-timeout').")
    if _named(exc, "EndpointConnectionError", "ClientConnectorError", "ConnectionRefusedError",
              "ConnectionClosedError", "ServerDisconnectedError", "gaierror"):
        return StorageUnreachableError(
            f"could not connect to the object store at {where} for {url!r} (refused, or no such host: "
            f"{' '.join(str(exc).split())[:200]}): check the endpoint (storage_options endpoint_url / "
            "AWS_ENDPOINT_URL) and that the server is running and reachable from here.")
    if isinstance(exc, PermissionError) or _named(exc, "AccessDenied"):
        return StorageAccessDeniedError(
            f"the object store at {where} denied access to {url!r} ({' '.join(str(exc).split())[:120]}): these "
            "credentials may not read or write there. Check the key and secret (AWS_ACCESS_KEY_ID / AWS_PROFILE, "
            "or storage_options), and the bucket's policy.")
    if code is not None and not isinstance(exc, FileNotFoundError):
        return StorageRequestError(
            f"the object store at {where} refused a request for {url!r} ({' '.join(str(exc).split())[:160]}). An "
            "HTTP 400 without a reason is, on S3, most often a session token that expired: renew the credentials "
            "(AWS_SESSION_TOKEN / AWS_PROFILE, or storage_options) in every process that reads the store, check "
            "the endpoint, and run the command again.")
    return None


@contextlib.contextmanager
def explained(url: str, options: dict):
    """Requests about ``url`` inside the block raise :func:`explain`'s clear errors (others unchanged)."""
    if url.split("://", 1)[0] not in S3_PROTOCOLS:
        yield
        return
    try:
        yield
    except (StorageCredentialsError, StorageUnreachableError, StorageAccessDeniedError, StorageRequestError,
            FileNotFoundError):
        raise
    except Exception as exc:
        clear = explain(exc, url, options)
        if clear is None:
            raise
        raise clear from exc
