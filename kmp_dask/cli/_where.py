"""Where a command runs: ``--scheduler auto|sync|local|ADDRESS`` / ``--scheduler-file``.

``sync``
    In this process, no cluster at all (the Python API's ``client="sync"``).
``local``
    An embedded process ``LocalCluster`` on 127.0.0.1 (``--workers`` etc. size it).
``auto`` (the default)
    In process when the command's data (a store's ``X``, a pipeline's sources) hold at most
    :data:`AUTO_CLUSTER_BYTES`; an embedded cluster above that, or when ``--workers`` asks for one.
an address (``tcp://host:8786``, ``tls://…``) or a scheduler file (``.json``)
    A running cluster, optionally over TLS.

Every option is checked before any work (a malformed address, a missing scheduler or
certificate file fails at once, with one line); every wait on the cluster is bounded
(``--connect-timeout``). The dashboard link is printed to stderr when there is one.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path

import click

_FIX = ("Pass an address such as tcp://127.0.0.1:8786 (printed by `dask scheduler`) or a "
        "scheduler file (.json), or one of auto (the default), sync (in process) and local (an embedded cluster).")

#: ``--scheduler`` values that name no running cluster.
MODES = ("auto", "sync", "local")

AUTO_CLUSTER_BYTES = 64 * 2**20
"""``--scheduler auto`` starts the embedded cluster only for data larger than this (64 MiB of
``X``). Measured (benchmarks/cli_scheduler_threshold.py, results/cli_scheduler_threshold.json;
2 shared cores): starting and stopping the embedded 2-worker cluster took 4.4–5.2 s, and the
default KMP fit on 1, 4, 16 and 64 MiB stores took 2.4, 4.3, 27 and 125 s in process against
8.4, 13.5, 27 and 285 s on the started cluster — in process was never slower. Above 64 MiB the
cluster is still the default because the in-process engine holds every partition and the fit's
per-row state in this one process (no memory limit, no out-of-core paging), and a fit on that
much data runs for minutes, so the start costs a few per cent at most."""


@dataclass(frozen=True)
class Where:
    """The parsed ``--scheduler …`` / ``--workers …`` / ``--tls-…`` options of one command."""

    scheduler: str | None = None  # None: --scheduler not given (auto, unless a pipeline's [run] says)
    workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: str = "auto"
    local_directory: str | None = None
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    connect_timeout: float = 30.0

    @property
    def tls(self) -> bool:
        return any((self.tls_ca_file, self.tls_cert, self.tls_key))


def where_options(fn):
    """Add the where-to-run options to a command; it receives them as ``where=Where(...)``."""
    opts = [
        click.option("--scheduler", default=None, metavar="auto|sync|local|ADDRESS",
                     help="sync: in this process, no cluster; local: an embedded LocalCluster of processes on "
                          "127.0.0.1; an address (tcp://host:8786, tls://host:8786) or scheduler file: a running "
                          f"cluster. Default auto: in process for data up to {AUTO_CLUSTER_BYTES // 2**20} MiB, "
                          "an embedded cluster above that (or with --workers)."),
        click.option("--scheduler-file", default=None, type=click.Path(dir_okay=False),
                     help="The JSON file written by `dask scheduler --scheduler-file FILE`."),
        click.option("--workers", default=None, type=click.IntRange(1, 256),
                     help="Embedded cluster: worker processes (default: one per core, at most 8)."),
        click.option("--threads-per-worker", default=1, show_default=True, type=click.IntRange(1, 256),
                     help="Embedded cluster: threads per worker."),
        click.option("--memory-limit", default="auto", show_default=True,
                     help="Embedded cluster: memory limit per worker, e.g. 2GB ('auto' shares the machine's; "
                          "0 means none; at least 256MiB)."),
        click.option("--local-directory", default=None, type=click.Path(file_okay=False),
                     help="Embedded cluster: workers' scratch directory (where partitions page out of core)."),
        click.option("--tls-ca-file", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="TLS: the certificate authority that signed the scheduler's certificate."),
        click.option("--tls-cert", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="TLS: this client's certificate."),
        click.option("--tls-key", default=None, type=click.Path(exists=True, dir_okay=False),
                     help="TLS: this client's private key."),
        click.option("--connect-timeout", default=30.0, show_default=True, type=click.FloatRange(0.1, 3600),
                     help="Seconds to wait for the scheduler (connection and dask handshake), then for its "
                          "first worker, and for an object store (s3://) to answer a request, before giving up "
                          "with an error."),
    ]

    @functools.wraps(fn)
    def wrapper(*args, scheduler, scheduler_file, workers, threads_per_worker, memory_limit, local_directory,
                tls_ca_file, tls_cert, tls_key, connect_timeout, **kwargs):
        where = Where(scheduler, workers, threads_per_worker, memory_limit, local_directory,
                      tls_ca_file, tls_cert, tls_key, connect_timeout)
        if scheduler_file is not None:
            if scheduler is not None:
                raise click.UsageError("pass either --scheduler or --scheduler-file, not both")
            where = Where(**{**where.__dict__, "scheduler": scheduler_file})
        check_where(where)
        import dask

        # the same bound for the object store as for the scheduler (kmp_dask/store/_remote.py)
        with dask.config.set({"kmp_dask.storage-timeout": float(where.connect_timeout)}):
            return fn(*args, where=where, **kwargs)

    for opt in reversed(opts):
        wrapper = opt(wrapper)
    return wrapper


def check_where(where: Where) -> None:
    """Refuse bad options before any work: the address's form, missing files, TLS pieces, the
    embedded cluster's memory limit (its form and the 256 MiB floor)."""
    from ..parallel._client import check_memory_limit, check_scheduler_address

    try:
        check_memory_limit(where.memory_limit, name="--memory-limit")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--memory-limit") from None

    if where.scheduler in MODES:
        if where.tls:
            raise click.UsageError(f"--tls-* options need a scheduler address (tls://...), not --scheduler "
                                   f"{where.scheduler}")
        return
    if where.scheduler is not None:
        s = where.scheduler
        if s.endswith(".json") or Path(s).is_file():
            if not Path(s).is_file():
                raise click.BadParameter(f"no scheduler file at {s!r}. {_FIX}", param_hint="--scheduler")
        else:
            if s.startswith("inproc://"):
                raise click.BadParameter(
                    f"{s!r} is an inproc:// address: it names a scheduler inside one Python process, which a "
                    "kmp-dask command (a process of its own) cannot reach. Give the cluster's tcp:// address (the "
                    "one `dask scheduler` prints, e.g. tcp://127.0.0.1:8786), its scheduler file, or --scheduler "
                    "local for an embedded cluster.", param_hint="--scheduler")
            try:
                check_scheduler_address(s, name="--scheduler", fix=_FIX)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--scheduler") from None
            if where.tls and not s.startswith("tls://"):
                raise click.BadParameter(f"{s!r}: TLS certificates were given, so the address must start with tls://",
                                         param_hint="--scheduler")
    if where.scheduler is not None and not where.tls and _address(where.scheduler).startswith("tls://"):
        raise click.UsageError(f"the scheduler at {_address(where.scheduler)} speaks TLS: pass --tls-ca-file, "
                               "--tls-cert and --tls-key (certificates signed by the cluster's CA)")
    if where.tls:
        if where.scheduler is None:
            raise click.UsageError("--tls-* options need --scheduler or --scheduler-file "
                                   "(the embedded cluster is local)")
        missing = [n for n, v in (("--tls-ca-file", where.tls_ca_file), ("--tls-cert", where.tls_cert),
                                  ("--tls-key", where.tls_key)) if not v]
        if missing:
            raise click.UsageError(f"TLS needs all of --tls-ca-file, --tls-cert and --tls-key; "
                                   f"missing {', '.join(missing)}")


def _address(scheduler: str) -> str:
    """The address itself, or the one a scheduler file records ('' when unreadable: checked later)."""
    if scheduler.endswith(".json") or Path(scheduler).is_file():
        try:
            return str(json.loads(Path(scheduler).read_text())["address"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""
    return scheduler


def _security(where: Where):
    if not where.tls:
        return None
    from distributed import Security

    return Security(tls_ca_file=where.tls_ca_file, tls_client_cert=where.tls_cert, tls_client_key=where.tls_key,
                    require_encryption=True)


def store_nbytes(store) -> int:
    """The bytes of a store's ``X`` (what ``--scheduler auto`` weighs)."""
    import numpy as np

    return int(store.n_rows) * int(store.n_features) * np.dtype(store.dtype).itemsize


def data_nbytes(data) -> int | None:
    """What ``--scheduler auto`` weighs for data to score: a store's ``X``, a file's size on disk
    (None for a remote file)."""
    import os

    if data.store is not None:
        return store_nbytes(data.store)
    url = str(data.url)
    return os.path.getsize(url) if "://" not in url and os.path.isfile(url) else None


def mode(where: Where, nbytes: int | None) -> str:
    """``sync``, ``local`` or ``address``: where a command on ``nbytes`` of data runs (module doc)."""
    s = where.scheduler or "auto"
    if s not in MODES:
        return "address"
    if s == "auto":
        big = nbytes is not None and nbytes > AUTO_CLUSTER_BYTES
        return "local" if where.workers is not None or big else "sync"
    return s


def _size_text(nbytes) -> str:
    return "size unknown" if nbytes is None else f"{nbytes / 2**20:.3g} MiB"


@contextlib.contextmanager
def running(where: Where, *, quiet: bool = False, nbytes: int | None = None):
    """What the command passes as ``client``: ``"sync"`` (in process), or a ``distributed.Client``
    closed (and the embedded cluster stopped) after. ``nbytes``: the data's size, for ``auto``."""
    m = mode(where, nbytes)
    if m == "sync":
        if not quiet:
            why = ("--scheduler sync" if where.scheduler == "sync" else
                   f"--scheduler auto: data {_size_text(nbytes)} <= {AUTO_CLUSTER_BYTES // 2**20} MiB; "
                   "--scheduler local starts a cluster")
            click.echo(f"dask: in process, no cluster ({why})", err=True)
        yield "sync"
        return
    from ..parallel import connect, embedded_cluster

    if m == "address":
        cm = connect(where.scheduler, security=_security(where), timeout=where.connect_timeout)
    else:
        cm = embedded_cluster(where.workers, threads_per_worker=where.threads_per_worker,
                              memory_limit=where.memory_limit, local_directory=where.local_directory,
                              timeout=where.connect_timeout)
    with cm as client:
        if not quiet:
            _announce(client, where, nbytes)
        yield client


def _announce(client, where: Where, nbytes=None) -> None:
    from ..parallel._client import scheduler_identity  # every worker, not the client's cache

    info = scheduler_identity(client)
    workers = info.get("workers", {})
    what = where.scheduler if mode(where, nbytes) == "address" else "embedded LocalCluster"
    if (where.scheduler or "auto") == "auto":
        big = nbytes is not None and nbytes > AUTO_CLUSTER_BYTES
        what += (f"; --scheduler auto: data {_size_text(nbytes)} > {AUTO_CLUSTER_BYTES // 2**20} MiB" if big
                 else "; --workers given")
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    click.echo(f"dask: {len(workers)} workers, {threads} threads ({what})", err=True)
    link = getattr(client, "dashboard_link", None)
    if link and info.get("services", {}).get("dashboard"):
        click.echo(f"dask dashboard: {link}", err=True)
