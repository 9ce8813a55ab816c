"""Engines: where partitions live and how one pass over them runs.

An engine owns a list of row partitions (:class:`~kmp_dask.blockops.Partition`) and offers one
operation, ``run(op, msg, effects=()) -> list`` — on every partition apply the state-changing
``effects`` in order, then the query ``op(partition, msg)``, and return the query results *in
partition order*. Drivers (``kmp_dask.greedy``) sum them in that order, so a fit is bit-for-bit
reproducible whatever the number of workers (DESIGN.md §5). Every effect sent is recorded in the
engine's :class:`~kmp_dask.blockops.Journal`; ``n_calls`` counts passes (one round trip each).

Two implementations:

* :class:`InProcessEngine` — partitions in this process; used for numpy input without a cluster
  and as the reference in tests.
* :class:`ActorEngine` — one :class:`PartitionHolder` dask Actor per worker, each holding a
  contiguous run of partitions, resident for the whole fit. A pass is one actor call per worker
  (small message in, small reductions out): ECOSYSTEM.md §3.3 measured 36 ms/iteration for this
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

from ..blockops import Journal, apply_effects

__all__ = ["InProcessEngine", "ActorEngine", "PartitionHolder"]

logger = logging.getLogger(__name__)


class InProcessEngine:
    """All partitions in the calling process; ``run`` is a loop."""

    def __init__(self, specs):
        self.partitions = [spec.load() for spec in specs]
        self.journal = Journal()
        self.n_calls = 0

    @property
    def n_partitions(self) -> int:
        return len(self.partitions)

    def run(self, op, msg=None, effects=()) -> list:
        self.n_calls += 1
        effects = tuple(effects)
        self.journal.record(effects)
        out = []
        for p in self.partitions:
            apply_effects(p, effects)
            out.append(None if op is None else op(p, msg))
        return out

    def close(self) -> None:
        self.partitions = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: glibc mallopt parameters (see ``man mallopt``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


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
    if os.environ.get("KMP_DASK_MALLOC_TUNING", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    except (OSError, AttributeError):
        return False


class PartitionHolder:
    """Dask Actor holding a run of partitions on one worker (loaded on the worker itself)."""

    def __init__(self, specs):
        self.malloc_tuned = tune_worker_malloc()
        self.partitions = {spec.index: spec.load() for spec in specs}

    def run(self, op, msg=None, effects=()):
        """Apply ``effects`` then the query ``op`` on each partition (also used to replay a journal)."""
        out = []
        for i, p in sorted(self.partitions.items()):
            apply_effects(p, effects)
            out.append((i, None if op is None else op(p, msg)))
        return out

    def nbytes(self) -> int:
        total = 0
        for p in self.partitions.values():
            total += p.X.nbytes
            total += sum(getattr(v, "nbytes", 0) for v in p.state.values())
        return total


def _assign(specs, workers):
    """Contiguous runs of partitions, as even as possible, one run per worker."""
    n, w = len(specs), len(workers)
    groups = [[] for _ in range(w)]
    for k, spec in enumerate(specs):
        groups[k * w // n].append(spec)
    return [(addr, g) for addr, g in zip(workers, groups) if g]


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
    """

    def __init__(self, client, specs, *, max_restarts: int = 3, loss_timeout: float = 30.0):
        self.client = client
        self.specs = list(specs)
        self.journal = Journal()
        self.max_restarts = max_restarts
        self.loss_timeout = float(loss_timeout)
        self.n_restarts = 0
        self.n_calls = 0
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        if not workers:
            raise RuntimeError("the dask cluster has no workers; start some or pass client='sync'")
        self._holders = [self._start(addr, group) for addr, group in _assign(self.specs, workers)]

    @property
    def n_partitions(self) -> int:
        return len(self.specs)

    def _start(self, addr, group):
        fut = self.client.submit(PartitionHolder, group, actor=True, workers=[addr], allow_other_workers=True, pure=False)
        actor = fut.result()
        # distributed's Actor proxy binds to the *default* client (get_client()); a client made
        # with set_as_default=False (tests, notebooks with several clients) would leave it
        # unbound, so bind it to ours explicitly.
        if actor._client is None:
            actor._client, actor._future = self.client, fut
        return {"addr": addr, "specs": group, "actor": actor, "future": fut}

    def run(self, op, msg=None, effects=()) -> list:
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
                results.update(call.result())
            except Exception as exc:  # the worker (and the actor state) is gone
                if not self._worker_lost(h, exc):
                    raise
                results.update(self._repair(h, op, msg, exc))
        return [results[s.index] for s in self.specs]

    def _worker_lost(self, holder, exc=None) -> bool:
        """Whether ``holder``'s worker is gone. A connection error can reach us before the
        scheduler has removed the worker, so after one we wait up to ``loss_timeout`` seconds
        for the scheduler to agree; any other error is the op's own and is raised at once."""
        deadline = time.monotonic() + (self.loss_timeout if isinstance(exc, OSError) else 0.0)
        while True:
            workers = self.client.scheduler_info(n_workers=-1)["workers"]
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
        deadline = time.monotonic() + 60
        while True:
            live = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
            if live:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no live dask workers left to rebuild lost partitions") from exc
            time.sleep(0.5)
        new = self._start(live[self.n_restarts % len(live)], holder["specs"])
        self._holders[self._holders.index(holder)] = new
        new["actor"].run(None, None, tuple(self.journal)).result()  # replay: same effects, same order
        return dict(new["actor"].run(op, msg, ()).result())

    def close(self) -> None:
        for h in self._holders:
            h["future"].release()
        self._holders = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
