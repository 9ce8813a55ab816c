#!/usr/bin/env python
"""Compare package versions on this client, the scheduler and every worker of a dask cluster.

A version mismatch between client and workers is the classic failure of a dask deployment
(pickled functions that do not unpickle, messages the other side does not understand, or a
worker silently running older kmp_dask code). Run this before a job, against the cluster the job
will use; the start scripts and launchers in this folder run it at start::

    python cluster/check_versions.py --scheduler-file cluster/scheduler.json
    python cluster/check_versions.py tcp://10.0.0.5:8786 --min-workers 4 --timeout 60
    python cluster/check_versions.py tls://10.0.0.5:8786 --tls-ca-file ca.pem --tls-cert node.pem --tls-key node.key

Exit status: 0 all versions match; 1 one line per mismatch on stderr (``MISMATCH ...``); 2 the
cluster could not be reached (or did not reach ``--min-workers``) within ``--timeout`` seconds.

What is compared (``PACKAGES``): python, dask, distributed, cloudpickle, msgpack, numpy, zarr,
scikit-learn and kmp_dask. Workers must match the client in all of them — they unpickle and run
kmp_dask's code. kmp_dask is compared by importing it on each worker (``client.run``), so a
worker that cannot import it at all is reported too. The scheduler runs no kmp_dask code and
never deserialises task data, so it is compared only in what it executes (``SCHEDULER_PACKAGES``:
python, dask, distributed, cloudpickle, msgpack); ``--scheduler-all`` compares it in everything.
Python is compared as major.minor (bytecode and pickle compatibility are per minor release);
``--strict-python`` compares the full version.

Only the standard library and distributed are needed; the script does not import kmp_dask
unless it is installed (then its version is the client's reference).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata

#: (label, distribution name in importlib.metadata) — the label is what is printed
PACKAGES = (
    ("python", None),
    ("dask", "dask"),
    ("distributed", "distributed"),
    ("cloudpickle", "cloudpickle"),
    ("msgpack", "msgpack"),
    ("numpy", "numpy"),
    ("zarr", "zarr"),
    ("scikit-learn", "scikit-learn"),
    ("kmp_dask", None),
)
SCHEDULER_PACKAGES = ("python", "dask", "distributed", "cloudpickle", "msgpack")
MISSING = "MISSING"


def kmp_dask_version() -> str:
    """kmp_dask's version as this process imports it (``MISSING`` if it cannot)."""
    try:
        import kmp_dask
    except Exception:  # ImportError, or a broken install failing at import
        return MISSING
    return str(getattr(kmp_dask, "__version__", "unknown"))


def _from_distributed(info: dict | None) -> dict[str, str]:
    """Our labels from one entry of ``client.get_versions(check=False)``."""
    if not info:
        return {}
    packages = info.get("packages") or {}
    out = {}
    for label, dist in PACKAGES:
        if label == "python":
            v = packages.get("python") or (info.get("host") or {}).get("python") or MISSING
            out[label] = ".".join(v.split(".")[:3])  # distributed reports e.g. 3.11.7.final.0
        elif dist is not None:
            out[label] = packages.get(dist) or MISSING
    return out


def local_versions() -> dict[str, str]:
    """This process's versions, labelled as in :data:`PACKAGES`."""
    out = {"python": ".".join(map(str, sys.version_info[:3]))}
    for label, dist in PACKAGES:
        if dist is not None:
            try:
                out[label] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[label] = MISSING
    out["kmp_dask"] = kmp_dask_version()
    return out


def _normal(label: str, version: str, strict_python: bool) -> str:
    if label == "python" and not strict_python and version != MISSING:
        return ".".join(version.split(".")[:2])
    if label == "python":
        return ".".join(version.split(".")[:3])
    return version


def compare(client_v: dict, scheduler_v: dict, workers_v: dict[str, dict], *,
            scheduler_all: bool = False, strict_python: bool = False) -> list[str]:
    """One line per (package, process) that differs from the client. Pure function (tested)."""
    lines = []
    for label, _ in PACKAGES:
        ref = client_v.get(label, MISSING)
        ref_n = _normal(label, ref, strict_python)
        if scheduler_all or label in SCHEDULER_PACKAGES:
            got = scheduler_v.get(label, MISSING)
            if _normal(label, got, strict_python) != ref_n:
                lines.append(f"MISMATCH {label}: client {ref}, scheduler {got}")
        for addr in sorted(workers_v):
            got = workers_v[addr].get(label, MISSING)
            if _normal(label, got, strict_python) != ref_n:
                lines.append(f"MISMATCH {label}: client {ref}, worker {addr} {got}")
    return lines


def collect(client) -> tuple[dict, dict, dict[str, dict]]:
    """(client, scheduler, {worker address: versions}) from a connected ``distributed.Client``."""
    if __name__ != "__main__":  # imported (e.g. by slurm_launcher.py): ship our functions by value
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    extra = [d for _, d in PACKAGES if d is not None]
    raw = client.get_versions(check=False, packages=extra)
    client_v = local_versions()
    scheduler_v = _from_distributed(raw.get("scheduler"))
    scheduler_v["kmp_dask"] = client.run_on_scheduler(kmp_dask_version)
    workers_v = {addr: _from_distributed(info) for addr, info in (raw.get("workers") or {}).items()}
    if workers_v:  # the same workers (one may join between the two calls)
        for addr, v in client.run(kmp_dask_version, workers=list(workers_v), on_error="return").items():
            workers_v[addr]["kmp_dask"] = v if isinstance(v, str) else f"{MISSING} ({type(v).__name__})"
    return client_v, scheduler_v, workers_v


def _security(args):
    parts = (args.tls_ca_file, args.tls_cert, args.tls_key)
    if not any(parts):
        return None
    if not all(parts):
        raise SystemExit("check_versions: TLS needs all of --tls-ca-file, --tls-cert and --tls-key")
    from distributed import Security

    return Security(tls_ca_file=args.tls_ca_file, tls_client_cert=args.tls_cert, tls_client_key=args.tls_key,
                    require_encryption=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("address", nargs="?", help="scheduler address (tcp://host:port, tls://host:port)")
    p.add_argument("--scheduler-file", help="the JSON file written by `dask scheduler --scheduler-file`")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for the connection and for --min-workers (default 30)")
    p.add_argument("--min-workers", type=int, default=1,
                   help="wait until at least this many workers are connected (0: scheduler only; default 1)")
    p.add_argument("--scheduler-all", action="store_true", help="compare the scheduler in every package")
    p.add_argument("--strict-python", action="store_true", help="compare python's full version, not major.minor")
    p.add_argument("--tls-ca-file")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--json", action="store_true", help="print every process's versions as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="print nothing when the versions match")
    args = p.parse_args(argv)
    if bool(args.address) == bool(args.scheduler_file):
        p.error("give a scheduler address or --scheduler-file (one of them)")

    from distributed import Client

    security = _security(args)
    target = args.address or args.scheduler_file
    address = args.address
    if args.scheduler_file:
        try:
            with open(args.scheduler_file) as f:
                address = json.load(f)["address"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"check_versions: cannot read the scheduler file {args.scheduler_file}: {exc}", file=sys.stderr)
            return 2
    if address.startswith("tls://") and security is None:
        print(f"check_versions: {address} is a TLS scheduler: pass --tls-ca-file, --tls-cert and --tls-key",
              file=sys.stderr)
        return 2
    try:
        kw = {"scheduler_file": args.scheduler_file} if args.scheduler_file else {"address": args.address}
        with Client(**kw, security=security, timeout=f"{args.timeout}s", set_as_default=False) as client:
            if args.min_workers > 0:
                client.wait_for_workers(args.min_workers, timeout=args.timeout)
            client_v, scheduler_v, workers_v = collect(client)
    except Exception as exc:  # OSError, TimeoutError, ValueError (bad file / address)
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"check_versions: cannot use the cluster at {target} within {args.timeout:g} s: "
              f"{type(exc).__name__}: {msg}", file=sys.stderr)
        return 2

    lines = compare(client_v, scheduler_v, workers_v, scheduler_all=args.scheduler_all,
                    strict_python=args.strict_python)
    if args.json:
        print(json.dumps({"client": client_v, "scheduler": scheduler_v, "workers": workers_v}, indent=1))
    for line in lines:
        print(line, file=sys.stderr)
    if lines:
        return 1
    if not args.quiet:
        summary = ", ".join(f"{k} {v}" for k, v in client_v.items())
        print(f"check_versions: OK — scheduler and {len(workers_v)} worker(s) match this client ({summary})",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
