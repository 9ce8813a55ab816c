"""The checkpoint / resume contract, run over every family that checkpoints: KMP, sparse KPCA,
sparse KCCA, CVM, MMDA and the reduced-set compressor (HMP).

For each: a fit interrupted mid-loop and resumed from its checkpoint gives the identical model (bit
for bit) without beginning its loop again; a complete checkpoint is kept (one file) and resuming it
returns the model without a pass; ``resume=True`` with no checkpoint starts from scratch; an
existing checkpoint is never overwritten and one of another fit (parameters, data, estimator) is
refused, leaving it unchanged; the checkpoint arguments are checked before anything is written; a
fit process SIGKILLed mid-loop (maybe mid-write) resumes to the identical model; a fit interrupted on
a process LocalCluster resumes there and in process to the in-process model.

What only one family has (KMP's losses and early stopping, CVM's problem boundaries, MMDA's
features, the compressor's stages) stays in that family's checkpoint tests, which use the same
helpers (``tests/_contracts.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from _contracts import (
    Interrupted,
    interrupt_at,
    interrupted_then_resumed,
    run_and_kill_at,
    same_compressor,
    same_cvm,
    same_kcca,
    same_kmp,
    same_kpca,
    same_mmda,
)
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from kmp_dask import MMDA, CVMClassifier, KMPClassifier, KMPRegressor, ReducedSetCompressor, SparseKCCA, SparseKernelPCA
from kmp_dask.greedy import Pursuit
from kmp_dask.greedy._checkpoint import STATE_FILE, checkpoint_info
from kmp_dask.greedy._sparse_kpca import KPCARun
from kmp_dask.store import create_store

# --- data and model comparisons --------------------------------------------------------------------

def _kmp_data(n=1500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=n)


def _kpca_data(n=700, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.5 * X[:, 0] ** 2
    return X


def _kcca_data(n=300):
    X = _kpca_data(n=n)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]]) + 0.1 * np.random.default_rng(1).normal(size=(n, 2))
    return X, Y


def _cvm_data(n=300, classes=2, seed=3):
    return make_classification(n, n_features=5, n_informative=4, n_redundant=0, n_classes=classes,
                               n_clusters_per_class=1, random_state=seed)


_RS_RNG = np.random.default_rng(0)
RS_X = _RS_RNG.normal(size=(500, 4))
RS_Y = (RS_X[:, 0] * RS_X[:, 1] > 0).astype(int)
RS_SVC = SVC(C=10.0, gamma=0.5).fit(RS_X, RS_Y)


# --- the families ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """One family's side of the contract.

    ``make(**overrides)``: a small estimator; ``data()``: ``(fit_args, X)`` in memory; ``same(a, b, X)``:
    bit-identity of two fitted estimators; ``interrupt``: ``(at, every)`` of the record
    (``after=True``: the count of records) the fit dies at; ``begin``: ``(owner, attribute)`` pairs a
    resumed fit must not call; ``complete``: header fields of its complete checkpoint; ``no_pass``:
    ``"module.attribute"`` names a complete checkpoint's resume must not reach; ``refusals(ckpt,
    fit_args)``: ``(call, exception, match)`` triples, each resuming it as another fit."""

    make: Callable
    data: Callable
    same: Callable
    interrupt: tuple
    begin: Callable
    complete: dict
    no_pass: tuple
    refusals: Callable
    after: bool = False
    desc: str | None = None
    store: Callable | None = None  # (tmp_path) -> (store url, X, fit args before the url)
    sigkill: dict = field(default_factory=dict)
    begun: tuple = ()  # loops a resumed fit begins after the one it continues (the later problems' / features')
    check: Callable | None = None  # (ckpt, expected iteration) -> None, where the main file counts another unit


def _kmp_refusals(ckpt, fit_args):
    X, y = fit_args
    y2 = y.copy()
    y2[700] += 1.0  # one target in the middle: in-memory data are hashed in full
    return [
        (lambda: KMPRegressor(n_basis=7, random_state=1).fit(X, y, checkpoint=ckpt), FileExistsError,
         "pass resume=True to continue it, or remove it"),
        (lambda: KMPRegressor(n_basis=7, random_state=1).fit(X, y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter n_basis: checkpoint 10, now 7"),
        (lambda: KMPRegressor(n_basis=10, random_state=1).fit(X, y2, checkpoint=ckpt, resume=True), ValueError,
         r"data rows_sha256: checkpoint '[0-9a-f]+', now '[0-9a-f]+'"),
        (lambda: KMPRegressor(n_basis=10, random_state=1).fit(X[1:], y[1:], checkpoint=ckpt, resume=True),
         ValueError, r"data n_rows: checkpoint 1500, now 1499"),
        (lambda: KMPClassifier(n_basis=10, random_state=1).fit(X, y > 0, checkpoint=ckpt, resume=True), ValueError,
         r"estimator: checkpoint 'KMPRegressor', now 'KMPClassifier'"),
    ]


def _kpca_refusals(ckpt, fit_args):
    (X,) = fit_args
    X2 = X.copy()
    X2[350, 2] += 1.0
    return [
        (lambda: SparseKernelPCA(n_components=8, candidates=30, random_state=1).fit(X, checkpoint=ckpt),
         FileExistsError, "pass resume=True to continue it, or remove it"),
        (lambda: SparseKernelPCA(n_components=8, candidates=30, gamma=0.5, random_state=1).fit(
            X, checkpoint=ckpt, resume=True), ValueError, r"parameter gamma: checkpoint 0.3, now 0.5"),
        (lambda: SparseKernelPCA(n_components=8, candidates=30, random_state=1).fit(X2, checkpoint=ckpt, resume=True),
         ValueError, r"data rows_sha256: checkpoint '[0-9a-f]+', now '[0-9a-f]+'"),
        (lambda: SparseKCCA(n_components=5, random_state=0).fit(X[:, :2], X[:, 2:], checkpoint=ckpt, resume=True),
         ValueError, r"estimator: checkpoint 'SparseKernelPCA', now 'SparseKCCA'"),
    ]


def _kcca_refusals(ckpt, fit_args):
    X, Y = fit_args
    return [
        (lambda: _kcca().fit(X, Y, checkpoint=ckpt), FileExistsError, "pass resume=True to continue it, or remove it"),
        (lambda: _kcca(reg=0.5).fit(X, Y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter reg: checkpoint 0.1, now 0.5"),
        (lambda: _kcca().fit(X, Y[::-1], checkpoint=ckpt, resume=True), ValueError, r"data rows_sha256"),
    ]


def _cvm_refusals(ckpt, fit_args):
    X, y = fit_args
    y2 = y.copy()
    y2[100] = 1 - y2[100]
    return [
        (lambda: _cvm().fit(X, y, checkpoint=ckpt), FileExistsError, "pass resume=True to continue it, or remove it"),
        (lambda: _cvm(C=1.0).fit(X, y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter C: checkpoint 10.0, now 1.0"),
        (lambda: _mmda().fit(X, y, checkpoint=ckpt, resume=True), ValueError,
         r"estimator: checkpoint 'CVMClassifier', now 'MMDA'"),
        (lambda: _cvm().fit(X, y2, checkpoint=ckpt, resume=True), ValueError, r"data rows_sha256"),
    ]


def _mmda_refusals(ckpt, fit_args):
    X, y = fit_args
    return [
        (lambda: _mmda().fit(X, y, checkpoint=ckpt), FileExistsError, "pass resume=True to continue it, or remove it"),
        (lambda: _mmda(n_components=1).fit(X, y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter n_components: checkpoint 2, now 1"),
        (lambda: _cvm().fit(X, y, checkpoint=ckpt, resume=True), ValueError,
         r"estimator: checkpoint 'MMDA', now 'CVMClassifier'"),
    ]


def _rs_refusals(ckpt, fit_args):
    model, X, Y = fit_args
    other = SVC(C=1.0, gamma=0.5).fit(X, Y)
    return [
        (lambda: _rs().fit(model, X, Y, checkpoint=ckpt), FileExistsError,
         "pass resume=True to continue it, or remove it"),
        (lambda: _rs().fit(other, X, Y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter model: checkpoint '[0-9a-f]{64}', now '[0-9a-f]{64}'"),
        (lambda: _rs().fit(model, X, 1 - Y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter labels: checkpoint .*, now "),
        (lambda: _rs().fit(model, X[1:], Y[1:], checkpoint=ckpt, resume=True), ValueError,
         r"data n_rows: checkpoint 500, now 499"),
        (lambda: _rs(n_vectors=26).fit(model, X, Y, checkpoint=ckpt, resume=True), ValueError,
         r"parameter n_vectors: checkpoint 25, now 26"),
    ]


def _kcca(**kw):
    return SparseKCCA(**{"n_components": 10, "gamma_x": 0.3, "gamma_y": 0.5, "random_state": 3, "reg": 0.1, **kw})


def _cvm(**kw):
    return CVMClassifier(**{"C": 10.0, "eps": 1e-3, "gamma": 0.3, "random_state": 9, **kw})


def _mmda(**kw):
    return MMDA(**{"n_components": 2, "C": 10.0, "eps": 1e-3, "gamma": 0.3, "random_state": 1, **kw})


def _rs(**kw):
    return ReducedSetCompressor(**{"n_vectors": 25, "random_state": 5, **kw})


def _kmp_store(tmp_path):
    X, y = _kmp_data(n=4000)
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=1000).url, X, ()


def _kpca_store(tmp_path):
    X = _kpca_data(n=3000)
    return create_store(tmp_path / "d.zarr", X, chunk_rows=750).url, X, ()


def _mmda_store(tmp_path):
    X, y = _cvm_data(n=800, classes=3, seed=13)
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=200).url, X, ()


def _rs_store(tmp_path):
    return create_store(tmp_path / "pool.zarr", RS_X, RS_Y, chunk_rows=125).url, RS_X, (RS_SVC,)


def _hmp_begin():
    from kmp_dask.greedy import _hmp, _hmp_setup
    return [(_hmp._DensePursuit, "__init__"), (_hmp_setup, "pool_rkhs_norms")]


def _cvm_begin():
    from kmp_dask.greedy import _cvm
    return [(_cvm._CoreSetLoop, "start")]


def _first_problem_part(ckpt, expected):
    """A CVM / MMDA main file counts the problems done (none yet); the running loop is in its part."""
    from kmp_dask.greedy._checkpoint import _read_header

    assert checkpoint_info(ckpt)["problems_done"] == 0
    header = _read_header(ckpt / "problem-00000.ckpt")[0]
    assert header["iteration"] == expected and header.get("feature", 0) == 0, header


FAMILIES = {
    "kmp": Family(
        make=lambda **kw: KMPRegressor(**{"n_basis": 10, "random_state": 1, **kw}),
        data=lambda: ((_kmp_data()), _kmp_data()[0]), same=same_kmp, interrupt=(5, 3),
        begin=lambda: [(Pursuit, "_begin")], complete={"iteration": 9, "stop_reason": "n_basis"},
        no_pass=("kmp_dask.greedy._kmp.Pursuit.run",), refusals=_kmp_refusals, store=_kmp_store,
        sigkill={"setup": "from kmp_dask import KMPRegressor\nest = KMPRegressor(**PARAMS)\nargs = [sys.argv[1]]",
                 "params": {"n_basis": 60, "gamma": 0.5, "random_state": 11, "candidates": 100, "client": "sync"},
                 "line": "kmp: iteration 5", "last": 59, "slow": False},
    ),
    "kpca": Family(
        make=lambda **kw: SparseKernelPCA(**{"n_components": 8, "candidates": 30, "random_state": 1, "gamma": 0.3,
                                             **kw}),
        data=lambda: ((_kpca_data(),), _kpca_data()), same=same_kpca, interrupt=(5, 3),
        begin=lambda: [(KPCARun, "begin")], complete={"iteration": 7, "stop_reason": "n_components"},
        no_pass=("kmp_dask.estimators._kpca.engine_session",), refusals=_kpca_refusals, store=_kpca_store,
        sigkill={"setup": "from kmp_dask import SparseKernelPCA\nest = SparseKernelPCA(**PARAMS)\nargs = [sys.argv[1]]",
                 "params": {"n_components": 60, "gamma": 0.3, "random_state": 11, "candidates": 100, "client": "sync"},
                 "line": "sparse kpca: iteration 5", "last": 59},
    ),
    "kcca": Family(
        make=_kcca, data=lambda: (_kcca_data(), _kcca_data()[0]), same=same_kcca, interrupt=(6, 4),
        begin=lambda: [(KPCARun, "begin")], complete={"iteration": 9, "stop_reason": "n_components"},
        no_pass=("kmp_dask.estimators._kpca.engine_session",), refusals=_kcca_refusals,
    ),
    "cvm": Family(
        make=_cvm, data=lambda: (_cvm_data(), _cvm_data()[0]), same=same_cvm, interrupt=(5, 2),
        desc="CVMClassifier core set", begin=_cvm_begin, check=_first_problem_part, complete={"problems_done": 1},
        no_pass=("kmp_dask.estimators._cvm.fit_binary_problems",), refusals=_cvm_refusals,
    ),
    "mmda": Family(
        make=_mmda, data=lambda: (_cvm_data(classes=3, seed=2), _cvm_data(classes=3, seed=2)[0]), same=same_mmda,
        interrupt=(4, 1), desc="MMDA core set", begin=_cvm_begin, check=_first_problem_part, begun=("start",) * 5,
        complete={"problems_done": 3},
        no_pass=("kmp_dask.estimators._cvm.fit_binary_problems",), refusals=_mmda_refusals, store=_mmda_store,
        # the third core-set loop (problem 1's first feature), iteration 10
        sigkill={"setup": "from kmp_dask import MMDA\nest = MMDA(**PARAMS)\nargs = [sys.argv[1]]",
                 "params": {"n_components": 2, "C": 10.0, "eps": 1e-3, "gamma": 0.3, "random_state": 3,
                            "client": "sync"},
                 "line": "MMDA core set: iteration 10", "count": 3, "header": {"problems_done": 1}},
    ),
    "compressor": Family(
        make=_rs, data=lambda: ((RS_SVC, RS_X, RS_Y), RS_X), same=same_compressor, interrupt=(10, 5), after=True,
        begin=_hmp_begin, complete={"stage": "complete"},
        no_pass=("kmp_dask.reduced._routes.dense_hyperplane_pursuit", "kmp_dask.reduced._routes.compress_on_pool",
                 "kmp_dask.reduced._build.exchange_vectors", "kmp_dask.reduced._build.engine_exchange"),
        refusals=_rs_refusals, store=_rs_store,
        sigkill={"setup": """
                    from sklearn.svm import SVC
                    from kmp_dask import ReducedSetCompressor
                    from kmp_dask.store import open_store
                    X, y = open_store(sys.argv[1]).read_range(0, 500)
                    est = ReducedSetCompressor(**PARAMS)
                    args = [SVC(C=10.0, gamma=0.5).fit(X, y), sys.argv[1]]
                    """,
                 "params": {"n_vectors": 80, "random_state": 4, "client": "sync", "criterion": "decrease"},
                 "line": "reduced set: iteration 5", "last": 79},
    ),
}


def _blocked(*args, **kwargs):
    raise AssertionError("a complete checkpoint needs no pass")


# --- the contract ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(FAMILIES))
def test_interrupted_fit_resumes_to_the_identical_model(tmp_path, monkeypatch, name):
    fam = FAMILIES[name]
    fit_args, X = fam.data()
    ref = fam.make().fit(*fit_args)
    at, every = fam.interrupt
    resumed = interrupted_then_resumed(monkeypatch, fam.make, fit_args, tmp_path / "ck", at, every,
                                       begin=fam.begin(), after=fam.after, desc=fam.desc, check=fam.check,
                                       begun_expected=fam.begun)
    fam.same(resumed, ref, X)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_complete_checkpoint_is_kept_and_resuming_it_needs_no_pass(tmp_path, monkeypatch, name):
    fam = FAMILIES[name]
    fit_args, X = fam.data()
    ckpt = tmp_path / "ck"
    first = fam.make().fit(*fit_args, checkpoint=ckpt)
    info = checkpoint_info(ckpt)
    assert info["complete"] and {k: info[k] for k in fam.complete} == fam.complete, info
    assert sorted(p.name for p in ckpt.iterdir()) == [STATE_FILE]
    with monkeypatch.context() as m:
        for target in fam.no_pass:
            m.setattr(target, _blocked)
        again = fam.make().fit(*fit_args, checkpoint=ckpt, resume=True)
    fam.same(again, first, X)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_resume_without_a_checkpoint_starts_from_scratch(tmp_path, name):
    fam = FAMILIES[name]
    fit_args, X = fam.data()
    ref = fam.make().fit(*fit_args)
    fresh = fam.make().fit(*fit_args, checkpoint=tmp_path / "new", resume=True)
    fam.same(fresh, ref, X)
    assert checkpoint_info(tmp_path / "new")["complete"]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_existing_checkpoint_is_never_overwritten_and_other_fits_are_refused(tmp_path, name):
    fam = FAMILIES[name]
    fit_args, _ = fam.data()
    ckpt = tmp_path / "ck"
    fam.make().fit(*fit_args, checkpoint=ckpt)
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    for call, error, match in fam.refusals(ckpt, fit_args):
        with pytest.raises(error, match=match):
            call()
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before


@pytest.mark.parametrize("name", list(FAMILIES))
def test_checkpoint_arguments_are_checked_before_anything_is_written(tmp_path, name):
    fam = FAMILIES[name]
    fit_args, _ = fam.data()
    with pytest.raises(ValueError, match="resume=True needs checkpoint="):
        fam.make().fit(*fit_args, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        fam.make().fit(*fit_args, checkpoint=tmp_path / "other", checkpoint_every=0)
    assert not (tmp_path / "other").exists()


_KILLED = [pytest.param(n, marks=() if FAMILIES[n].sigkill.get("slow", True) is False else
                        (pytest.mark.slow, pytest.mark.timeout(900)))
           for n in FAMILIES if FAMILIES[n].sigkill]


@pytest.mark.parametrize("name", _KILLED)
def test_sigkilled_fit_resumes_to_the_identical_model(tmp_path, name):
    """A fit process SIGKILLed mid-loop (maybe mid-write) resumes from its checkpoint."""
    fam = FAMILIES[name]
    kill = fam.sigkill
    url, X, before = fam.store(tmp_path)
    ckpt = tmp_path / "ck"
    setup = kill["setup"].replace("PARAMS", repr(kill["params"]))
    seen = run_and_kill_at(tmp_path, setup, [url, ckpt], kill["line"], count=kill.get("count", 1), timeout=180)
    assert seen.count(kill["line"]) == kill.get("count", 1) and "done" not in seen, seen[-5:]
    info = checkpoint_info(ckpt)
    assert info is not None and not info["complete"]
    if "last" in kill:
        assert 5 <= info["iteration"] < kill["last"]
    for key, value in kill.get("header", {}).items():
        assert info[key] == value
    cls = type(fam.make())
    resumed = cls(**kill["params"]).fit(*before, url, checkpoint=ckpt, resume=True)
    ref = cls(**kill["params"]).fit(*before, url)
    fam.same(resumed, ref, X)


def _kmp_cluster_store(tmp_path):
    X, y = _kmp_data(n=3000)
    y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    return create_store(tmp_path / "d.zarr", X, y, chunk_rows=700).url, X, ()


#: name -> (estimator for a client, store, record the fit dies at, slow)
_CLUSTER = {
    "kmp-squared": (lambda client: KMPClassifier(n_basis=12, gamma=0.5, random_state=3, validation_fraction=0.2,
                                                 client=client), _kmp_cluster_store, 6, "kmp", False),
    "kmp-logistic": (lambda client: KMPClassifier(n_basis=12, gamma=0.5, random_state=3, loss="logistic",
                                                  validation_fraction=0.2, client=client), _kmp_cluster_store, 3,
                     "kmp", False),
    "kpca": (lambda client: SparseKernelPCA(n_components=10, candidates=50, gamma=0.3, random_state=3, client=client),
             lambda tmp_path: (lambda X: (create_store(tmp_path / "d.zarr", X, chunk_rows=600).url, X, ()))(
                 _kpca_data(n=2400)), 5, "kpca", True),
    "compressor": (lambda client: ReducedSetCompressor(n_vectors=15, candidates=60, criterion="decrease",
                                                       random_state=2, client=client), _rs_store, 5, "compressor",
                   True),
}


@pytest.mark.parametrize("case", [pytest.param(k, marks=(pytest.mark.slow,) if v[4] else ())
                                  for k, v in _CLUSTER.items()])
def test_resumed_on_a_process_cluster_is_identical(tmp_path, process_client, case):
    """Interrupted on a process LocalCluster, resumed on it and in process: the model of an
    uninterrupted in-process fit (partitions rebuilt on fresh actors from the saved journal)."""
    make, store, at, name, _ = _CLUSTER[case]
    url, X, before = store(tmp_path)
    ref = make("sync").fit(*before, url)
    for where, client in [("cluster", process_client), ("process", "sync")]:
        ckpt = tmp_path / f"ck-{where}"
        with interrupt_at(at), pytest.raises(Interrupted):
            make(process_client).fit(*before, url, checkpoint=ckpt, checkpoint_every=2)
        resumed = make(client).fit(*before, url, checkpoint=ckpt, resume=True)
        FAMILIES[name].same(resumed, ref, X)
