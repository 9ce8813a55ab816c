"""Out of core: partitions beyond a worker's budget are streamed from scratch, same model.

Fast variants use an explicit per-worker budget (``kmp_dask.budget-bytes``) on a small store, so
some partitions stay resident and the others stream; the slow test uses real ``memory_limit``s
on a store several times their total.
"""

from __future__ import annotations

import logging

import dask
import numpy as np
import pytest

from kmp_dask import KMPClassifier
from kmp_dask.blockops import Partition, kmp_effects
from kmp_dask.datasets import make_classification_store
from kmp_dask.parallel import ActorEngine, partition_specs
from kmp_dask.parallel._paging import MemoryBudgetError, Pager
from kmp_dask.store import open_store

# the stored cache pages (a tight budget would otherwise let basis_columns="auto" recompute)
KW = dict(n_basis=12, candidates=40, gamma=0.05, random_state=3, basis_columns="stored")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("ooc") / "train.zarr"
    return make_classification_store(str(path), 120_000, n_features=20, n_classes=3, chunk_rows=30_000,
                                     random_state=1)


def _fit(store, client, **config):
    with dask.config.set({f"kmp_dask.{k}": v for k, v in config.items()}):
        return KMPClassifier(client=client, **KW).fit(store)


def test_streamed_partitions_give_the_resident_model_bit_for_bit(store, process_client):
    resident = _fit(store, process_client)
    streamed = _fit(store, process_client, **{"budget-bytes": 20 << 20})
    from_zarr = _fit(store, process_client, **{"budget-bytes": 20 << 20, "local-x": False})
    for est in (streamed, from_zarr):
        assert est.basis_indices_.tolist() == resident.basis_indices_.tolist()
        assert np.array_equal(est.dual_coef_, resident.dual_coef_)
        assert np.array_equal(est.intercept_, resident.intercept_)


def test_auto_recomputes_the_columns_when_the_budget_cannot_hold_them(store, process_client):
    """basis_columns="auto" asks the workers' budgets: with room it stores the columns; with a
    budget below rows + columns it recomputes them — the same model as an in-process recomputed
    fit, bit for bit (the choice, not the cluster, decides the rounding)."""
    # columns + residual state 120k × (22 × 4 + 3 × 24) B = 19.2 MB: more than 2 × 10 MiB minus the rows
    # (120k × 88 B) leaves
    kw = {**KW, "basis_columns": "auto", "n_basis": 20}
    roomy = KMPClassifier(client=process_client, **kw).fit(store)
    with dask.config.set({"kmp_dask.budget-bytes": 10 << 20}):
        tight = KMPClassifier(client=process_client, **kw).fit(store)
    local = KMPClassifier(client="sync", **{**kw, "basis_columns": "recomputed"}).fit(store)
    assert (roomy.basis_columns_, tight.basis_columns_) == ("stored", "recomputed")
    assert tight.basis_indices_.tolist() == local.basis_indices_.tolist()
    assert np.array_equal(tight.dual_coef_, local.dual_coef_)
    assert tight.score(store) > 0.5


def test_engine_streams_what_exceeds_the_budget_and_matches_in_process(store, process_client):
    """At the driver level: after a fit under a budget, each worker holds some partitions
    resident and streams the others (bytes actually paged), and the result is bit for bit that
    of the same engine with everything resident."""
    from kmp_dask.greedy import kernel_matching_pursuit
    from kmp_dask.kernels import get_kernel
    from kmp_dask.parallel import InProcessEngine

    st = open_store(str(store.url))
    specs = partition_specs(st)
    assert len(specs) == 8  # 4 chunks of 30k rows: 2 partitions each (≥ 8 per store)
    kw = dict(kernel=get_kernel("rbf", gamma=0.05), n_rows=st.n_rows, n_features=st.n_features, dtype=st.dtype,
              targets={"kind": "ovr", "classes": [0, 1, 2]}, n_basis=10, candidates=30, random_state=0)
    with ActorEngine(process_client, specs, budget_bytes=20 << 20) as eng:
        res = kernel_matching_pursuit(eng, **kw)
        reports = eng.memory_reports()
    assert all(r["streamed"] for r in reports.values()), reports
    assert any(r["resident"] for r in reports.values()), reports
    assert all(r["bytes_read"] > 0 and r["bytes_written"] > 0 for r in reports.values())
    assert all(r["resident_bytes"] <= 20 << 20 for r in reports.values())
    with ActorEngine(process_client, specs) as eng:  # everything resident
        expected = kernel_matching_pursuit(eng, **kw)
        assert not any(r["streamed"] for r in eng.memory_reports().values())
    assert res.basis_indices.tolist() == expected.basis_indices.tolist()
    assert np.array_equal(res.coef, expected.coef)
    with InProcessEngine(specs) as ref:  # the driver's process (its BLAS may round differently)
        local = kernel_matching_pursuit(ref, **kw)
    assert local.basis_indices.tolist() == res.basis_indices.tolist()
    np.testing.assert_allclose(local.coef, res.coef, rtol=1e-12, atol=1e-12 * np.abs(local.coef).max())


def test_budget_too_small_fails_before_any_work(store, process_client):
    specs = partition_specs(open_store(str(store.url)))
    with pytest.raises(MemoryBudgetError, match="budget_bytes .* too small"):
        ActorEngine(process_client, specs, budget_bytes=1 << 20)


def test_pager_round_trip_keeps_state_and_aliases(tmp_path):
    """State arrays come back equal; the partition's own rows are re-read, not written."""
    from kmp_dask.blockops import Atom, KMPSetup, apply_effects
    from kmp_dask.kernels import get_kernel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)

    class Reader:
        def read_range(self, a, b):
            return X[a:b], y[a:b]

    from kmp_dask.blockops import PartitionSpec

    spec = PartitionSpec(0, 0, 20000, Reader(), 6 * 4 + 8)
    part = spec.load()
    setup = KMPSetup((get_kernel("rbf", gamma=0.2),), None, {"kind": "ovr", "classes": [0, 1]}, np.zeros(1), 0.0, 0, 10)
    apply_effects(part, [kmp_effects.init(setup), kmp_effects.pend(Atom(X[3], 0, 3)), kmp_effects.accept(),
                         kmp_effects.set_coef(np.array([[0.5]]))])
    pager = Pager(str(tmp_path))
    pager.save(part)
    back = pager.load(spec)
    a, b = part.state["kmp"], back.state["kmp"]
    assert b.views.Xtr is back.X  # no validation split: the view is the rows themselves
    assert np.array_equal(a.cache.train(), b.cache.train()) and b.cache.Btr.shape == a.cache.Btr.shape
    written = pager.bytes_written
    pager.save(back)  # read-only arrays (views, targets) are not written again: R + the open block
    assert pager.bytes_written - written < 20000 * 8 + 20000 * 4 + (64 << 10)
    again = pager.load(spec).state["kmp"]
    assert np.array_equal(again.fit.R, a.fit.R) and np.array_equal(again.views.sq_tr, a.views.sq_tr)
    assert not again.fit.Y.flags.writeable and again.fit.R.flags.writeable
    assert np.array_equal(a.fit.R, b.fit.R) and np.array_equal(a.fit.coef, b.fit.coef)
    assert isinstance(back, Partition) and np.array_equal(back.X, X)
    pager.close()


class _WorkerWatch:
    """Polls the scheduler every 0.5 s during a fit: every status a worker had, and its address
    (a nanny restart gives a worker a new address)."""

    def __init__(self, client):
        import threading

        self.client, self.seen, self.stop = client, {}, threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self.stop.is_set():
            for addr, w in self.client.scheduler_info()["workers"].items():
                self.seen.setdefault(addr, set()).add(w["status"])
            self.stop.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_store_larger_than_the_memory_limits(tmp_path):
    """Real memory limits: a 6 GB store (float32, 2.8·10⁷ × 54) on 2 workers × 600 MB — 5× the
    workers' total memory_limit — fits 30 atoms with no worker ever paused or restarted (polled
    every 0.5 s), and gives the model of the same fit with everything resident (2 workers with
    room for it all). A limit whose planned half is below what an idle worker with numpy, scipy
    and zarr imported already holds (~100 MiB) cannot work, and the budget check says so before
    any work (asserted first, at 200 MB; smaller workers: tests/parallel/test_small_workers.py)."""
    from distributed import Client, LocalCluster

    rows = 28_000_000
    big = make_classification_store(str(tmp_path / "big.zarr"), rows, n_features=54, n_classes=2, random_state=2)
    assert rows * 54 * 4 >= 5 * 2 * 600e6
    kw = dict(n_basis=30, candidates=59, gamma=0.05, random_state=0, basis_columns="stored")
    opts = dict(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                silence_logs=logging.ERROR)
    with LocalCluster(memory_limit="200MB", **opts) as cluster, Client(cluster) as client:
        with pytest.raises(MemoryBudgetError, match="memory_limit"):
            KMPClassifier(client=client, **kw).fit(big)
    with LocalCluster(memory_limit="600MB", **opts) as cluster, Client(cluster) as client:
        start = set(client.scheduler_info()["workers"])
        with _WorkerWatch(client) as watch:
            streamed = KMPClassifier(client=client, **kw).fit(big)
        assert set(watch.seen) == start, watch.seen  # no worker restarted (same addresses, none added)
        assert all(st == {"running"} for st in watch.seen.values()), watch.seen  # never paused
    # the resident reference: limits and fraction with room for every partition and its state
    with dask.config.set({"kmp_dask.memory-fraction": 0.85}):
        with LocalCluster(memory_limit="7GB", **opts) as cluster, Client(cluster) as client:
            resident = KMPClassifier(client=client, **kw).fit(big)
    assert streamed.basis_indices_.tolist() == resident.basis_indices_.tolist()
    assert np.array_equal(streamed.dual_coef_, resident.dual_coef_)


def test_streamed_basis_cache_past_two_full_blocks_is_exact():
    """Regression: page files were named by position, and a pending column (≥ 64 KiB: partitions
    of > 16,384 float32 rows) shifted the names of the basis blocks after it, so once two full
    32-column blocks existed a block was reused from another block's file (a streamed fit of
    75 atoms stopped at 63, different). Keyed files (``blockops.Paged``) make it exact."""
    from kmp_dask.blockops import Journal
    from kmp_dask.greedy import kernel_matching_pursuit
    from kmp_dask.kernels import get_kernel
    from kmp_dask.parallel import InProcessEngine
    from kmp_dask.parallel._engine import PartitionHolder
    from kmp_dask.store import InMemoryStore

    rng = np.random.default_rng(0)
    X = rng.normal(size=(150_000, 2)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 1] ** 2 > 1).astype(int)
    store = InMemoryStore(X, y, chunk_rows=150_000)
    specs = partition_specs(store)
    assert min(s.stop - s.start for s in specs) * 4 >= 1 << 16  # the pending column is paged as a file

    class HolderEngine:  # one holder in process, every partition streamed
        def __init__(self):
            self.holder, self.journal, self.n_calls = PartitionHolder(specs, budget_bytes=20 << 20), Journal(), 0

        def run(self, op, msg=None, effects=()):
            self.journal.record(tuple(effects))
            return [r for _, r in self.holder.run(op, msg, tuple(effects))]

    def fit(engine):
        return kernel_matching_pursuit(engine, kernel=get_kernel("rbf", gamma=2.0), n_rows=store.n_rows, n_features=2,
                                       dtype=store.dtype, targets={"kind": "ovr", "classes": [0, 1]}, n_basis=70,
                                       candidates=5, random_state=0)

    eng = HolderEngine()
    try:
        streamed = fit(eng)
        assert len(eng.holder.partitions) < len(specs) // 2  # most partitions streamed
    finally:
        eng.holder.close()
    resident = fit(InProcessEngine(specs))
    assert len(resident.basis_indices) == 70
    assert streamed.basis_indices.tolist() == resident.basis_indices.tolist()
    assert np.array_equal(streamed.coef, resident.coef)


def test_streamed_partitions_with_recomputed_columns_match_resident():
    """The large-N mode pages too: streamed partitions keep only the atoms and two columns, and
    the fit equals the resident one bit for bit (same row blocks, same order)."""
    from kmp_dask.blockops import Journal, RecomputedColumns
    from kmp_dask.greedy import kernel_matching_pursuit
    from kmp_dask.kernels import get_kernel
    from kmp_dask.parallel import InProcessEngine
    from kmp_dask.parallel._engine import PartitionHolder
    from kmp_dask.store import InMemoryStore

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60_000, 3)).astype(np.float32)
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]
    specs = partition_specs(InMemoryStore(X, y, chunk_rows=20_000))

    class HolderEngine:  # one holder in process, most partitions streamed
        def __init__(self):
            self.holder, self.journal, self.n_calls = PartitionHolder(specs, budget_bytes=9 << 20), Journal(), 0

        def run(self, op, msg=None, effects=()):
            self.journal.record(tuple(effects))
            return [r for _, r in self.holder.run(op, msg, tuple(effects))]

    def fit(engine):
        return kernel_matching_pursuit(engine, kernel=get_kernel("rbf", gamma=1.0), n_rows=len(X), n_features=3,
                                       dtype=X.dtype, targets={"kind": "regression"}, n_basis=40, candidates=30,
                                       random_state=0, basis_columns="recomputed", validation_fraction=0.1)

    eng = HolderEngine()
    try:
        streamed = fit(eng)
        assert eng.holder.memory_report()["streamed"]
        assert eng.holder.memory_report()["bytes_read"] > 0
    finally:
        eng.holder.close()
    ref = InProcessEngine(specs)
    resident = fit(ref)
    assert all(isinstance(p.state["kmp"].cache, RecomputedColumns) for p in ref.partitions)
    assert len(resident.basis_indices) == 40
    assert streamed.basis_indices.tolist() == resident.basis_indices.tolist()
    assert np.array_equal(streamed.coef, resident.coef)


def test_state_growing_in_a_pass_pages_out_before_the_pass_ends():
    """Partitions are admitted on their rows; the init effect then adds state. The holder must
    page a grown partition out as soon as the resident set no longer fits — not after the pass,
    when every resident partition has already grown (measured: 10⁷ rows on 2 × 2.5 GB workers
    paused both workers at 80% during the init pass before this)."""
    from kmp_dask.blockops import Effect, Residual
    from kmp_dask.parallel._engine import PartitionHolder
    from kmp_dask.parallel._paging import partition_nbytes
    from kmp_dask.store import InMemoryStore

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80_000, 8))  # 8 partitions of 10,000 rows × 64 B = 640 kB
    specs = partition_specs(InMemoryStore(X, X[:, 0], chunk_rows=10_000))
    budget = 12 << 20
    holder = PartitionHolder(specs, budget_bytes=budget)
    assert len(holder.partitions) == len(specs)  # every partition's rows fit
    seen = []

    def grow(part, msg):
        part.state["grown"] = Residual(np.ones((msg // 16, 1)))  # targets + residual: msg bytes
        seen.append(sum(partition_nbytes(p) for p in holder.partitions.values()))

    try:
        holder.run(None, None, (Effect(grow, 2 << 20, "grown"),))  # each partition + 2 MiB: 21 MiB in all
        report = holder.memory_report()
        assert report["streamed"] and report["resident"]
        # at every moment of the pass the resident set stayed within the budget plus the one
        # partition that had just grown
        assert max(seen) <= budget + (2 << 20) + 700_000
        assert report["resident_bytes"] + 3 * max(holder._ws[i] for i in report["streamed"]) <= budget
        # and the paged-out partitions come back intact
        again = []
        holder.run(None, None, (Effect(lambda p, m: again.append(p.state["grown"].R.sum()), None, "check"),))
        assert again == [float(2 << 20) / 16] * len(specs)
    finally:
        holder.close()


def test_streamed_partitions_on_a_threaded_cluster_do_not_share_scratch(tmp_path):
    """Regression: paged-in partitions borrowed one process-wide set of scratch buffers, so two
    worker *threads* (``LocalCluster(processes=False)``, common in notebooks) streaming at the
    same time wrote into each other's kernel blocks — a different model, silently (3 of 3 fits
    differed before the fix). The scratch is now per thread."""
    from distributed import Client, LocalCluster

    small = make_classification_store(str(tmp_path / "t.zarr"), 40_000, n_features=10, n_classes=3,
                                      chunk_rows=10_000, random_state=5)
    kw = dict(n_basis=15, candidates=40, gamma=0.1, random_state=0, basis_columns="stored")
    ref = KMPClassifier(client="sync", **kw).fit(small)
    with LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        for _ in range(2):
            with dask.config.set({"kmp_dask.budget-bytes": 3 << 20}):
                est = KMPClassifier(client=client, **kw).fit(small)
            assert est.basis_indices_.tolist() == ref.basis_indices_.tolist()
            assert np.array_equal(est.dual_coef_, ref.dual_coef_)
