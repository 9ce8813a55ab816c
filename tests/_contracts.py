"""What every family's checkpoint / resume and killed-worker tests share, defined once.

* :class:`Interrupted` — raised from a progress hook or a patched step: the fit dies there, as a
  killed driver would.
* :func:`interrupt_at` / :func:`interrupt_after` — raise it from the fits' iteration listener
  (``estimators._progress.iteration_listener``: every family hands each record to it, after that
  record's checkpoint was saved), at a given iteration or after a number of records.
* :func:`interrupted_then_resumed` — the resume contract: interrupted at a record, the checkpoint is
  incomplete at the expected iteration, the resumed fit does not begin its loop again, and ends
  complete.
* :data:`SIGKILL_SCRIPT` and :func:`run_and_kill_at` — the one driver script a SIGKILL test runs in a
  subprocess (any estimator; its lines come from the iteration listener) and its runner.
* :func:`kill_worker_at` — a loop callback that SIGKILLs the worker process holding the first
  partitions at a given iteration (the killed-worker contract).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kmp_dask.estimators._progress import iteration_listener
from kmp_dask.greedy._checkpoint import checkpoint_info


class Interrupted(Exception):
    """Raised from a hook: the fit dies where a killed driver would."""


@contextlib.contextmanager
def interrupt_at(iteration, desc=None):
    """Inside the block, a fit raises :class:`Interrupted` when the record of ``iteration`` arrives
    (from a fit whose progress is called ``desc``, or any)."""
    def listener(d, record):
        if (desc is None or d == desc) and record["iteration"] == iteration:
            raise Interrupted(iteration)

    with iteration_listener(listener):
        yield


@contextlib.contextmanager
def interrupt_after(calls, desc=None):
    """Inside the block, a fit raises :class:`Interrupted` at its ``calls``-th record."""
    seen = []

    def listener(d, record):
        if desc is None or d == desc:
            seen.append(record)
            if len(seen) == calls:
                raise Interrupted(calls)

    with iteration_listener(listener):
        yield


def interrupted_then_resumed(monkeypatch, make, fit_args, ckpt, at, every, *, begin, after=False, saved=None,
                             stage=None, desc=None, begun_expected=(), check=None):
    """Fit ``make()`` on ``fit_args`` with a checkpoint in ``ckpt``, interrupted at record ``at`` (or,
    ``after=True``, after ``at`` records), then resume it; returns the resumed estimator.

    Checked on the way: the checkpoint is incomplete, saved at ``saved`` (default: the last multiple
    of ``every`` before the interruption, ``at - (at + 1) % every``; ``check(ckpt, expected)`` instead
    checks a family whose main file counts something else), in ``stage`` when given; the
    resumed fit calls none of ``begin`` (``(owner, attribute)`` pairs that start a loop from scratch)
    but those ``begun_expected`` names; the checkpoint is complete at the end."""
    hook = interrupt_after if after else interrupt_at
    with hook(at, desc), pytest.raises(Interrupted):
        make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every)
    info = checkpoint_info(ckpt)
    expected = saved if saved is not None else (at - 1) - at % every if after else at - (at + 1) % every
    assert info is not None and not info["complete"], info
    if check is not None:
        check(ckpt, expected)
    else:
        assert info["iteration"] == expected, info
    if stage is not None:
        assert info["stage"] == stage
    begun = []
    with monkeypatch.context() as m:  # a resumed fit continues the loop: no set-up, no first draw
        for owner, name in begin:
            real = getattr(owner, name)
            m.setattr(owner, name, _recording(real, name, begun))
        resumed = make().fit(*fit_args, checkpoint=ckpt, checkpoint_every=every, resume=True)
    assert begun == list(begun_expected) and checkpoint_info(ckpt)["complete"]
    return resumed


def _recording(real, name, begun):
    def wrapped(*args, **kwargs):
        begun.append(name)
        return real(*args, **kwargs)
    return wrapped


#: The driver of every SIGKILL test: ``SETUP`` defines ``est`` (the estimator) and ``args`` (what
#: ``fit`` takes before the checkpoint); each record any fit hands to the iteration listener is printed
#: as ``<desc>: iteration <k>``; the checkpoint directory is the last command-line argument.
SIGKILL_SCRIPT = """
import sys
from kmp_dask.estimators._progress import iteration_listener

SETUP

def loud(desc, record):
    print(f"{desc}: iteration {record['iteration']}", flush=True)

with iteration_listener(loud):
    est.fit(*args, checkpoint=sys.argv[-1], checkpoint_every=1)
print("done", flush=True)
"""


def run_and_kill_at(tmp_path, setup: str, args, line: str, count: int = 1, timeout: float = 180):
    """Run :data:`SIGKILL_SCRIPT` with ``setup`` and the command-line ``args``; SIGKILL it once it has
    printed ``line`` ``count`` times (or after ``timeout`` seconds); return the lines it printed."""
    path = tmp_path / "driver.py"
    path.write_text(textwrap.dedent(SIGKILL_SCRIPT).replace("SETUP", textwrap.dedent(setup)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(path), *map(str, args)], stdout=subprocess.PIPE, text=True, env=env)
    seen, deadline = [], time.monotonic() + timeout
    try:
        for out in proc.stdout:
            seen.append(out.strip())
            if seen.count(line) >= count or time.monotonic() > deadline:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    return seen


def kill_worker_at(client, engine, iteration, *, at_least=False):
    """A loop callback that SIGKILLs the worker process holding ``engine``'s first partitions when
    the record of ``iteration`` arrives (``at_least``: the first record at or after it), once; its
    ``killed`` list holds the iteration it fired at."""
    pids = client.run(os.getpid)
    victim = engine._holders[0]["addr"]

    def kill(record):
        hit = record["iteration"] >= iteration if at_least else record["iteration"] == iteration
        if hit and not kill.killed:
            kill.killed.append(record["iteration"])
            os.kill(pids[victim], signal.SIGKILL)

    kill.killed = []
    return kill


# -- the same model, array for array: what a resumed or rebuilt fit must equal --------------------

def same_kmp(a, b, X=None):
    np.testing.assert_array_equal(a.basis_indices_, b.basis_indices_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert np.array_equal(a.predict(X), b.predict(X))
    assert a.stop_reason_ == b.stop_reason_
    drop = lambda h: [{k: v for k, v in r.items() if k != "seconds"} for r in h]  # noqa: E731
    assert drop(a.history_) == drop(b.history_)


def same_compressor(a, b, X=None):
    ea, eb = a.expansion_, b.expansion_
    assert ea.support_vectors.tobytes() == eb.support_vectors.tobytes()
    assert ea.coef.tobytes() == eb.coef.tobytes() and ea.intercept.tobytes() == eb.intercept.tobytes()
    np.testing.assert_array_equal(a.support_index_, b.support_index_)
    assert a.rkhs_error_.tobytes() == b.rkhs_error_.tobytes() and a.wsq_.tobytes() == b.wsq_.tobytes()
    assert a.path_ == b.path_ and a.stop_reason_ == b.stop_reason_


def same_kpca(a, b, X=None):
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    for name in ("basis_vectors_", "trace_residual_path_", "eigenvalues_", "explained_variance_"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.expansion_.coef.tobytes() == b.expansion_.coef.tobytes()
    assert a.expansion_.intercept.tobytes() == b.expansion_.intercept.tobytes()
    assert (a.stop_reason_, a.n_passes_, a.n_components_) == (b.stop_reason_, b.n_passes_, b.n_components_)
    if hasattr(b, "bound_path_"):
        assert a.bound_path_.tobytes() == b.bound_path_.tobytes()


def same_kcca(a, b, X=None):
    np.testing.assert_array_equal(a.components_index_, b.components_index_)
    assert a.correlations_.tobytes() == b.correlations_.tobytes()
    assert a.trace_residual_path_.tobytes() == b.trace_residual_path_.tobytes()
    for e, f in ((a.expansion_x_, b.expansion_x_), (a.expansion_y_, b.expansion_y_)):
        assert e.coef.tobytes() == f.coef.tobytes() and e.intercept.tobytes() == f.intercept.tobytes()


def same_cvm(a, b, X=None):
    ea, eb = a.expansion_, b.expansion_
    assert ea.support_vectors.tobytes() == eb.support_vectors.tobytes()
    assert ea.coef.tobytes() == eb.coef.tobytes() and ea.intercept.tobytes() == eb.intercept.tobytes()
    assert a.radius_.tobytes() == b.radius_.tobytes()
    assert np.array_equal(a.n_iter_, b.n_iter_) and np.array_equal(a.n_full_passes_, b.n_full_passes_)
    assert a.stop_reason_ == b.stop_reason_
    for ra, rb in zip(a.results_, b.results_, strict=True):
        assert ra.core_index.tolist() == rb.core_index.tolist()
        assert ra.alpha.tobytes() == rb.alpha.tobytes() and ra.objective == rb.objective
        assert ra.n_passes == rb.n_passes
        assert ra.history == rb.history and len(ra.history) == ra.n_iter  # a resumed run's records: the whole run's
    assert np.array_equal(a.classes_, b.classes_)
    assert a.decision_function(X).tobytes() == b.decision_function(X).tobytes()


def same_mmda(a, b, X=None):
    ea, eb = a.expansion_, b.expansion_
    assert ea.support_vectors.tobytes() == eb.support_vectors.tobytes()
    assert ea.coef.tobytes() == eb.coef.tobytes()
    assert a.core_sizes_ == b.core_sizes_ and a.components_per_problem_ == b.components_per_problem_
    assert a.transform(X).tobytes() == b.transform(X).tobytes()
