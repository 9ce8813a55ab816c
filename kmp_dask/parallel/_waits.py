"""How long kmp_dask waits for dask, and what ends a wait: the one place.

Every result kmp_dask waits for on a cluster — a pass of the actor engine (``_engine``), a map of
independent problems or a tree reduction (``_tasks``), a parallel ingest's chunk tasks
(``store._ingest``), the scoring pass of a cross-validated search (``_rowsums``), the import
tasks that warm workers (``_evaluate``), the start of a partition holder (``_engine``) and every
``dask.compute`` of ours on a distributed client (:func:`compute_bounded`: evaluate's and
predict's passes, the moments and labels of dask input, ``score``, ``store_from_dask``) — is
waited for here, in slices of :data:`SLICE` seconds,
and between slices the scheduler is asked for its live workers:

* the scheduler gone (its connection lost and not back within ``loss_timeout``, or a future
  cancelled while its address refuses connections) → :class:`SchedulerLostError`, saying how to
  resume from a checkpoint;
* no live worker for :func:`no_workers_wait` seconds (:data:`NO_WORKERS_WAIT`, dask config
  ``kmp_dask.no-workers-wait``) → :class:`~kmp_dask.parallel._client.NoWorkersError`, the same;
* a worker lost while others live → nothing: dask recomputes its tasks elsewhere (every task we
  submit is a pure function of its arguments, or writes atomically);
* no result within ``timeout`` seconds of the previous one → ``TimeoutError`` naming what.

dask's own ``Future.result()`` / ``Client.gather`` wait for as long as the scheduler keeps a task
waiting, and a task whose only worker died waits for a worker forever: a multi-class CVM on a
scheduler whose one worker was SIGKILLed printed nothing for minutes before this module existed.
"""

from __future__ import annotations

import logging
import socket
import time
from concurrent.futures import CancelledError

__all__ = ["SchedulerLostError", "WorkersKilledError", "wait_for", "compute_bounded", "distributed_client",
           "scheduler_workers", "scheduler_reachable",
           "scheduler_lost_message", "no_workers_wait", "await_live_workers", "cancelled_error", "SLICE",
           "NO_WORKERS_WAIT", "LOSS_TIMEOUT", "RESULT_TIMEOUT"]

logger = logging.getLogger(__name__)

SLICE = 2.0
"""Seconds of one wait for a result before the scheduler is asked for its live workers again."""

NO_WORKERS_WAIT = 60.0
"""Seconds a wait goes on with no live worker before :class:`NoWorkersError` (a nanny restarts
a killed worker in a few seconds; a cluster whose workers all died does not come back by itself).
dask config ``kmp_dask.no-workers-wait`` overrides it."""

LOSS_TIMEOUT = 30.0
"""Seconds a client reconnecting to its scheduler is given to come back before the scheduler
counts as gone (the actor engine's ``loss_timeout`` default)."""

RESULT_TIMEOUT = 3600.0
"""The longest wait for the next result of a map over problems or a tree reduction (dask config
``kmp_dask.pass-timeout``, as for one pass of the actor engine)."""

PROBE_TIMEOUT = 5.0
"""Seconds the TCP probe of the scheduler's address may take (:func:`scheduler_reachable`)."""


class SchedulerLostError(ConnectionError):
    """The dask scheduler went away during a fit."""


def no_workers_wait() -> float:
    """:data:`NO_WORKERS_WAIT`, or dask config ``kmp_dask.no-workers-wait`` (seconds or a duration)."""
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("kmp_dask.no-workers-wait", NO_WORKERS_WAIT), "s"))


def scheduler_lost_message(client) -> str:
    address = getattr(client, "scheduler", None) and client.scheduler.address
    return (f"the dask scheduler ({address}) is unreachable: it was stopped or killed, or the network to it is "
            "down. The fit cannot continue (its tasks and its workers' partitions were registered there); restart the "
            "scheduler and its workers and fit again — a fit started with checkpoint=DIR continues from its last "
            "checkpoint with resume=True (CLI: the same command with --resume).")


def scheduler_reachable(client, timeout: float = PROBE_TIMEOUT) -> bool:
    """A TCP connection to the scheduler's address succeeds within ``timeout`` seconds."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(client.scheduler.address)
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            return True
    except Exception:  # refused, unreachable, no address (client closed)
        return False


def scheduler_workers(client, loss_timeout: float = 0.0) -> dict:
    """The scheduler's workers; :class:`SchedulerLostError` when the scheduler itself is gone.

    A client reconnecting to its scheduler serves a stale cached worker list, so while its
    status is "connecting" we wait up to ``loss_timeout`` seconds for it to come back.
    """
    from ._client import scheduler_identity

    deadline = time.monotonic() + float(loss_timeout)
    while client.status == "connecting" and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        info = scheduler_identity(client)
    except Exception as exc:
        info, cause = {}, exc
    else:
        cause = None
    if "workers" not in info or client.status != "running":
        raise SchedulerLostError(scheduler_lost_message(client)) from cause
    return info["workers"]


def cancelled_error(client, exc) -> BaseException:
    """What a ``CancelledError`` from ``client``'s futures means: :class:`SchedulerLostError` when
    the scheduler's address refuses connections (it cancels every future of a client it lost),
    else ``exc`` itself (cancelled by the scheduler on purpose, or a scattered value lost with its
    worker: the caller decides)."""
    if not scheduler_reachable(client):
        return SchedulerLostError(scheduler_lost_message(client))
    return exc


def no_workers_message(what: str, waited: float) -> str:
    return (f"no live dask workers left: the cluster lost every worker while kmp_dask waited for its tasks ({what}) "
            f"and none came "
            f"back within {waited:g} s. Check the workers' logs (a worker killed for memory needs a larger memory "
            "limit, e.g. --memory-limit), start workers again (`dask worker SCHEDULER_ADDRESS`), and fit again — a "
            "fit started with checkpoint=DIR continues with resume=True (CLI: the same command with --resume).")


def await_live_workers(client, *, loss_timeout: float = 0.0, message=None) -> list:
    """The scheduler's live workers (sorted), waiting up to :func:`no_workers_wait` seconds for one;
    then :class:`NoWorkersError` with ``message(seconds)`` (default: :func:`no_workers_message`)."""
    from ._client import NoWorkersError

    wait = no_workers_wait()
    deadline = time.monotonic() + wait
    while True:
        live = sorted(scheduler_workers(client, loss_timeout))
        if live:
            return live
        if time.monotonic() > deadline:
            raise NoWorkersError((message or (lambda s: no_workers_message("task", s)))(wait))
        time.sleep(0.5)


class WorkersKilledError(RuntimeError):
    """dask gave up on a task: every worker that ran it died while running it."""


def _killed_worker(exc, what):
    """dask's ``KilledWorker`` (a task's workers died while running it, ``allowed-failures`` + 1
    times) as one line saying what to do."""
    return WorkersKilledError(
        f"every worker that ran a task ({what}) died while running it ({' '.join(str(exc).split())[:300]}); "
        "dask stopped "
        "retrying it. A worker killed for memory needs a larger memory limit (--memory-limit / the workers' "
        "memory_limit) or smaller chunks; check the workers' logs, and fit again — a fit started with "
        "checkpoint=DIR continues with resume=True (CLI: --resume).")


def wait_for(futures, client, *, what: str = "task", timeout: float | None = RESULT_TIMEOUT, on_result=None,
             loss_timeout: float = LOSS_TIMEOUT, cancel: bool = True) -> list:
    """The results of ``futures`` (``client``'s) in their order, waited for in slices.

    ``on_result(i, result)``: called as each result arrives (in order of completion; an exception
    it raises ends the wait). ``timeout``: the longest wait for the next result (None: no limit),
    then ``TimeoutError``. Between slices the scheduler is asked for its workers: it gone is
    :class:`SchedulerLostError`, no live worker for :func:`no_workers_wait` seconds is
    :class:`NoWorkersError`; a task's own error is raised as it is. ``cancel``: cancel the futures
    still pending when the wait ends in an error.
    """
    from distributed.scheduler import KilledWorker

    from ._client import NoWorkersError

    futures = list(futures)
    results, pending = [None] * len(futures), set(range(len(futures)))
    last_result = next_check = time.monotonic()
    workers_gone_since = None
    try:
        while pending:
            done = [i for i in sorted(pending) if futures[i].status in ("finished", "error", "cancelled")]
            for i in done:
                try:
                    results[i] = futures[i].result(timeout=SLICE)
                except TimeoutError:  # its result was lost with a worker as it arrived: recomputed
                    continue
                except CancelledError as exc:
                    err = cancelled_error(client, exc)
                    if err is exc:
                        raise
                    raise err from exc
                except KilledWorker as exc:
                    raise _killed_worker(exc, what) from exc
                pending.discard(i)
                last_result = time.monotonic()
                if on_result is not None:
                    on_result(i, results[i])
            if not pending:
                break
            now = time.monotonic()
            if timeout is not None and now - last_result > timeout:
                raise TimeoutError(f"no {what} finished within {timeout:.0f} s (dask config kmp_dask.pass-timeout)")
            if now >= next_check:
                next_check = now + SLICE
                workers = scheduler_workers(client, loss_timeout)
                if workers:
                    workers_gone_since = None
                else:
                    workers_gone_since = workers_gone_since or now
                    wait = no_workers_wait()
                    if now - workers_gone_since > wait:
                        raise NoWorkersError(no_workers_message(what, wait))
            time.sleep(0.02 if now - last_result < 1.0 else 0.1)
        return results
    except BaseException:
        if cancel:
            for i in pending:
                futures[i].cancel()
        raise


def distributed_client(collections=(), scheduler=None):
    """The ``distributed.Client`` that ``dask.compute(*collections, scheduler=scheduler)`` would
    run on here (None: a local scheduler — "sync", threads, processes — or inside a dask task)."""
    import dask.base

    try:
        from distributed import Client
        from distributed.worker import get_worker
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        get_worker()
        return None  # inside a task: the worker's own client is not ours to bound
    except ValueError:
        pass
    get = dask.base.get_scheduler(scheduler=scheduler, collections=list(collections) or None)
    client = getattr(get, "__self__", None)
    return client if isinstance(client, Client) else None


def pass_timeout() -> float:
    """:data:`RESULT_TIMEOUT`, or dask config ``kmp_dask.pass-timeout`` (seconds or a duration)."""
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("kmp_dask.pass-timeout", RESULT_TIMEOUT), "s"))


def compute_bounded(*args, what: str = "pass", timeout: float | None = None, scheduler=None):
    """``dask.compute(*args)``, its wait bounded as :func:`wait_for`'s on a distributed client.

    ``dask.compute`` on a ``distributed`` client waits for as long as the scheduler keeps a task
    waiting: with every worker gone it waited forever, and the scheduler's death came out as a
    ``FutureCancelledError`` traceback. On a client, the collections are submitted with
    ``client.compute`` (one graph, optimised as ``dask.compute`` optimises it) and waited for with
    :func:`wait_for` — :class:`SchedulerLostError`, :class:`~._client.NoWorkersError`,
    :class:`WorkersKilledError` or ``TimeoutError`` (``timeout`` seconds for the next result,
    default :func:`pass_timeout`), one line each. Otherwise (no client, ``scheduler="sync"``,
    inside a task) it is ``dask.compute`` itself. Arguments that are not dask collections (a tuple
    of them, ``None``) are computed as ``dask.compute`` computes them (traversed). Returns the
    tuple ``dask.compute`` returns.
    """
    import dask

    client = distributed_client([a for a in args if dask.is_dask_collection(a)], scheduler)
    if client is None:
        return dask.compute(*args, scheduler=scheduler) if scheduler is not None else dask.compute(*args)
    wrapped = [a if dask.is_dask_collection(a) else dask.delayed(a) for a in args]
    futures = client.compute(wrapped)
    return tuple(wait_for(futures, client, what=what, timeout=pass_timeout() if timeout is None else timeout))
