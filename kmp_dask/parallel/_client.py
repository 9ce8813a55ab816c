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
    connection — TCP connect *and* dask's handshake — waits at most
    ``distributed.comm.timeouts.connect`` (30 s by default), so a port that accepts connections
    but does not speak dask (a dashboard, a web server) fails in that time too. A scheduler
    with no workers is waited for (the same bound) until its first worker arrives, then
    :class:`NoWorkersError`.

Every wait is bounded (docs/engine.md, "Bounded waits"): the embedded cluster's workers must
all arrive within :data:`WORKER_START_TIMEOUT` seconds, and a worker that keeps dying as soon as
it starts (a memory limit below what a worker process needs, an import that crashes) ends the
fit with :class:`WorkerRestartLoopError` instead of being restarted forever. Explicit memory
limits below :data:`MIN_MEMORY_LIMIT` are refused before anything starts
(:func:`check_memory_limit`).

Clients made here are never registered as dask's global default client: they are made
*current* (``Client.as_current``) for the duration of the fit only. A connection that fails
is closed again, so a failed fit leaves no client or dask configuration behind and the next
fit in the same process is unaffected.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

__all__ = ["resolve_client", "embedded_cluster", "connect", "check_client", "check_scheduler_address",
           "check_memory_limit", "wait_for_workers", "NoWorkersError", "WorkerRestartLoopError"]

#: Seconds allowed to close a client (a half-made one included); closing never blocks longer.
CLOSE_TIMEOUT = 10.0

#: Seconds allowed to stop the embedded cluster (scheduler, nannies, workers).
CLUSTER_CLOSE_TIMEOUT = 30.0

#: Smallest explicit per-worker memory limit accepted (256 MiB). Measured (dask 2026.8,
#: Python 3.11, Linux): an idle worker process holds 62 MiB, 180 MiB once it has imported
#: kmp_dask, zarr and scikit-learn (what every fit does); dask pauses a worker at 80 % of its
#: limit and restarts it at 95 %, so below ~225 MiB a worker is restarted as soon as it works.
MIN_MEMORY_LIMIT = 256 * 2**20

#: Seconds the embedded cluster's workers have to arrive (all of them) before an error; generous
#: because a loaded machine starts worker processes slowly. dask config
#: ``kmp_dask.worker-start-timeout`` overrides it.
WORKER_START_TIMEOUT = 300.0

#: A worker restarted this many times within :data:`RESTART_WINDOW` seconds is in a restart loop.
RESTART_LIMIT = 5
RESTART_WINDOW = 120.0


class NoWorkersError(RuntimeError):
    """The dask cluster has no worker to run on (none arrived, or all of them are gone)."""


class WorkerRestartLoopError(RuntimeError):
    """The embedded cluster's workers kept dying as soon as they started."""


class UnguardedMainError(RuntimeError):
    """An embedded cluster was asked for while Python imported the user's script in a new process."""


_UNGUARDED = (
    "kmp_dask was asked to start its embedded dask cluster (client={what}) while Python was importing your "
    "script {script!r} in a new worker process: worker processes start by importing the main script, so "
    "code at its top level that fits a model runs again in each of them. Put that code under "
    "`if __name__ == \"__main__\":` (Python's 'safe importing of main module' rule for multiprocessing), or "
    "pass client='sync' (in process) or a scheduler address.")


_START_FAILED = (
    "the embedded LocalCluster's worker processes failed to start ({error}). If the output above shows "
    "UnguardedMainError, put the code of your script that fits under `if __name__ == \"__main__\":`; "
    "otherwise the worker processes' errors above say why. To run without a cluster pass client='sync'.")


def check_not_importing_main(what: str = "'embedded'") -> None:
    """Refuse to start an embedded cluster inside a process that is still importing ``__main__``.

    dask's nannies start workers with multiprocessing's "spawn": each new process imports the main
    script first. A script without the ``__main__`` guard then fits again in every worker process,
    which asks for a cluster of its own; multiprocessing refuses to spawn from there, the worker
    never starts and — measured — the parent's ``LocalCluster`` waited past 300 s without an error.
    Raised here, the worker process ends at once with this message (on the same terminal) and the
    parent's start fails (:func:`embedded_cluster` names the likely cause)."""
    import multiprocessing
    import sys

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")  # spawn imports it as __mp_main__
        script = getattr(main, "__file__", None) or "<main>"
        raise UnguardedMainError(_UNGUARDED.format(what=what, script=script))


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


def check_memory_limit(memory_limit, *, name: str = "memory_limit"):
    """Return ``memory_limit`` if dask accepts it and it is not absurdly small, else raise.

    Accepted as dask's ``LocalCluster`` does: ``"auto"``, ``None`` or ``0`` (no limit), a
    fraction of the machine's memory (a number ≤ 1), a number of bytes or a string such as
    ``"2GB"`` / ``"1.5GiB"``. An explicit limit below :data:`MIN_MEMORY_LIMIT` (256 MiB) is
    refused: a worker process needs about that much before it holds any data, and dask would
    restart it as soon as it starts, again and again.

    Raises
    ------
    ValueError
        Naming the argument, the value received and what to pass instead.
    """
    import logging

    from dask.utils import format_bytes
    from distributed.worker_memory import parse_memory_limit

    fix = ("pass a size such as '2GB' or '1.5GiB' (per worker), a fraction of the machine's memory such as 0.5, "
           "'auto' (the machine's memory shared between the workers) or 0 (no limit)")
    if memory_limit is None or (isinstance(memory_limit, str) and memory_limit.strip().lower() == "auto"):
        return None if memory_limit is None else "auto"
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, (str, int, float)):
        raise ValueError(f"{name}={memory_limit!r} is not a memory limit; {fix}.")
    try:
        parsed = parse_memory_limit(memory_limit, 1, logger=logging.getLogger("kmp_dask.memory_limit"))
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{name}={memory_limit!r} is not a memory limit ({exc}); {fix}.") from None
    if parsed is not None and parsed < MIN_MEMORY_LIMIT:
        got = format_bytes(parsed) if parsed > 0 else "a negative size"
        raise ValueError(
            f"{name}={memory_limit!r} ({got} per worker) is below the smallest usable limit, "
            f"{format_bytes(MIN_MEMORY_LIMIT)}: a dask worker process needs about 180 MiB before it holds any data "
            f"and dask restarts a worker above 95 % of its limit, so it would restart forever. Pass at least "
            f"'{MIN_MEMORY_LIMIT // 2**20}MiB' (e.g. '2GB'), 'auto' or 0 (no limit)."
        )
    return memory_limit


def _worker_start_timeout() -> float:
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("kmp_dask.worker-start-timeout", WORKER_START_TIMEOUT), "s"))


class _RestartWatch:
    """Counts how often each nanny of an embedded cluster starts its worker process. A worker
    restarted :data:`RESTART_LIMIT` times within :data:`RESTART_WINDOW` seconds is in a restart
    loop: the cause is recorded, no nanny starts a worker any more and our client is closed, so
    every wait of the fit ends (and :func:`embedded_cluster` raises the cause)."""

    def __init__(self, memory_limit):
        self.memory_limit, self.cause, self.closing, self.client = memory_limit, None, None, None
        self.starts: dict[str, list[float]] = {}

    def nanny_class(self):
        """A ``distributed.Nanny`` whose every worker start is counted here (in-process)."""
        import asyncio
        import time

        from distributed import Nanny
        from distributed.core import Status

        watch = self

        class _WatchedNanny(Nanny):
            async def instantiate(self):
                key, now = str(self.name), time.monotonic()
                times = [t for t in watch.starts.get(key, []) if now - t < RESTART_WINDOW] + [now]
                watch.starts[key] = times
                if watch.cause is None and len(times) > RESTART_LIMIT:
                    watch.cause = watch._message(key, len(times) - 1, now - times[0])
                    # close our client: every wait of the fit ends now; no nanny restarts any more
                    watch.closing = asyncio.ensure_future(_stop(watch.client))
                if watch.cause is not None:
                    return Status.failed
                return await super().instantiate()

        return _WatchedNanny

    def _message(self, name, count, seconds) -> str:
        return (
            f"the embedded dask cluster's worker {name!r} was restarted {count} times in {seconds:.0f} s, each time "
            f"soon after it started (memory_limit={self.memory_limit!r}); the cluster was stopped instead of "
            "restarting it forever. The workers' log lines above say why: 'exceeded 95% memory budget' means the "
            "memory limit is too small (raise --memory-limit / memory_limit, or pass 'auto'); otherwise a worker "
            "crashes as it starts (check that the environment imports, e.g. `python -c 'import kmp_dask'`)."
        )

    def check(self):
        if self.cause is not None:
            raise WorkerRestartLoopError(self.cause)


async def _stop(client) -> None:
    """Close our client of an embedded cluster in a restart loop (its pending futures fail at
    once, so the fit ends). Runs in the cluster's event loop."""
    if client is not None:
        with contextlib.suppress(Exception):
            await client._close(fast=True)


def scheduler_identity(client) -> dict:
    """The scheduler's identity with *every* worker, fetched for this call.

    ``Client.scheduler_info(n_workers=-1)`` fetches into a cache and returns the cache, which
    the client's own periodic update (``distributed.client.scheduler-info-interval``, 2 s, with
    ``n_workers=0``: no workers) may overwrite in between; a pass then saw its worker "gone"
    and rebuilt its partitions elsewhere — on 2 × 300 MB workers the rebuild is refused by the
    budget and the fit failed (``worker ... left the cluster during a pass``, 3 runs of 6 on a
    machine at load 20, benchmarks/notes/small_workers.md). The engine's pass and the CLI's
    announcements use it; the wait-for-workers loops here keep the cached view (a false empty
    there only polls again, and a fetch of up to 30 s could overrun a short deadline).
    """
    if getattr(client, "asynchronous", False) or getattr(client, "status", None) != "running":
        return client.scheduler_info(n_workers=-1)  # the caller tells a lost scheduler from it
    return client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=30)


def _wait_for_embedded_workers(client, n: int, timeout: float, watch: _RestartWatch) -> None:
    """Wait until all ``n`` workers of the embedded cluster arrived (at most ``timeout`` s)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        watch.check()
        have = len(client.scheduler_info(n_workers=-1).get("workers", {}))
        if have >= n:
            return
        if time.monotonic() > deadline:
            watch.check()
            raise NoWorkersError(
                f"only {have} of the embedded dask cluster's {n} workers started within {timeout:.0f} s. The "
                "machine may be overloaded or short of memory: try fewer workers (--workers / n_workers), wait "
                "for other jobs to finish, or raise the limit with dask.config.set("
                "{'kmp_dask.worker-start-timeout': '600s'})."
            )
        time.sleep(0.1)


@contextlib.contextmanager
def embedded_cluster(n_workers: int | None = None, *, threads_per_worker: int = 1, memory_limit="auto",
                     local_directory=None, dashboard: bool = True, timeout=None):
    """A process ``LocalCluster`` and its client, closed on exit.

    Defaults are the laptop's: one single-threaded worker per core (at most 8), dask's
    ``memory_limit="auto"`` (the machine's memory shared between the workers). Every socket
    of the cluster (scheduler, nannies, workers, dashboard) listens on 127.0.0.1. The client
    is current only inside the ``with`` block and is never registered as dask's global
    default client.

    Bounded: ``memory_limit`` is checked first (:func:`check_memory_limit`); all workers must
    arrive within :data:`WORKER_START_TIMEOUT` seconds (:class:`NoWorkersError`); a worker
    that dies :data:`RESTART_LIMIT` times in :data:`RESTART_WINDOW` seconds stops the cluster
    and whatever the block was doing ends in :class:`WorkerRestartLoopError`.
    """
    from distributed import LocalCluster

    check_not_importing_main()
    memory_limit = check_memory_limit(memory_limit)
    n = n_workers or max(1, min(os.cpu_count() or 1, 8))
    kw = {"local_directory": str(local_directory)} if local_directory is not None else {}
    watch = _RestartWatch(memory_limit)
    try:
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=int(threads_per_worker),
            memory_limit=memory_limit,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0" if dashboard else None,
            worker_class=watch.nanny_class(),
            **kw,
        )
    except RuntimeError as exc:  # a worker process died while starting: dask says only "failed to start"
        raise NoWorkersError(_START_FAILED.format(error=exc)) from exc
    try:
        with _new_client(cluster, _connect_timeout(timeout), what="the embedded LocalCluster") as client:
            watch.client = client
            try:
                _wait_for_embedded_workers(client, n, _worker_start_timeout(), watch)
                yield client
            except WorkerRestartLoopError:
                raise
            except Exception as exc:
                if watch.cause is not None:  # whatever failed, it failed because the cluster was stopped
                    raise WorkerRestartLoopError(watch.cause) from exc
                raise
    finally:
        with contextlib.suppress(Exception):  # bounded: a nanny stuck in a restart cannot hold us
            cluster.close(timeout=CLUSTER_CLOSE_TIMEOUT)


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
    seconds = _connect_timeout(timeout)
    with _new_client(address, seconds, what=what, security=security) as c:
        start = f"`dask worker --scheduler-file {scheduler}`" if address != scheduler else f"`dask worker {address}`"
        wait_for_workers(c, seconds, what=what, fix=f"start workers for it ({start})")
        yield c


def wait_for_workers(client, timeout: float, *, n: int = 1, what: str | None = None, fix: str | None = None) -> dict:
    """The scheduler's workers once at least ``n`` are connected, waiting at most ``timeout`` s.

    Raises
    ------
    NoWorkersError
        Fewer than ``n`` workers after ``timeout`` seconds: names the scheduler, how many
        workers it has and what to do.
    """
    import time

    deadline = time.monotonic() + float(timeout)
    while True:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        if len(workers) >= n:
            return workers
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    what = what or f"the dask scheduler at {getattr(client.scheduler, 'address', '?')!r}"
    fix = fix or "start workers for it (`dask worker SCHEDULER_ADDRESS`)"
    raise NoWorkersError(
        f"{what} has {len(workers)} worker{'s' if len(workers) != 1 else ''} after waiting {float(timeout):g} s "
        f"(at least {n} needed). {fix[0].upper() + fix[1:]}, or wait longer for workers still starting "
        "(CLI: --connect-timeout SECONDS; Python: dask config 'distributed.comm.timeouts.connect'), or run "
        "without a scheduler (client=None or 'embedded'; CLI: no --scheduler) to use a local cluster."
    )


@contextlib.contextmanager
def _new_client(target, timeout: float, *, what: str, security=None):
    """Connect a client to ``target`` (address or cluster), current inside the block, closed after.

    The client is made with ``set_as_default=False``; if the connection fails the half-made
    client is closed, so nothing stays registered and dask's configuration is as before.
    """
    import asyncio

    from distributed import Client

    made: list = []

    class _Client(Client):
        def start(self, **kwargs):  # remember the client even if its constructor raises
            made.append(self)
            return super().start(**kwargs)

        async def _start(self, *args, **kwargs):
            # distributed bounds the TCP connect by `timeout` but not the handshake that follows:
            # a port that accepts and never answers (a dashboard, any non-dask server) would hang
            # forever. The whole start — connect, handshake, registration — gets the one bound.
            return await asyncio.wait_for(super()._start(*args, **kwargs), timeout)

    try:
        kw = {"security": security} if security is not None else {}
        client = _Client(target, timeout=timeout, set_as_default=False, **kw)
    except BaseException as exc:
        for c in made:
            _close_quietly(c)
        if isinstance(exc, (OSError, TimeoutError)):
            raise ConnectionError(
                f"could not connect to {what} within {timeout:g} s ({type(exc).__name__}: {str(exc) or 'no answer'})."
                f"{_not_dask_hint(target, exc)} Check that the scheduler is running (`dask scheduler` prints "
                "its address) and reachable from here, or raise the limit with dask.config.set("
                "{'distributed.comm.timeouts.connect': '60s'}) (CLI: --connect-timeout); client=None or "
                "'embedded' uses a local cluster instead."
            ) from exc
        raise
    try:
        with client.as_current():
            yield client
    finally:
        _close_quietly(client)


def _not_dask_hint(target, exc) -> str:
    """When the address accepts TCP connections but the dask handshake did not complete: say so."""
    import socket
    from urllib.parse import urlsplit

    if not isinstance(target, str) or not target.startswith(("tcp://", "tls://")):
        return ""
    if isinstance(exc, OSError) and "Timed out trying to connect" in str(exc):
        return ""  # the TCP connection itself never succeeded
    try:
        parts = urlsplit(target)
        with socket.create_connection((parts.hostname, parts.port), timeout=2.0):
            pass
    except (OSError, ValueError):
        return ""
    return (f" Something at {target} accepts connections but did not answer as a dask scheduler: is this the "
            "scheduler's port (`dask scheduler` prints 'Scheduler at: tcp://HOST:8786'), not its dashboard "
            "(8787) or another service?")


def _close_quietly(client) -> None:
    """Close ``client`` within :data:`CLOSE_TIMEOUT` seconds; stop its event-loop thread.

    A client whose scheduler is gone is still trying to reconnect; closing it cancels that attempt,
    which distributed logs as an ERROR with two tracebacks (``Client._reconnect``) after the fit
    has already said that the scheduler is unreachable: its logger is silenced for the close."""
    import logging

    log = logging.getLogger("distributed.client")
    level = log.level
    if getattr(client, "status", "running") not in ("running", "newly-created"):
        log.setLevel(logging.CRITICAL)
    try:
        with contextlib.suppress(Exception):
            client.close(timeout=CLOSE_TIMEOUT)
        with contextlib.suppress(Exception):
            client._loop_runner.stop()  # close() skips this for a client that never connected
    finally:
        log.setLevel(level)


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
    """The current or default ``distributed`` client if it is connected, else None.

    No client can exist unless ``distributed`` was imported: then this does not import it (1.3 s
    on the first in-process fit with ``client=None``, benchmarks/kmp_loop_overhead.py)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import Client

        client = Client.current(allow_global=True)
    except (ImportError, ValueError):
        return None
    return client if getattr(client, "status", None) == "running" else None
