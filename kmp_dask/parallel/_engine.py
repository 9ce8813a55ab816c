"""Engines: where partitions live and how one pass over them runs.

An engine owns a list of row partitions (:class:`~kmp_dask.blockops.Partition`) and offers one
operation, ``run(op, msg, effects=()) -> list`` — on every partition apply the state-changing
``effects`` in order, then the query ``op(partition, msg)``, and return the query results *in
partition order*. Drivers (``kmp_dask.greedy``) sum them in that order, so a fit is bit-for-bit
reproducible whatever the number of workers (docs/engine.md). Every effect sent is recorded in the
engine's :class:`~kmp_dask.blockops.Journal`; ``n_calls`` counts passes (one round trip each).

Both implementations satisfy the :class:`~kmp_dask.blockops.Engine` protocol the drivers are typed
against (tests/parallel/test_engine_protocol.py checks it):

* :class:`InProcessEngine` — partitions in this process; used for numpy input without a cluster
  and as the reference in tests.
* :class:`ActorEngine` — one :class:`PartitionHolder` dask Actor per worker, each holding a
  contiguous run of partitions, resident for the whole fit. A pass is one actor call per worker
  (small message in, small reductions out): we measured 36 ms/iteration for this
  pattern against 122–160 ms for ``client.map`` over futures and 223 ms for rebuilt dask.array
  graphs (numpy alone: 29 ms), which is why the engine uses actors.

Failure model: actor state dies with its worker. When a call fails because a holder's worker is
gone, the engine starts new holders for the lost partitions on live workers and brings them to
the current state (a pure function of the data and the effects sent so far): the new holder
replays the journal, which already holds the failed call's effects, then answers the query.
No driver writes restore code.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from concurrent.futures import wait as wait_all

from ..blockops import Journal, apply_effects
from ..store._base import StoreCorruptError
from ._client import NoWorkersError, scheduler_identity
from ._paging import (
    MEMORY_FRACTION,
    MemoryBudgetError,
    Pager,
    partition_nbytes,
    streamed_nbytes,
    transient_bytes,
    worker_budget,
)
from ._waits import (
    LOSS_TIMEOUT,
    SLICE,
    SchedulerLostError,
    await_live_workers,
    cancelled_error,
    scheduler_workers,
    wait_for,
)

__all__ = ["InProcessEngine", "ActorEngine", "PartitionHolder", "SchedulerLostError"]  # the error: _waits


logger = logging.getLogger(__name__)


#: ``KMP_DASK_IN_PROCESS_THREADS``: threads an :class:`InProcessEngine` runs its partitions on
#: (default: the CPUs this process may use, at most :data:`IN_PROCESS_MAX_THREADS`; 1 turns it off).
IN_PROCESS_THREADS_ENV = "KMP_DASK_IN_PROCESS_THREADS"
IN_PROCESS_MAX_THREADS = 8


def in_process_threads(n_partitions: int) -> int:
    """Threads for an in-process pass over ``n_partitions`` partitions (1: the calling thread)."""
    raw = os.environ.get(IN_PROCESS_THREADS_ENV, "").strip()
    if raw:
        try:
            want = int(raw)
        except ValueError:
            raise ValueError(f"{IN_PROCESS_THREADS_ENV} must be a positive int (threads for in-process partitions); "
                             f"got {raw!r}. Unset it for the default (the CPUs available), or set 1.") from None
        if want < 1:
            raise ValueError(f"{IN_PROCESS_THREADS_ENV} must be a positive int; got {want}. Set 1 for no threads.")
    else:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        want = min(cpus, IN_PROCESS_MAX_THREADS)
    return max(1, min(want, n_partitions))


class InProcessEngine:
    """All partitions in the calling process; ``run`` applies the effects and the query to each.

    With several partitions and several CPUs the partitions run on a small thread pool (numpy
    and BLAS release the GIL in the kernel blocks). Each partition's work is the same code on the
    same rows as in a loop, and the results come back in partition order, so the model is the
    same bit for bit as with one thread; a partition's state is only ever touched by one thread
    at a time (one task per partition per pass, the next pass after all of them). The thread
    count: :func:`in_process_threads` (``KMP_DASK_IN_PROCESS_THREADS=1`` runs the plain loop).
    """

    def __init__(self, specs):
        self.partitions = [spec.load() for spec in specs]
        self.journal = Journal()
        self.n_calls = 0
        self.n_threads = in_process_threads(len(self.partitions))
        self._pool = None

    @property
    def n_partitions(self) -> int:
        return len(self.partitions)

    def run(self, op, msg=None, effects=()) -> list:
        self.n_calls += 1
        effects = tuple(effects)
        self.journal.record(effects)

        def one(p):
            apply_effects(p, effects)
            return None if op is None else op(p, msg)

        if self.n_threads < 2:
            return [one(p) for p in self.partitions]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="kmp-dask-partition")
        futures = [self._pool.submit(one, p) for p in self.partitions]
        try:
            return [f.result() for f in futures]
        finally:  # an error or an interrupt: no partition left running behind the caller's back
            for f in futures:
                f.cancel()
            wait_all(futures)

    def free_state_bytes(self) -> int:
        """Memory a fit's partition state may still take here: half of what the OS reports available."""
        import psutil

        return int(0.5 * psutil.virtual_memory().available)

    def close(self) -> None:
        self.partitions = []
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: glibc mallopt parameters (see ``man mallopt``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

#: When partitions are streamed, arrays above this many bytes are mmapped and freed to the OS at
#: once (a paged-out partition must leave the RSS dask's nanny watches), and freed heap above
#: STREAM_TRIM_THRESHOLD is trimmed.
STREAM_MMAP_THRESHOLD, STREAM_TRIM_THRESHOLD = 1 << 20, 16 << 20

IN_FLIGHT = 3
"""Streamed partitions in memory at once: computed on, prefetched, written back."""


def tune_worker_malloc(mmap_threshold: int = 64 << 20, trim_threshold: int = 256 << 20) -> bool:
    """Let per-pass temporaries (tens of MB) be reused from the heap in this worker process.

    dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which also switches off
    glibc's adaptive mmap threshold: every temporary above 128 KiB then becomes a fresh ``mmap``
    whose pages fault in again on every pass. Measured on this project's machine: a pass over
    300k × 54 rows took 30–75% longer inside a worker than in a plain process. This raises the
    mmap threshold to 64 MiB and keeps up to 256 MiB of freed heap before trimming — so a worker
    may hold up to that much more memory than it uses. Set ``KMP_DASK_MALLOC_TUNING=0`` to opt out.
    Returns True when applied (glibc only).
    """
    libc = _glibc()
    try:
        return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    except AttributeError:
        return False


def trim_worker_heap() -> bool:
    """Return the free pages of every malloc arena to the OS (glibc ``malloc_trim(0)``).

    A streaming worker frees a partition's worth of small arrays and Python objects on every
    pass; glibc keeps freed heap below ``STREAM_TRIM_THRESHOLD`` at the top of each arena and
    never returns holes in the middle, so the process's RSS drifts above what it uses (measured:
    10–20 MiB of free heap on a 300 MB worker, ``benchmarks/notes/small_workers.md``). Called
    once per streamed pass (a few ms). False when not glibc or ``KMP_DASK_MALLOC_TUNING=0``.
    """
    libc = _glibc()
    if libc is None:
        return False
    try:
        libc.malloc_trim(0)
    except AttributeError:
        return False
    return True


def _glibc():
    """glibc's handle for the malloc tuning above, or None (not glibc, or ``KMP_DASK_MALLOC_TUNING=0``)."""
    if os.environ.get("KMP_DASK_MALLOC_TUNING", "1") == "0":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


class PartitionHolder:
    """Dask Actor holding a run of partitions on one worker, within a memory budget.

    Partitions that fit in the budget (:func:`~kmp_dask.parallel._paging.worker_budget`) are
    loaded on the worker and stay *resident*; the others are *streamed*: paged in from the store
    or worker-local scratch for every pass, with the next one read on a background thread
    (:mod:`~kmp_dask.parallel._paging`). The budget is re-checked after every pass that changed
    state (a state grows as basis columns are reserved), evicting resident partitions from the
    end of the run when needed. When everything fits, nothing is ever written.
    """

    def __init__(self, specs, memory_fraction: float = MEMORY_FRACTION, local_x: bool = True,
                 budget_bytes: int | None = None):
        self.specs = {spec.index: spec for spec in specs}
        self.fraction = memory_fraction
        self.limit, self.baseline, usable, self.scratch = worker_budget(memory_fraction)
        self.transient = transient_bytes(max((s.nbytes for s in specs), default=0))
        self.budget = None if usable is None else usable - self.transient
        self.explicit_budget = budget_bytes is not None
        if self.explicit_budget:  # an explicit budget for rows + state (tests, tuning)
            self.budget = int(budget_bytes)
        self.local_x = local_x
        self.partitions: dict = {}
        self._ws = {i: s.nbytes for i, s in self.specs.items()}  # working-set bytes per partition
        self._pager = None
        self._pool = None
        # freed heap kept for reuse must fit the slack under the limit (0.6 -> 0.7 spill threshold)
        keep = 256 << 20 if not self.limit else max(16 << 20, min(256 << 20, self.limit // 20))
        self.malloc_tuned = tune_worker_malloc(min(64 << 20, keep // 2), keep)
        if self.budget is not None and 2 * sum(self._ws.values()) > self.budget:
            # rows alone are admitted below; the state the first pass adds (about as much again)
            # will evict some. Arrays must then leave the RSS when freed, from the first one:
            # measured, 10⁷ × 54 rows on 2 × 2.5 GB workers kept ~0.7 GB of freed heap (1.63 GiB
            # RSS for a 0.9 GiB budget, dask's "unmanaged memory" warning every 5 minutes) when
            # the streaming thresholds were set only after the first eviction.
            tune_worker_malloc(STREAM_MMAP_THRESHOLD, STREAM_TRIM_THRESHOLD)
        self._load_error = None
        used = 0
        try:
            for i in sorted(self.specs):
                if self.budget is None or used + self._ws[i] + self._reserve() <= self.budget:
                    self.partitions[i] = self.specs[i].load()
                    used += self._ws[i]
        except StoreCorruptError as exc:
            # raised by the first call instead: an error in an actor's constructor is a failed
            # task, which the worker logs with its whole escaped traceback; a call's error is
            # only returned to the caller (the message already names store, array and chunk)
            self._load_error = exc
            return
        self._check_streamable()

    def _check_loaded(self):
        if self._load_error is not None:
            raise self._load_error

    # -- budget --------------------------------------------------------------------------------
    def _reserve(self) -> int:
        """Bytes for streamed partitions in flight: the one computed on, the one prefetched and
        the one being written back."""
        streamed = [self._ws[i] for i in self.specs if i not in self.partitions]
        return IN_FLIGHT * max(streamed, default=0) if streamed else IN_FLIGHT * max(self._ws.values())

    def _check_streamable(self):
        if self.budget is None or len(self.partitions) == len(self.specs):
            return
        tune_worker_malloc(STREAM_MMAP_THRESHOLD, STREAM_TRIM_THRESHOLD)  # freed pages go back to the OS
        need = IN_FLIGHT * max(self._ws[i] for i in self.specs if i not in self.partitions)
        if need > self.budget and self.explicit_budget:
            raise MemoryBudgetError(
                f"budget_bytes (kmp_dask.budget-bytes) = {self.budget / 2**20:.1f} MiB per worker is too small: "
                f"streaming needs {need / 2**20:.1f} MiB (three partitions of rows and state in flight: "
                "computed, prefetched, written back). "
                "Raise it, or unset it to use the worker's memory_limit."
            )
        if need > self.budget:
            raise MemoryBudgetError(
                f"worker memory_limit={(self.limit or 0) / 2**20:.0f} MiB is too small: kmp_dask plans "
                f"{self.fraction:.0%} of it, minus {(self.baseline or 0) / 2**20:.0f} MiB already used by the worker "
                f"process and {self.transient / 2**20:.0f} MiB for a pass's temporaries, leaving "
                f"{max(self.budget, 0) / 2**20:.0f} MiB; streaming needs {need / 2**20:.0f} MiB (two partitions "
                "of rows and state in flight). Raise the workers' memory_limit, or use fewer basis functions."
            )

    def _rebalance(self):
        """Evict resident partitions (last first) until resident + in-flight bytes fit the budget."""
        if self.budget is None:
            return
        for i, p in self.partitions.items():
            self._ws[i] = partition_nbytes(p)
        while self.partitions and sum(self._ws[i] for i in self.partitions) + self._reserve() > self.budget:
            i = max(self.partitions)
            p = self.partitions.pop(i)
            self._ws[i] = streamed_nbytes(p)
            self.pager().save(p)
        self._check_streamable()

    def pager(self) -> Pager:
        if self._pager is None:
            # one partition's arrays: the one written back is reused by the next read (FIFO I/O
            # thread), so the pool is the third of IN_FLIGHT, not more (measured: a pool of three
            # partitions held 12 MiB beyond the plan on a 300 MB worker, benchmarks/notes/small_workers.md)
            self._pager = Pager(self.scratch, local_x=self.local_x, pool_bytes=self._reserve() // IN_FLIGHT)
        return self._pager

    # -- passes --------------------------------------------------------------------------------
    def run(self, op, msg=None, effects=()):
        """Apply ``effects`` then the query ``op`` on each partition (also used to replay a journal).

        Streamed partitions go through one I/O thread in order: the next one is read while this
        one is computed, and a changed one is written back behind the computation (first in,
        first out, so a partition is never read before its previous write has finished).
        """
        self._check_loaded()
        out = []
        stream = [i for i in sorted(self.specs) if i not in self.partitions]
        nxt = self._io(self.pager().load, self.specs[stream[0]]) if stream else None
        writes, k = [], 0
        for i in sorted(self.specs):
            resident = i in self.partitions
            if resident:
                p = self.partitions[i]
            else:
                p, k = nxt.result(), k + 1
                nxt = self._io(self.pager().load, self.specs[stream[k]]) if k < len(stream) else None
            apply_effects(p, effects)
            out.append((i, None if op is None else op(p, msg)))
            if resident and effects and self.budget is not None:
                self._evict_if_over(i, p, writes)
            if not resident:
                self._ws[i] = partition_nbytes(p)
                if effects:
                    clean = not any(getattr(e, "in_place", True) for e in effects)
                    writes.append(self._io(self._write_back, p, clean))
                del p
        for w in writes:  # the pass ends when its state is on disk (errors surface here)
            w.result()
        if effects:
            self._rebalance()
        if stream:
            trim_worker_heap()
        return out

    def _evict_if_over(self, i, p, writes):
        """A resident partition that just grew (the effects of this pass) pages out at once if
        the resident set no longer fits: the state of partitions admitted on their rows alone
        (the init effect adds targets and residual) must not overshoot the budget until the
        pass ends — measured: 10⁷ × 54 rows on 2 × 2.5 GB workers paused both at 80% during
        the init pass before this check."""
        self._ws[i] = partition_nbytes(p)
        if sum(self._ws[j] for j in self.partitions) + self._reserve() <= self.budget:
            return
        del self.partitions[i]
        self._ws[i] = streamed_nbytes(p)
        tune_worker_malloc(STREAM_MMAP_THRESHOLD, STREAM_TRIM_THRESHOLD)
        writes.append(self._io(self._write_back, p, False))

    def _write_back(self, p, clean=False):
        pager = self.pager()
        pager.release(p, pager.save(p, clean))

    def _io(self, fn, *args):
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kmp-dask-io")
        return self._pool.submit(fn, *args)

    def memory_report(self) -> dict:
        """Budget, resident and streamed partitions, bytes paged (for benchmarks and tests)."""
        self._check_loaded()
        pg = self._pager
        return {
            "limit": self.limit, "baseline_rss": self.baseline, "budget": self.budget,
            "resident": sorted(self.partitions), "streamed": sorted(set(self.specs) - set(self.partitions)),
            "resident_bytes": sum(partition_nbytes(p) for p in self.partitions.values()),
            "bytes_written": 0 if pg is None else pg.bytes_written, "bytes_read": 0 if pg is None else pg.bytes_read,
        }

    def nbytes(self) -> int:
        return sum(partition_nbytes(p) for p in self.partitions.values())

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._pager is not None:
            self._pager.close()


def _assign(specs, workers):
    """Contiguous runs of partitions, as even as possible, one run per worker."""
    n, w = len(specs), len(workers)
    groups = [[] for _ in range(w)]
    for k, spec in enumerate(specs):
        groups[k * w // n].append(spec)
    return [(addr, g) for addr, g in zip(workers, groups, strict=True) if g]


class ActorEngine:
    """Partitions resident on dask workers, one :class:`PartitionHolder` actor per worker.

    Parameters
    ----------
    client : distributed.Client
    specs : list of PartitionSpec
        Picklable descriptions of the partitions (reader + row range); workers load the rows.
    max_restarts : int
        How many times a lost worker's partitions are rebuilt before the fit gives up.
    loss_timeout : float
        Seconds to wait, after a connection error from an actor, for the scheduler to report
        its worker gone (the error can arrive first); if it does not, the error is raised.
    memory_fraction : float
        Share of each worker's ``memory_limit`` the process may use (see docs/engine.md, "Out
        of core"); partitions beyond it are streamed from worker-local scratch.
    budget_bytes : int or None
        An explicit per-worker budget for partition rows and state, instead of the fraction.
    local_x : bool
        Streamed partitions re-read their rows from a raw local copy (True) or from the store.
    pass_timeout, pause_timeout, start_timeout : float
        Bounds, in seconds, on one pass, on a worker staying paused by dask's memory manager,
        and on starting a holder; each ends in a clear error instead of a hang.
    """

    def __init__(self, client, specs, *, max_restarts: int = 3, loss_timeout: float = LOSS_TIMEOUT,
                 memory_fraction: float = MEMORY_FRACTION, local_x: bool = True, pass_timeout: float = 3600.0,
                 pause_timeout: float = 120.0, start_timeout: float = 300.0, budget_bytes: int | None = None):
        self.client = client
        self.specs = list(specs)
        self.journal = Journal()
        self.max_restarts = max_restarts
        self.loss_timeout = float(loss_timeout)
        self.memory_fraction, self.local_x = float(memory_fraction), bool(local_x)
        self.pass_timeout, self.pause_timeout = float(pass_timeout), float(pause_timeout)
        self.start_timeout = float(start_timeout)
        self.budget_bytes = budget_bytes
        self.n_restarts = 0
        self.n_calls = 0
        from ._client import _connect_timeout, wait_for_workers

        workers = sorted(wait_for_workers(client, _connect_timeout(None)))  # bounded; NoWorkersError
        groups = _assign(self.specs, workers)
        if budget_bytes is None:
            check_budgets(client, groups, self.memory_fraction)
        self._holders = [self._start(addr, group) for addr, group in groups]

    @property
    def n_partitions(self) -> int:
        return len(self.specs)

    def _start(self, addr, group, attempts: int = 3):
        """Start a holder for ``group`` on ``addr``; a worker lost while it starts (killed during
        the engine's start-up) is replaced by another live worker, up to ``attempts`` times."""
        for attempt in range(attempts):
            try:
                return self._start_once(addr, group)
            except (MemoryBudgetError, SchedulerLostError, TimeoutError, NoWorkersError):
                raise
            except Exception as exc:  # e.g. "Worker holding Actor was lost"
                live = sorted(self._workers())  # the scheduler gone: SchedulerLostError
                if not live and "lost" in str(exc).lower():
                    raise NoWorkersError(
                        f"no live dask workers left: worker {addr} was lost while its partition holder started and "
                        "no other worker is alive. Check the workers' logs (a worker killed for memory needs a "
                        "larger memory limit, e.g. --memory-limit), start workers again, and fit again."
                    ) from exc
                if addr in live and "lost" not in str(exc).lower() or attempt == attempts - 1 or not live:
                    raise
                logger.warning("worker %s lost while its partition holder started (%s); starting it on another "
                               "worker", addr, exc)
                others = [w for w in live if w != addr] or live
                addr = others[attempt % len(others)]
        raise AssertionError("unreachable")

    def _start_once(self, addr, group):
        """One holder started on ``addr``, waited for as every wait is (``_waits.wait_for``): no live
        worker for ``kmp_dask.no-workers-wait`` seconds is NoWorkersError, the scheduler gone
        SchedulerLostError, ``start_timeout`` seconds without the holder a TimeoutError."""
        fut = self.client.submit(PartitionHolder, group, self.memory_fraction, self.local_x, self.budget_bytes,
                                 actor=True, workers=[addr], allow_other_workers=True, pure=False)
        try:
            [actor] = wait_for([fut], self.client, what=f"start of the partition holder on worker {addr}",
                               timeout=self.start_timeout, loss_timeout=self.loss_timeout)
        except TimeoutError:
            fut.cancel()
            self._workers()  # the scheduler gone: say that (SchedulerLostError)
            raise TimeoutError(
                f"starting the partition holder on worker {addr} took more than {self.start_timeout:.0f} s "
                "(loading its partitions); check the worker's logs and the store's reachability from it"
            ) from None
        except MemoryBudgetError:
            raise
        except Exception:  # e.g. cancelled because the scheduler went away while it started
            self._workers()
            raise
        # distributed's Actor proxy binds to the *default* client (get_client()); a client made
        # with set_as_default=False (tests, notebooks with several clients) would leave it
        # unbound, so bind it to ours explicitly.
        if actor._client is None:
            actor._client, actor._future = self.client, fut
        return {"addr": addr, "specs": group, "actor": actor, "future": fut}

    def run(self, op, msg=None, effects=()) -> list:
        try:
            return self._run(op, msg, effects)
        except CancelledError as exc:  # the scheduler cancels every future when it goes away
            err = cancelled_error(self.client, exc)
            if err is not exc:
                raise err from exc
            raise RuntimeError(
                f"the dask scheduler cancelled a task of the fit ({exc}); it is still reachable, so something "
                "cancelled it on purpose (client.cancel, a cluster restart, or the scheduler's own limits): "
                "check its log, and fit again (a KMP fit with checkpoint=DIR resumes with resume=True)"
            ) from exc

    def _run(self, op, msg, effects) -> list:
        self.n_calls += 1
        effects = tuple(effects)
        self.journal.record(effects)  # before sending: a holder rebuilt below replays them too
        calls = []
        for h in list(self._holders):
            try:  # the proxy raises at once when the actor's future has already errored
                calls.append((h, h["actor"].run(op, msg, effects), None))
            except Exception as exc:
                calls.append((h, None, exc))
        results = {}
        for h, call, err in calls:
            try:
                if err is not None:
                    raise err
                results.update(self._wait(h, call))
            except (MemoryBudgetError, SchedulerLostError):
                raise
            except Exception as exc:  # the worker (and the actor state) is gone
                if not self._worker_lost(h, exc):
                    raise
                results.update(self._repair(h, op, msg, exc))
        return [results[s.index] for s in self.specs]

    def _wait(self, holder, call):
        """The call's result, waiting in slices: a worker gone is an error (repaired by the
        caller), a worker paused by dask's memory manager for ``pause_timeout`` or a pass longer
        than ``pass_timeout`` ends the fit with a message saying what to change."""
        start = time.monotonic()
        paused_since = None
        while True:
            try:
                return call.result(timeout=SLICE)
            except TimeoutError:
                pass
            info = self._workers().get(holder["addr"])
            if info is None:
                raise ConnectionError(f"worker {holder['addr']} left the cluster during a pass")
            now = time.monotonic()
            paused_since = (paused_since or now) if info.get("status") == "paused" else None
            if paused_since is not None and now - paused_since > self.pause_timeout:
                limit = info.get("memory_limit") or 0
                raise MemoryBudgetError(
                    f"worker {holder['addr']} has been paused by dask's memory manager for "
                    f"{now - paused_since:.0f} s (process memory above 80% of memory_limit="
                    f"{limit / 2**20:.0f} MiB) while kmp_dask planned {self.memory_fraction:.0%} of it. "
                    "Raise the workers' memory_limit, or lower memory_fraction so more partitions stream."
                )
            if now - start > self.pass_timeout:
                raise TimeoutError(
                    f"one pass on worker {holder['addr']} took more than pass_timeout={self.pass_timeout:.0f} s; "
                    "pass a larger pass_timeout for very large partitions, or check the worker's logs"
                )

    def _workers(self) -> dict:
        """The scheduler's workers; :class:`SchedulerLostError` when it is gone (waiting up to
        ``loss_timeout`` for a reconnecting client: :func:`~._waits.scheduler_workers`)."""
        return scheduler_workers(self.client, float(getattr(self, "loss_timeout", 0.0)))

    def _worker_lost(self, holder, exc=None) -> bool:
        """Whether ``holder``'s worker is gone. A connection error can reach us before the
        scheduler has removed the worker, so after one we wait up to ``loss_timeout`` seconds
        for the scheduler to agree; any other error is the op's own and is raised at once."""
        deadline = time.monotonic() + (self.loss_timeout if isinstance(exc, OSError) else 0.0)
        while True:
            workers = self._workers()
            if holder["addr"] not in workers or holder["future"].status != "finished":
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _repair(self, holder, op, msg, exc):
        if self.n_restarts >= self.max_restarts:
            raise RuntimeError(
                f"worker {holder['addr']} holding partitions "
                f"{[s.index for s in holder['specs']]} was lost and cannot be rebuilt "
                f"(restarts so far: {self.n_restarts})"
            ) from exc
        self.n_restarts += 1
        logger.warning("worker %s lost (%s); rebuilding %d partitions", holder["addr"], exc, len(holder["specs"]))
        try:
            live = await_live_workers(self.client, loss_timeout=self.loss_timeout, message=lambda wait: (
                f"no live dask workers left: worker {holder['addr']} holding partitions "
                f"{[s.index for s in holder['specs']]} was lost and no worker was alive to rebuild them within "
                f"{wait:g} s. Check the workers' logs (a worker killed for memory needs a larger "
                "memory limit, e.g. --memory-limit), start workers again (`dask worker SCHEDULER_ADDRESS`), and "
                "fit again — a KMP fit started with checkpoint=DIR continues with resume=True (CLI: --resume)."))
        except SchedulerLostError:
            raise
        except Exception as err:  # NoWorkersError: chained to the loss that started the repair
            raise err from exc
        new = self._start(live[self.n_restarts % len(live)], holder["specs"])
        self._holders[self._holders.index(holder)] = new
        self._wait(new, new["actor"].run(None, None, tuple(self.journal)))  # replay: same effects, same order
        return dict(self._wait(new, new["actor"].run(op, msg, ())))

    def free_state_bytes(self) -> int | None:
        """Bytes of partition state the workers' budgets still hold beside their resident
        partitions (summed; 0 once any partition streams; None if some worker has no limit)."""
        free = 0
        for r in self.memory_reports().values():
            if r["budget"] is None:
                return None
            if r["streamed"]:
                return 0
            free += max(0, r["budget"] - r["resident_bytes"])
        return free

    def memory_reports(self) -> dict:
        """Per worker: budget, resident and streamed partitions, bytes paged."""
        return {h["addr"]: self._wait(h, h["actor"].memory_report()) for h in self._holders}

    def close(self) -> None:
        keys = {}
        live = self._live_addresses() if self._holders else None
        for h in self._holders:
            try:  # a gone worker's holder is not asked: the call would wait out its 30 s
                if live is None or h["addr"] in live:
                    h["actor"].close().result(timeout=30)
            except Exception:  # the worker may be gone; its scratch goes with its local directory
                pass
            keys.setdefault(h["addr"], []).append(h["future"].key)
            h["future"].release()
            _release_proxy(h["actor"])
            h.clear()
        self._holders = []
        if live is not None:  # nor polled: a gone worker's holders went with it
            keys = {a: k for a, k in keys.items() if a in live}
        if keys:
            _await_released(self.client, keys)

    def _live_addresses(self):
        """The scheduler's workers now, or None when it cannot say (then close asks every holder)."""
        try:
            info = scheduler_identity(self.client)
        except Exception:
            return None
        return set(info["workers"]) if isinstance(info, dict) and "workers" in info else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _release_proxy(actor) -> None:
    """Release the future of its holder's key that an actor proxy holds itself.

    distributed's proxy binds a future of its own when it finds a client (the default one), and
    every method call leaves the proxy in a reference cycle (the call's closure refers to itself),
    so the proxy outlives ``close`` until the next full garbage collection, and its future keeps
    the holder on its worker. Releasing that future frees the holder at once (releasing twice is
    a no-op); a ``gc.collect()`` here did the same at 0.1-2.5 s a close in a large process."""
    own = getattr(actor, "_future", None)
    if own is not None:
        own.release()


RELEASE_WAIT = 10.0
"""Seconds :meth:`ActorEngine.close` waits, at most, for its holders to leave their workers."""


def _held_actors(keys, dask_worker=None):
    """Those of ``keys`` whose actor the worker still holds (run on it with ``client.run``)."""
    return [k for k in keys if k in dask_worker.state.actors]


def _await_released(client, keys: dict, timeout: float = RELEASE_WAIT) -> None:
    """Wait (bounded) until each worker of ``keys`` (address → holder keys) has dropped those holders.

    A holder's partitions are freed on its worker only when the scheduler has forgotten its key,
    some milliseconds to a second after the client released its future. An engine that starts in
    that window (the next pursuit of a cross-validated search, the next fit from a notebook) would
    measure the old holder's memory as the worker's own in :func:`check_budgets` and refuse a budget
    the worker has (measured: a 1 GB worker at 465 MiB right after a streamed fit, 175 MiB three
    seconds later). Past ``timeout``, or if a worker cannot be asked, it returns: the budget check
    then says what it measured."""
    deadline = time.monotonic() + timeout
    while keys and time.monotonic() < deadline:
        try:
            held = client.run(_held_actors, [k for ks in keys.values() for k in ks], workers=list(keys),
                              on_error="return")
        except Exception:  # the scheduler or the workers gone: nothing to wait for
            return
        keys = {a: [k for k in keys[a] if k in held[a]] for a in keys
                if isinstance(held.get(a), list) and any(k in held[a] for k in keys[a])}
        if keys:
            time.sleep(0.05)


def _probe_memory(dask_worker=None):
    """(memory_limit, RSS, local_directory) of a worker (run on it with ``client.run``)."""
    import psutil

    limit = getattr(getattr(dask_worker, "memory_manager", None), "memory_limit", None)
    return limit, psutil.Process(os.getpid()).memory_info().rss


def check_budgets(client, groups, fraction: float) -> None:
    """Fail before any work if some worker's budget cannot stream even its largest partition."""
    try:
        probes = client.run(_probe_memory, workers=[a for a, _ in groups])
    except Exception:  # old workers, restricted clusters: the holders check again on start
        return
    for addr, group in groups:
        limit, rss = probes.get(addr, (None, None))
        if not limit:
            continue
        largest = max(s.nbytes for s in group)
        transient = transient_bytes(largest)
        budget = int(fraction * limit) - int(rss) - transient
        need = IN_FLIGHT * largest
        if need > budget:
            raise MemoryBudgetError(
                f"worker {addr} has memory_limit={limit / 2**20:.0f} MiB; kmp_dask plans {fraction:.0%} of it, "
                f"minus {rss / 2**20:.0f} MiB the worker process already uses and {transient / 2**20:.0f} MiB for "
                f"a pass's temporaries: {max(budget, 0) / 2**20:.0f} MiB, less than the {need / 2**20:.0f} MiB "
                "three streamed partitions of rows need. Start the workers with a larger --memory-limit "
                "(e.g. 1GiB)."
            )
