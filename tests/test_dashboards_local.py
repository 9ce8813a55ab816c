"""Every dask cluster the project starts (its own code, the tests, the benchmarks) keeps its dashboard
on the loopback interface, or opens none.

``dashboard_address="127.0.0.1:0"`` binds every interface of the machine: anyone on the network could watch
(and, through the dashboard's pages, learn the task graphs and data sizes of) a test run. Read from
the source with ``ast``: every ``dashboard_address=`` keyword (in a call or a ``dict(...)`` of options)
is ``None`` or a string on ``127.0.0.1`` / ``localhost`` (a conditional of those), every
``LocalCluster(...)`` call names one, directly or through ``**options`` that do (and, with worker
threads — ``processes=False`` —, a loopback ``worker_dashboard_address``: those workers' HTTP servers
otherwise listen on every interface), and every
``dask scheduler`` command line's ``--dashboard-address`` is on loopback.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("kmp_dask", "tests", "benchmarks", "notebooks", "cluster")
LOCAL = ("127.0.0.1:", "localhost:")


def _local(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None or (isinstance(node.value, str) and node.value.startswith(LOCAL))
    if isinstance(node, ast.IfExp):
        return _local(node.body) and _local(node.orelse)
    return False  # a name or a call: not provably local


def _sources():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if "dashboard" in text or "LocalCluster" in text:  # parse only the files that may start one
                yield path, ast.parse(text, filename=str(path))


def _is_local_cluster(call: ast.Call) -> bool:
    f = call.func
    return ((isinstance(f, ast.Name) and f.id == "LocalCluster")
            or (isinstance(f, ast.Attribute) and f.attr == "LocalCluster"))


def _findings() -> list[str]:
    return [f for path, tree in _sources() for f in _tree_findings(tree, path.relative_to(ROOT))]


def _tree_findings(tree, where) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List):  # a `dask scheduler` command line
            out += [f"{where}:{node.lineno}: --dashboard-address {ast.unparse(b)}"
                    for a, b in zip(node.elts, node.elts[1:], strict=False)
                    if isinstance(a, ast.Constant) and a.value == "--dashboard-address" and not _local(b)]
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg == "dashboard_address" and not _local(kw.value):
                out.append(f"{where}:{node.lineno}: dashboard_address={ast.unparse(kw.value)}")
        kws = {kw.arg: kw.value for kw in node.keywords}
        threads = isinstance(kws.get("processes"), ast.Constant) and kws["processes"].value is False \
            and not (isinstance(kws.get("n_workers"), ast.Constant) and kws["n_workers"].value == 0)
        if _is_local_cluster(node) and threads and not _local(kws.get("worker_dashboard_address", ast.Constant(":0"))):
            out.append(f"{where}:{node.lineno}: LocalCluster(processes=False, ...) without a loopback "
                       "worker_dashboard_address (its worker threads serve HTTP on every interface)")
        if _is_local_cluster(node) and not any(kw.arg in ("dashboard_address", None) for kw in node.keywords):
            out.append(f"{where}:{node.lineno}: LocalCluster(...) without dashboard_address (default :8787 on "
                       "every interface)")
    return out


def test_every_cluster_dashboard_is_on_loopback_or_off():
    found = _findings()
    assert not found, "dashboards open on every interface:\n" + "\n".join(found)


def test_the_scan_sees_a_public_dashboard():
    tree = ast.parse('LocalCluster(n_workers=1, dashboard_address=":0")\nLocalCluster(n_workers=1)\n'
                     'dict(dashboard_address="127.0.0.1:0")\nLocalCluster(dashboard_address=None)\n'
                     'LocalCluster(processes=False, dashboard_address=None)\n'
                     'LocalCluster(processes=False, dashboard_address=None, worker_dashboard_address="127.0.0.1:0")\n'
                     'cmd = ["dask", "scheduler", "--dashboard-address", ":8787"]\n')
    found = _tree_findings(tree, "x.py")
    assert sorted(int(f.split(":")[1]) for f in found) == [1, 2, 5, 7], found


@pytest.mark.filterwarnings("ignore")
def test_the_thread_cluster_http_servers_listen_on_loopback(thread_cluster):
    servers = [thread_cluster.scheduler.http_server] + [w.http_server for w in thread_cluster.workers.values()]
    hosts = {s.getsockname()[0] for server in servers for s in server._sockets.values()}
    assert hosts == {"127.0.0.1"}, hosts
