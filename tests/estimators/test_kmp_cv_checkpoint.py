"""``KMPClassifierCV`` / ``KMPRegressorCV`` ``fit(..., checkpoint=DIR, resume=...)``: a search
interrupted at any unit (a (γ, fold) pursuit) or during its refit, and resumed from its checkpoint,
ends with the search of an uninterrupted fit, bit for bit (every held-out score, ``cv_results_``
but the fit times, the choice, the refitted coefficients); the KMP checkpoint's errors, raised
before any cluster starts.

The searches have stages: a small first cap that doubles while a fold reaches it (``CAP_SHARE =
0``), so some pursuits are continued from their in-memory state (lost when the fit dies: fitted
again from atom 1 on resume) and, with the data of test_kmp_cv_reuse.py, one fold's pursuit stops
before its cap and is reused at the later stages.
"""

from __future__ import annotations

import numpy as np
import pytest
from _contracts import Interrupted
from _cv_checks import assert_same_search, continued_pursuits, fold_copies
from sklearn.model_selection import PredefinedSplit

from kmp_dask import KMPClassifierCV, KMPRegressorCV
from kmp_dask.estimators import _kmp as est_kmp
from kmp_dask.estimators import _kmp_cv
from kmp_dask.greedy._checkpoint import STATE_FILE, checkpoint_info
from kmp_dask.greedy._cv_path import row_folds
from kmp_dask.store import create_store

K = 3


class _Units(list):
    """The units fitted, (γ, fold, cap) each; ``fold_fit.fail_at``: the call that raises (0: none)."""




@pytest.fixture
def staged(monkeypatch):
    """Caps 10 → 20 → 40, doubled while any fold reaches the cap; returns the list of units fitted."""
    monkeypatch.setattr(_kmp_cv, "AUTO_N_BASIS", (10, 40))
    monkeypatch.setattr(_kmp_cv, "FIRST_CAP_SHARE", None)
    monkeypatch.setattr(_kmp_cv, "CAP_SHARE", 0.0)
    calls, original = _Units(), _kmp_cv._CVSearch._fold_fit

    def fold_fit(self, gamma, *args, fold=0, **kwargs):
        calls.append((float(gamma), int(fold), int(self.cap)))
        if len(calls) == fold_fit.fail_at:
            raise Interrupted(len(calls))
        return original(self, gamma, *args, fold=fold, **kwargs)

    fold_fit.fail_at = 0
    monkeypatch.setattr(_kmp_cv._CVSearch, "_fold_fit", fold_fit)
    calls.fold_fit = fold_fit
    return calls


def _assert_same_fit(a, b, X):
    assert_same_search(a, b)
    ea, eb = a.best_estimator_, b.best_estimator_
    assert np.array_equal(ea.dual_coef_, eb.dual_coef_) and np.array_equal(ea.intercept_, eb.intercept_)
    assert a.n_basis_ == b.n_basis_ and a.split_seed_ == b.split_seed_
    assert np.array_equal(a.expansion_.decision_function(X), b.expansion_.decision_function(X))


def _interrupt_then_resume(staged, make, X, y, ckpt, at):
    """The search killed at its ``at``-th unit, then resumed: (resumed estimator, units fitted on resume)."""
    staged.clear()
    staged.fold_fit.fail_at = at
    with pytest.raises(Interrupted):
        make().fit(X, y, checkpoint=ckpt)
    assert not checkpoint_info(ckpt)["complete"]
    staged.fold_fit.fail_at = 0
    staged.clear()
    resumed = make().fit(X, y, checkpoint=ckpt, resume=True)
    assert checkpoint_info(ckpt)["complete"]
    return resumed, list(staged)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_numpy_search_interrupted_at_several_units_resumes_to_the_same_fit(staged, monkeypatch, tmp_path):
    folds = np.arange(150) % K
    X, y = fold_copies(folds)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=PredefinedSplit(folds), random_state=0, client="sync")
    continued = continued_pursuits(monkeypatch)
    reference = make().fit(X, y)
    units, n_continued = list(staged), len(continued)
    assert reference.sizes_[-1] == 40 and len({c for _, _, c in units}) == 3  # the precondition: three stages
    assert n_continued > 0  # and pursuits continued to a doubled cap
    for at in (1, 4, len(units) - 2, len(units)):
        continued.clear()
        resumed, refitted = _interrupt_then_resume(staged, make, X, y, tmp_path / f"ck{at}", at)
        _assert_same_fit(reference, resumed, X)
        # the units recorded before the kill are not fitted again; the one the fit died in and every
        # later one are, and a pursuit the uninterrupted search continued from its kept state is
        # continued from the recorded one (in the killed process or in the resumed one, once)
        assert refitted == units[at - 1:]
        assert len(continued) == n_continued


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_regressor_and_a_complete_checkpoint(staged, tmp_path):
    X, y = fold_copies(np.arange(120) % K, seed=1)
    target = np.sin(X[:, 0]) + 0.5 * y
    make = lambda: KMPRegressorCV(gammas=[1.0], cv=K, random_state=3)
    reference = make().fit(X, target)
    resumed, _ = _interrupt_then_resume(staged, make, X, target, tmp_path / "ck", 3)
    _assert_same_fit(reference, resumed, X)
    staged.clear()
    again = make().fit(X, target, checkpoint=tmp_path / "ck", resume=True)  # complete: nothing fitted again
    assert staged == [] and checkpoint_info(tmp_path / "ck" / "refit")["complete"]
    _assert_same_fit(reference, again, X)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_interrupted_refit_resumes_from_its_own_checkpoint(staged, monkeypatch, tmp_path):
    X, y = fold_copies(np.arange(150) % K)
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=K, random_state=0, client="sync")
    reference = make().fit(X, y)
    chosen, original = [], _kmp_cv._BaseKMPCV._choose
    monkeypatch.setattr(_kmp_cv._BaseKMPCV, "_choose", lambda self, *a: chosen.append(1) or original(self, *a))

    def progress(verbose, total, **kw):  # the refit (after the choice) dies at its 4th iteration
        def callback(record):
            if chosen and record["iteration"] == 3:
                raise Interrupted("refit")
        return callback, None

    assert reference.n_basis_ > 4  # the precondition: the refit has an iteration 3
    with monkeypatch.context() as m:
        m.setattr(est_kmp, "progress_callback", progress)
        with pytest.raises(Interrupted):
            make().fit(X, y, checkpoint=tmp_path / "ck", checkpoint_every=2)
    info = checkpoint_info(tmp_path / "ck" / "refit")
    assert info is not None and not info["complete"] and info["iteration"] == 3  # saved at iterations 1 and 3
    staged.clear()
    resumed = make().fit(X, y, checkpoint=tmp_path / "ck", checkpoint_every=2, resume=True)
    assert staged == []  # every unit from the checkpoint
    _assert_same_fit(reference, resumed, X)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_store_search_interrupted_resumes_to_the_same_fit(staged, monkeypatch, tmp_path):
    """A zarr store (folds by row hash, the held-out scores from one pass over the recorded scorers)."""
    from kmp_dask.estimators._kmp_cv import check_random_state

    split_seed = int(check_random_state(0).randint(0, 2**31 - 1))
    X, y = fold_copies(row_folds(150, K, split_seed))
    url = create_store(tmp_path / "d.zarr", X, y, chunk_rows=50).url
    make = lambda: KMPClassifierCV(gammas=[0.5, 2.0], cv=K, random_state=0, client="sync")
    continued = continued_pursuits(monkeypatch)
    reference = make().fit(url)
    units, n_continued = list(staged), len(continued)
    assert reference.sizes_[-1] == 40 and n_continued > 0
    for at in (2, len(units) - 1):
        continued.clear()
        staged.clear()
        staged.fold_fit.fail_at = at
        with pytest.raises(Interrupted):
            make().fit(url, checkpoint=tmp_path / f"ck{at}")
        staged.fold_fit.fail_at = 0
        resumed = make().fit(url, checkpoint=tmp_path / f"ck{at}", resume=True)
        _assert_same_fit(reference, resumed, X)
        assert len(continued) == n_continued  # the kept states were recorded and continued after the resume
    from kmp_dask.parallel import _cv_scores

    passes, original = [], _cv_scores.held_out_prefix_stats
    monkeypatch.setattr(_cv_scores, "held_out_prefix_stats", lambda *a, **k: passes.append(1) or original(*a, **k))
    staged.clear()
    again = make().fit(url, checkpoint=tmp_path / f"ck{at}", resume=True)  # complete: no pursuit, no pass
    assert staged == [] and passes == []
    _assert_same_fit(reference, again, X)


def test_random_state_none_resumes_with_the_seeds_it_began_with(staged, tmp_path):
    X, y = fold_copies(np.arange(90) % K)
    staged.fold_fit.fail_at = 2
    est = KMPClassifierCV(gammas=[1.0], n_basis=6, cv=K)
    with pytest.raises(Interrupted):
        est.fit(X, y, checkpoint=tmp_path / "ck")
    staged.fold_fit.fail_at = 0
    resumed = KMPClassifierCV(gammas=[1.0], n_basis=6, cv=K).fit(X, y, checkpoint=tmp_path / "ck", resume=True)
    assert resumed.split_seed_ == est.split_seed_
    staged.clear()
    again = KMPClassifierCV(gammas=[1.0], n_basis=6, cv=K).fit(X, y, checkpoint=tmp_path / "ck", resume=True)
    assert staged == [] and again.split_seed_ == est.split_seed_
    _assert_same_fit(resumed, again, X)


def _refuse_clusters(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a cluster session was opened before the checkpoint was checked")

    monkeypatch.setattr(_kmp_cv, "client_session", refuse)


def test_checkpoint_errors_before_any_cluster(tmp_path, monkeypatch):
    X, y = fold_copies(np.arange(90) % K)
    params = {"gammas": [1.0], "n_basis": 5, "cv": K, "random_state": 0}
    KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "ck")
    before = (tmp_path / "ck" / STATE_FILE).read_bytes()
    _refuse_clusters(monkeypatch)
    with pytest.raises(FileExistsError, match="pass resume=True to continue it, or remove it"):
        KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "ck")
    assert (tmp_path / "ck" / STATE_FILE).read_bytes() == before
    with pytest.raises(ValueError, match=r"parameter n_basis: checkpoint 5, now 6"):
        KMPClassifierCV(**{**params, "n_basis": 6}).fit(X, y, checkpoint=tmp_path / "ck", resume=True)
    with pytest.raises(ValueError, match=r"parameter gammas: checkpoint \[1.0\], now \[2.0\]"):
        KMPClassifierCV(**{**params, "gammas": [2.0]}).fit(X, y, checkpoint=tmp_path / "ck", resume=True)
    y2 = y.copy()
    y2[40] = 1 - y2[40]
    with pytest.raises(ValueError, match=r"data rows_sha256: checkpoint '[0-9a-f]+', now '[0-9a-f]+'"):
        KMPClassifierCV(**params).fit(X, y2, checkpoint=tmp_path / "ck", resume=True)
    with pytest.raises(ValueError, match=r"estimator: checkpoint 'KMPClassifierCV', now 'KMPRegressorCV'"):
        KMPRegressorCV(**params).fit(X, y * 1.0, checkpoint=tmp_path / "ck", resume=True)
    with pytest.raises(ValueError, match="resume=True needs checkpoint="):
        KMPClassifierCV(**params).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "new", checkpoint_every=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"checkpoint must be a directory .* got checkpoint='.*file'"):
        KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "file")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / STATE_FILE).write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a kmp_dask checkpoint"):
        KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "foreign", resume=True)
    (tmp_path / "orphan" / "refit").mkdir(parents=True)
    (tmp_path / "orphan" / "refit" / STATE_FILE).write_bytes(b"x")
    with pytest.raises(FileExistsError, match="the refit of an earlier search"):
        KMPClassifierCV(**params).fit(X, y, checkpoint=tmp_path / "orphan")


def test_foreign_files_in_the_directory_are_left_alone(tmp_path):
    X, y = fold_copies(np.arange(90) % K)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "notes.txt").write_text("mine")
    KMPClassifierCV(gammas=[1.0], n_basis=5, cv=K, random_state=0).fit(X, y, checkpoint=tmp_path / "ck")
    assert (tmp_path / "ck" / "notes.txt").read_text() == "mine"
    assert checkpoint_info(tmp_path / "ck")["complete"]


_DRIVER = """
import sys
import numpy as np
from kmp_dask import KMPClassifierCV, save
store, ckpt, model = sys.argv[1:4]
est = KMPClassifierCV(random_state=0, cv=3, client="sync")
est.fit(store, **({} if ckpt == "-" else {"checkpoint": ckpt, "checkpoint_every": 5, "resume": True}))
# a kill may fall in the save; with cv_search_: the widths, every held-out score, the choice
save(est.best_estimator_, model, overwrite=True)
print("DONE", flush=True)
"""


def _driver(tmp_path, store, ckpt, model, kill_after=None):
    """Run the driver in its own session; SIGKILL its process group ``kill_after`` seconds after
    the start unless it ended. Returns (seconds, killed)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(store), str(ckpt), str(model)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        proc.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver's own process group, started above
        proc.wait()
        return time.perf_counter() - t0, True
    out, err = proc.communicate()
    assert proc.returncode == 0 and b"DONE" in out, err.decode()[-3000:]
    return time.perf_counter() - t0, False


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_driver_killed_at_random_times_resumes_to_the_identical_model(tmp_path):
    """A real killed driver: ``KMPClassifierCV().fit(store, checkpoint=DIR, resume=True)`` in a
    subprocess, SIGKILLed at a time drawn uniformly in (0, T) (T: an uninterrupted driver's wall
    time, imports included), restarted until it completes; its saved model (refit, ``cv_search_``
    with every held-out score) is compared bit for bit with the uninterrupted driver's, which is
    itself the driver's without a checkpoint."""
    import random
    import sys
    from pathlib import Path

    from _cv_checks import checkerboard

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import driver_kills as DK

    X, y = checkerboard(n=900, seed=1)
    store = create_store(tmp_path / "d.zarr", X, y, chunk_rows=300).url
    T, _ = _driver(tmp_path, store, "-", tmp_path / "plain")
    _driver(tmp_path, store, tmp_path / "control", tmp_path / "control.model")
    assert DK.compare_models(tmp_path / "plain", tmp_path / "control.model")["identical"]
    rng, runs = random.Random(0), []
    for i in range(6):
        ckpt, model = tmp_path / f"ck{i}", tmp_path / f"m{i}"
        kills, seconds = [], rng.uniform(0.2, 1.0) * T
        while True:
            _, killed = _driver(tmp_path, store, ckpt, model, kill_after=seconds if len(kills) < 2 else None)
            if not killed:
                break
            kills.append((round(seconds, 2), len(list(ckpt.glob("unit-*.ckpt")))))  # units recorded by then
            seconds = rng.uniform(0.1, 1.0) * T
        runs.append((kills, DK.compare_models(tmp_path / "plain", model)))
    print("runs (kills: (seconds after the start, units recorded by then)), T =", round(T, 2), "s:",
          [(kills, same["identical"]) for kills, same in runs])
    killed_runs = [r for r in runs if r[0]]
    assert len(killed_runs) >= 4, runs  # most draws kill the driver before it ends
    assert any(units > 0 for kills, _ in runs for _, units in kills), runs  # some killed mid-search
    assert all(same["identical"] for _, same in runs), runs
