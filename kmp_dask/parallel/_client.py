"""Choosing where a fit runs: in-process, an existing dask client, or an embedded LocalCluster.

The ``client`` argument of every estimator goes through :func:`resolve_client`:

``None`` (default)
    Use the active ``distributed`` client if there is one (and it is connected). Otherwise
    numpy input runs in-process (small data, no cluster needed) and store / dask input starts
    an embedded ``LocalCluster`` of processes (one single-threaded worker per core, the laptop
    default), closed again when the fit ends.
``"sync"``
    Always in-process, whatever the input.
``"embedded"``
    Always an embedded ``LocalCluster`` of processes. Scheduler, workers and dashboard listen
    on 127.0.0.1 only.
a ``distributed.Client``
    Used as is; never closed by us.
a string address (``"tcp://host:8786"``) or the path of a scheduler file (``.json``)
    A client is connected for the fit and closed afterwards (the cluster stays). The address
    is checked before anything is started; a missing scheduler file fails at once; the
    connection waits at most ``distributed.comm.timeouts.connect`` (30 s by default).

Clients made here are never registered as dask's global default client: they are made
*current* (``Client.as_current``) for the duration of the fit only. A connection that fails
is closed again, so a failed fit leaves no client or dask configuration behind and the next
fit in the same process is unaffected.
"""

from __future__ import annotations

import contextlib
import json
import os

__all__ = ["resolve_client", "embedded_cluster", "connect", "check_client", "check_scheduler_address"]

#: Seconds allowed to close a client (a half-made one included); closing never blocks longer.
CLOSE_TIMEOUT = 10.0

_FIX = (
    "Pass None (local default), 'sync', 'embedded', a distributed.Client, a scheduler address "
    "such as 'tcp://127.0.0.1:8786' (printed by `dask scheduler`), or the path of a scheduler "
    "file written by `dask scheduler --scheduler-file scheduler.json`."
)


def _connect_timeout(timeout) -> float:
    """Seconds to wait for a scheduler: ``timeout`` or dask's ``distributed.comm.timeouts.connect``."""
    import dask
    from dask.utils import parse_timedelta

    if timeout is None:
        timeout = dask.config.get("distributed.comm.timeouts.connect")
    return float(parse_timedelta(timeout, "s"))


@contextlib.contextmanager
def embedded_cluster(n_workers: int | None = None, *, threads_per_worker: int = 1, memory_limit="auto",
                     local_directory=None, dashboard: bool = True, timeout=None):
    """A process ``LocalCluster`` and its client, closed on exit.

    Defaults are the laptop's: one single-threaded worker per core (at most 8), dask's
    ``memory_limit="auto"`` (the machine's memory shared between the workers). Every socket
    of the cluster (scheduler, nannies, workers, dashboard) listens on 127.0.0.1. The client
    is current only inside the ``with`` block and is never registered as dask's global
    default client.
    """
    from distributed import LocalCluster

    n = n_workers or max(1, min(os.cpu_count() or 1, 8))
    kw = {"local_directory": str(local_directory)} if local_directory is not None else {}
    with LocalCluster(
        n_workers=n,
        threads_per_worker=int(threads_per_worker),
        memory_limit=memory_limit,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0" if dashboard else None,
        **kw,
    ) as cluster:
        with _new_client(cluster, _connect_timeout(timeout), what="the embedded LocalCluster") as client:
            yield client


def check_scheduler_address(address: str, *, name: str = "client", fix: str = _FIX) -> str:
    """Return ``address`` if it is a well-formed dask scheduler address, else raise.

    Parameters
    ----------
    address : str
        ``"tcp://host:port"``, ``"tls://host:port"``, ``"host:port"`` (tcp) or another
        protocol distributed knows (``inproc://``, ``ws://``, ``ucx://``).
    name : str, default="client"
        Argument name used in the message.
    fix : str, optional
        How to fix it (the message's last sentence).

    Raises
    ------
    ValueError
        Naming the argument, the value received and what a valid value looks like.
    """
    from distributed.comm import parse_address, parse_host_port
    from distributed.comm.registry import backends

    def bad(reason):
        raise ValueError(f"{name}={address!r} is not a dask scheduler address: {reason}. {fix}")

    if not address.strip() or address != address.strip():
        bad("it is empty or has leading/trailing spaces")
    try:
        scheme, loc = parse_address(address)
    except ValueError as exc:
        bad(str(exc))
    if scheme not in backends:
        bad(f"unknown protocol {scheme!r} (known: {', '.join(sorted(backends))})")
    if scheme in ("tcp", "tls", "ws", "wss", "ucx"):
        try:
            host, port = parse_host_port(loc)
        except ValueError as exc:
            bad(f"{exc}; write host:port, e.g. 'tcp://{loc or '127.0.0.1'}:8786'")
        if not host:
            bad("the host is missing")
        if not 0 < int(port) < 65536:
            bad(f"port {port} is not in 1..65535")
    return address


def _is_scheduler_file(client: str) -> bool:
    return client.endswith(".json") or ("://" not in client and os.path.isfile(client))


def _read_scheduler_file(path: str) -> str:
    """The scheduler address recorded in a scheduler file (no waiting for the file to appear)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"client={path!r}: no scheduler file at {os.path.abspath(path)!r}. Start the scheduler "
            "first with `dask scheduler --scheduler-file PATH`, check the path, or pass an address "
            "such as 'tcp://127.0.0.1:8786'."
        )
    try:
        with open(path, encoding="utf-8") as fh:
            address = json.load(fh)["address"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"client={path!r} is not a readable dask scheduler file ({type(exc).__name__}: {exc}); "
            "it should be the JSON file written by `dask scheduler --scheduler-file PATH`, with an "
            "'address' entry. Restart the scheduler or pass its address."
        ) from None
    if not isinstance(address, str):
        raise ValueError(f"client={path!r}: the scheduler file's 'address' is {address!r}, not a string.")
    return check_scheduler_address(address, name=f"the 'address' in scheduler file {path!r}")


def check_client(client) -> None:
    """Check a ``client`` argument without connecting (what :func:`resolve_client` checks first).

    Lets a caller refuse a bad address or a missing scheduler file before doing any other work.

    Raises
    ------
    ValueError, FileNotFoundError, TypeError
        As :func:`resolve_client`.
    """
    if client is None or (isinstance(client, str) and client in ("sync", "embedded")):
        return
    if isinstance(client, str):
        if _is_scheduler_file(client):
            _read_scheduler_file(client)
        else:
            check_scheduler_address(client)
        return
    if not hasattr(client, "submit") or not hasattr(client, "scheduler_info"):
        raise TypeError(
            f"client must be None, 'sync', 'embedded', a scheduler address or a "
            f"distributed.Client; got {type(client).__name__}. {_FIX}"
        )


@contextlib.contextmanager
def connect(scheduler: str, *, security=None, timeout=None):
    """A client of the running scheduler at ``scheduler`` (address or scheduler file), closed on exit.

    ``security`` is a ``distributed.Security`` (TLS certificates) or None. The address is
    checked before connecting; the wait is bounded by ``timeout`` (default dask's
    ``distributed.comm.timeouts.connect``) and ends in a ``ConnectionError``.
    """
    address = _read_scheduler_file(scheduler) if _is_scheduler_file(scheduler) else check_scheduler_address(scheduler)
    what = f"the dask scheduler at {address!r}" + (f" (from {scheduler!r})" if address != scheduler else "")
    with _new_client(address, _connect_timeout(timeout), what=what, security=security) as c:
        yield c


@contextlib.contextmanager
def _new_client(target, timeout: float, *, what: str, security=None):
    """Connect a client to ``target`` (address or cluster), current inside the block, closed after.

    The client is made with ``set_as_default=False``; if the connection fails the half-made
    client is closed, so nothing stays registered and dask's configuration is as before.
    """
    from distributed import Client

    made: list = []

    class _Client(Client):
        def start(self, **kwargs):  # remember the client even if its constructor raises
            made.append(self)
            return super().start(**kwargs)

    try:
        kw = {"security": security} if security is not None else {}
        client = _Client(target, timeout=timeout, set_as_default=False, **kw)
    except BaseException as exc:
        for c in made:
            _close_quietly(c)
        if isinstance(exc, (OSError, TimeoutError)):
            raise ConnectionError(
                f"could not connect to {what} within {timeout:g} s ({type(exc).__name__}: {exc}). "
                "Check that the scheduler is running (`dask scheduler` prints its address) and "
                "reachable from here, or raise the limit with dask.config.set("
                "{'distributed.comm.timeouts.connect': '60s'}); client=None or 'embedded' uses a "
                "local cluster instead."
            ) from exc
        raise
    try:
        with client.as_current():
            yield client
    finally:
        _close_quietly(client)


def _close_quietly(client) -> None:
    """Close ``client`` within :data:`CLOSE_TIMEOUT` seconds; stop its event-loop thread."""
    with contextlib.suppress(Exception):
        client.close(timeout=CLOSE_TIMEOUT)
    with contextlib.suppress(Exception):
        client._loop_runner.stop()  # close() skips this for a client that never connected


@contextlib.contextmanager
def resolve_client(client, *, in_memory: bool, timeout=None):
    """Context manager yielding a ``distributed.Client`` or ``None`` (run in-process).

    Parameters
    ----------
    client : None, "sync", "embedded", str or distributed.Client
        See the module docstring.
    in_memory : bool
        Whether the data are in this process (then ``None`` means in-process).
    timeout : str or float, optional
        Longest wait for a scheduler connection; default dask's
        ``distributed.comm.timeouts.connect``.

    Raises
    ------
    ValueError
        ``client`` is a malformed address or an unreadable scheduler file.
    FileNotFoundError
        ``client`` names a scheduler file that does not exist.
    ConnectionError
        No scheduler answered at the address within ``timeout``.
    TypeError
        ``client`` is of another type.
    """
    if isinstance(client, str) and client == "sync":
        yield None
        return
    if isinstance(client, str) and client == "embedded":
        with embedded_cluster(timeout=timeout) as c:
            yield c
        return
    if isinstance(client, str):
        with connect(client, timeout=timeout) as c:
            yield c
        return
    if client is not None:
        check_client(client)
        yield client
        return
    active = _active_client()
    if active is not None:
        yield active
    elif in_memory:
        yield None
    else:
        with embedded_cluster(timeout=timeout) as c:
            yield c


def _active_client():
    """The current or default ``distributed`` client if it is connected, else None."""
    try:
        from distributed import Client

        client = Client.current(allow_global=True)
    except (ImportError, ValueError):
        return None
    return client if getattr(client, "status", None) == "running" else None
