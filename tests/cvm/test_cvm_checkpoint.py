"""CVMClassifier and MMDA's checkpoints beyond the contract every family meets
(tests/test_resume_contract.py: resumed = uninterrupted, a complete checkpoint, a fresh start, no
overwrite, refusals, SIGKILL): a fit interrupted inside a binary problem's core-set loop, at a
one-vs-rest problem boundary or between MMDA features, and resumed from its checkpoint gives the
identical model — in process and on a process LocalCluster; a leftover part is never overwritten;
long one-vs-rest fits report progress per problem and record their time."""

from __future__ import annotations

import pytest
from _contracts import Interrupted
from _contracts import same_cvm as _same_cvm
from _contracts import same_mmda as _same_mmda
from sklearn.datasets import make_classification

import kmp_dask.estimators._cvm as est_cvm
import kmp_dask.greedy._cvm_problems as par_cvm
from kmp_dask import MMDA, CVMClassifier
from kmp_dask.estimators._progress import iteration_listener
from kmp_dask.greedy._checkpoint import STATE_FILE, _load, _read_header, checkpoint_info
from kmp_dask.store import create_store

GAMMA, C, EPS = 0.3, 10.0, 1e-3


def _data(n=200, classes=2, seed=0):
    return make_classification(n, n_features=5, n_informative=4, n_redundant=0, n_classes=classes,
                               n_clusters_per_class=1, random_state=seed)


def _interrupt_in_loop(monkeypatch, run, iteration):
    """The ``run``-th core-set loop of the fit (0: the first problem's, or MMDA's first feature)
    raises at the end of ``iteration`` (after that iteration's checkpoint, as in KMP)."""
    real, calls = par_cvm.core_vector_machine, []

    def wrapped(engine, **kw):
        n = len(calls)
        calls.append(n)

        def callback(rec):
            if n == run and rec["iteration"] == iteration:
                raise Interrupted((run, iteration))

        return real(engine, **{**kw, "callback": callback})

    monkeypatch.setattr(par_cvm, "core_vector_machine", wrapped)
    return calls


def _interrupt_after_problem(monkeypatch, n_done):
    """The estimator's progress callback raises once ``n_done`` problems are done (after the
    problem-boundary checkpoint)."""
    def progress(verbose, total, **kw):
        def callback(record):
            if record["iteration"] + 1 == n_done:
                raise Interrupted(n_done)
        return callback, None

    monkeypatch.setattr(est_cvm, "progress_callback", progress)


def _parts(ckpt):
    return sorted(p.name for p in ckpt.iterdir())


@pytest.mark.parametrize("run, at, every", [(1, 7, 3), pytest.param(0, 4, 5, marks=pytest.mark.slow),
                                             pytest.param(0, 0, 1, marks=pytest.mark.slow),
                                             pytest.param(2, 2, 1, marks=pytest.mark.slow)])
def test_one_vs_rest_cvm_resumed_inside_a_problem_is_identical(tmp_path, monkeypatch, run, at, every):
    X, y = _data(classes=3)
    make = lambda: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=4)  # noqa: E731
    ref = make().fit(X, y)
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_in_loop(m, run, at)
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=ckpt, checkpoint_every=every)
    info = checkpoint_info(ckpt)
    assert not info["complete"] and info["problems_done"] == run
    saved = at - (at + 1) % every  # the loop's last save: the end of this iteration
    part = ckpt / f"problem-{run:05d}.ckpt"
    if saved >= 0:  # the finished problems' results, the running one's loop, the main file
        assert _parts(ckpt) == [f"problem-{k:05d}.ckpt" for k in range(run + 1)] + [STATE_FILE]
        assert all(_read_header(ckpt / f"problem-{k:05d}.ckpt")[0]["complete"] for k in range(run))
        assert _read_header(part)[0]["iteration"] == saved
    resumed_loops = []
    real = par_cvm.core_vector_machine
    with monkeypatch.context() as m:  # a resumed fit skips the finished problems and continues the loop
        m.setattr(par_cvm, "core_vector_machine",
                  lambda engine, **kw: resumed_loops.append(kw["resume"] is not None) or real(engine, **kw))
        resumed = make().fit(X, y, checkpoint=ckpt, checkpoint_every=every, resume=True)
    assert resumed_loops == [saved >= 0] + [False] * (2 - run)
    _same_cvm(resumed, ref, X)
    assert checkpoint_info(ckpt)["complete"] and _parts(ckpt) == [STATE_FILE]  # parts removed when done


def test_binary_cvm_resumed_twice_and_a_complete_checkpoint_returns_the_model(tmp_path, monkeypatch):
    X, y = _data(n=300, seed=3)
    make = lambda: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=9)  # noqa: E731
    ref = make().fit(X, y)
    assert ref.n_iter_[0] > 17  # both interruptions inside the loop (8 rows per pass: 20 iterations)
    ckpt = tmp_path / "ck"
    for at in (5, 17):  # killed twice, resumed twice
        with monkeypatch.context() as m:
            _interrupt_in_loop(m, 0, at)
            with pytest.raises(Interrupted):
                make().fit(X, y, checkpoint=ckpt, checkpoint_every=2, resume=at != 5)
    done = make().fit(X, y, checkpoint=ckpt, checkpoint_every=2, resume=True)
    _same_cvm(done, ref, X)
    assert done.fit_seconds_ > 0
    with monkeypatch.context() as m:
        m.setattr(est_cvm, "fit_binary_problems", lambda *a, **k: pytest.fail("a complete checkpoint needs no pass"))
        again = make().fit(X, y, checkpoint=ckpt, resume=True)
    _same_cvm(again, ref, X)
    assert again.fit_seconds_ == pytest.approx(done.fit_seconds_, rel=0.5)


@pytest.mark.parametrize("classes, run, at, every", [
    (2, 1, 4, 1), pytest.param(3, 3, 2, 1, marks=pytest.mark.slow), pytest.param(3, 0, 3, 2, marks=pytest.mark.slow),
    pytest.param(3, 1, 5, 3, marks=pytest.mark.slow), pytest.param(3, 1, -1, 1, marks=pytest.mark.slow)])
def test_mmda_resumed_inside_a_feature_or_between_features_is_identical(tmp_path, monkeypatch, classes, run, at,
                                                                        every):
    """Runs 0-1: the first problem's features 1-2 (run 1: partitions deflated by feature 1,
    restored on resume); run 3: the second problem's second feature. ``at=-1``: killed as
    feature ``run`` starts (its checkpoint is the feature boundary's)."""
    X, y = _data(classes=classes, seed=2)
    make = lambda: MMDA(2, C=C, eps=EPS, gamma=GAMMA, random_state=1)  # noqa: E731
    ref = make().fit(X, y)
    assert ref.components_per_problem_ == [2] * (1 if classes == 2 else classes)
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        if at < 0:
            real, calls = par_cvm.core_vector_machine, []

            def dying(engine, **kw):
                calls.append(1)
                if len(calls) == run + 1:
                    raise Interrupted(run)
                return real(engine, **kw)

            m.setattr(par_cvm, "core_vector_machine", dying)
        else:
            _interrupt_in_loop(m, run, at)
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=ckpt, checkpoint_every=every)
    part = ckpt / f"problem-{run // 2:05d}.ckpt"
    assert _read_header(part)[0]["feature"] == run % 2
    resumed = make().fit(X, y, checkpoint=ckpt, checkpoint_every=every, resume=True)
    _same_mmda(resumed, ref, X)


def test_cvm_resumed_after_a_problem_boundary_and_progress_per_problem(tmp_path, monkeypatch, capsys):
    X, y = _data(classes=4, seed=5)
    make = lambda **kw: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=2, **kw)  # noqa: E731
    records = []
    with iteration_listener(lambda desc, rec: records.append((desc, rec))):
        ref = make(verbose=2).fit(X, y)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[CVMClassifier]")]
    assert [x.split(",")[0] for x in lines] == ["[CVMClassifier] problem 2", "[CVMClassifier] problem 4"]
    assert "class 3" in lines[-1] and "s elapsed" in lines[-1]
    inner = [r for d, r in records if d == "CVMClassifier core set"]  # one per core-set iteration
    assert [sum(r["problem"] == k for r in inner) for k in range(4)] == [int(n) for n in ref.n_iter_]
    records = [(d, r) for d, r in records if d != "CVMClassifier core set"]
    assert [r["problem"] for _, r in records] == [0, 1, 2, 3] and {d for d, _ in records} == {"CVMClassifier"}
    assert [r["n_core"] for _, r in records] == [len(c) for c in ref.core_indices_]
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_after_problem(m, 2)
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=ckpt)
    info = checkpoint_info(ckpt)
    assert info["problems_done"] == 2 and not info["complete"]
    assert _parts(ckpt) == ["problem-00000.ckpt", "problem-00001.ckpt", STATE_FILE]
    records = []
    with iteration_listener(lambda desc, rec: records.append(rec) if desc == "CVMClassifier" else None):
        resumed = make().fit(X, y, checkpoint=ckpt, resume=True)
    assert [r["problem"] for r in records] == [2, 3] and [r["iteration"] for r in records] == [2, 3]
    _same_cvm(resumed, ref, X)


def test_fit_time_is_recorded_and_reported(tmp_path):
    from kmp_dask.report._models import fit_time

    X, y = _data()
    for est in (CVMClassifier(C=C, eps=EPS, gamma=GAMMA), MMDA(1, C=C, eps=EPS, gamma=GAMMA)):
        est.fit(X, y)
        assert 0 < est.fit_seconds_ < 600
        assert fit_time(est) == f"{est.fit_seconds_:.3g} s"


def test_a_leftover_part_without_its_main_file_is_never_overwritten(tmp_path):
    X, y = _data()
    ckpt = tmp_path / "ck"
    CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=0).fit(X, y, checkpoint=ckpt)
    (ckpt / STATE_FILE).rename(ckpt / "problem-00000.ckpt")  # its main file removed by hand
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    with pytest.raises(FileExistsError, match="problem-00000.ckpt"):
        CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=0).fit(X, y, checkpoint=ckpt)
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before


def test_random_state_none_resumes_with_the_saved_seeds(tmp_path, monkeypatch):
    X, y = _data(classes=3, seed=7)
    ckpt = tmp_path / "ck"
    with monkeypatch.context() as m:
        _interrupt_after_problem(m, 1)
        with pytest.raises(Interrupted):
            CVMClassifier(C=C, eps=EPS, gamma=GAMMA).fit(X, y, checkpoint=ckpt)
    resumed = CVMClassifier(C=C, eps=EPS, gamma=GAMMA).fit(X, y, checkpoint=ckpt, resume=True)
    seeds = _load(ckpt / STATE_FILE, _read_header(ckpt / STATE_FILE)[0])["seeds"]
    ref = CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=0)
    monkeypatch.setattr(est_cvm, "check_random_state", lambda rs: _Seeds(seeds))
    _same_cvm(resumed, ref.fit(X, y), X)


class _Seeds:
    def __init__(self, seeds):
        self.seeds = list(seeds)

    def randint(self, lo, hi):
        return self.seeds.pop(0)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_resumed_on_a_process_cluster_is_identical(tmp_path, monkeypatch, process_client):
    """One-vs-rest problems as worker tasks: killed after a problem boundary and resumed on the
    cluster; a binary problem on actors: killed inside its loop, resumed on the cluster — each the
    uninterrupted cluster fit's model; tasks write their problems' parts into the shared directory."""
    X, y = _data(n=600, classes=3, seed=11)
    store = create_store(tmp_path / "d.zarr", X, y, chunk_rows=150)
    make = lambda: CVMClassifier(C=C, eps=EPS, gamma=GAMMA, random_state=5, client=process_client)  # noqa: E731
    ref = make().fit(store.url)
    ckpt = tmp_path / "ck-ovr"
    with monkeypatch.context() as m:
        _interrupt_after_problem(m, 1)
        with pytest.raises(Interrupted):
            make().fit(store.url, checkpoint=ckpt, checkpoint_every=3)
    assert checkpoint_info(ckpt)["problems_done"] == 1
    # the problem that ran beside the finished one (2 workers) saved its loop from its worker task
    assert any(not _read_header(p)[0]["complete"] for p in ckpt.glob("problem-*.ckpt")), _parts(ckpt)
    resumed = make().fit(store.url, checkpoint=ckpt, checkpoint_every=3, resume=True)
    _same_cvm(resumed, ref, X)
    assert _parts(ckpt) == [STATE_FILE]

    Xb, yb = _data(n=600, seed=12)
    sb = create_store(tmp_path / "b.zarr", Xb, yb, chunk_rows=150)
    ref = make().fit(sb.url)
    ckpt = tmp_path / "ck-bin"
    with monkeypatch.context() as m:
        _interrupt_in_loop(m, 0, 9)
        with pytest.raises(Interrupted):
            make().fit(sb.url, checkpoint=ckpt, checkpoint_every=4)
    resumed = make().fit(sb.url, checkpoint=ckpt, checkpoint_every=4, resume=True)
    _same_cvm(resumed, ref, Xb)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_vs_rest_tasks_time_out_when_no_problem_finishes_in_time(process_client):
    """Results are taken as they arrive; ``timeout`` bounds the wait for the next one."""
    from kmp_dask.greedy._cvm_problems import fit_binary_problems
    from kmp_dask.kernels import get_kernel
    from kmp_dask.parallel import Tasks
    from kmp_dask.store import InMemoryStore

    X, y = _data(n=3000, classes=3, seed=1)
    store = InMemoryStore(X, y, chunk_rows=1000)
    kw = dict(kernel=get_kernel("rbf", gamma=GAMMA), kappa=1.0, C=C, eps=1e-4, n_rows=len(X), candidates=59,
              max_core=5000)
    with pytest.raises(TimeoutError, match="no one-vs-rest problem finished within 0 s"):
        fit_binary_problems(Tasks(process_client), store, [0, 1, 2], seeds=[1, 2, 3], timeout=0.01, **kw)
    got = []
    res = fit_binary_problems(Tasks(process_client), store, [0, 1, 2], seeds=[1, 2, 3], timeout=600,
                              on_problem=lambda k, r, n: got.append((k, n)), **kw)
    assert sorted(k for k, _ in got) == [0, 1, 2] and [n for _, n in got] == [1, 2, 3]
    from kmp_dask.greedy._cvm import POINTS_PER_PASS  # rows one iteration may add

    assert all(r.n_iter + 1 <= len(r.core_index) <= 1 + POINTS_PER_PASS * r.n_iter for r in res)
