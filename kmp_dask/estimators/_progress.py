"""Per-iteration progress for long fits.

``verbose=0``: silent. ``verbose=1`` (or True): a tqdm bar (notebook-aware through
``tqdm.auto``) with the residual norm and validation score as postfix. ``verbose=k ≥ 2``: one
plain line on stderr every ``k`` iterations — for logs, batch jobs and CI, where bars are noise.

Whatever ``verbose`` says, the listeners registered with :func:`iteration_listener` (a context
variable, so threads and notebooks do not see each other's) receive every iteration's record
too, with the fit's ``desc`` — the CLI's ``--log-json`` writes them as JSON lines.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time

__all__ = ["progress_callback", "inner_progress", "iteration_listener"]

_LISTENERS: contextvars.ContextVar[tuple] = contextvars.ContextVar("kmp_dask_iteration_listeners", default=())


@contextlib.contextmanager
def iteration_listener(fn):
    """Inside the block, every fit calls ``fn(desc, record)`` after each iteration."""
    token = _LISTENERS.set(_LISTENERS.get() + (fn,))
    try:
        yield fn
    finally:
        _LISTENERS.reset(token)


def _with_listeners(callback, desc):
    """``callback`` (or None) extended by the registered listeners."""
    listeners = _LISTENERS.get()
    if not listeners:
        return callback

    def both(record):
        if callback is not None:
            callback(record)
        for fn in listeners:
            fn(desc, record)

    return both


def _fmt(record, unit="basis"):
    parts = [f"{unit} {record['iteration'] + 1}"]
    if record.get("residual_norm") is not None:
        parts.append(f"residual {record['residual_norm']:.4g}")
    if record.get("rkhs_error_rel") is not None:
        parts.append(f"rkhs_error {record['rkhs_error_rel']:.3g}")
    if record.get("val_score") is not None:
        parts.append(f"validation {record['val_score']:.4g}")
    if record.get("class") is not None:  # one-vs-rest problems (CVM, MMDA): the class just fitted
        parts.append(f"class {record['class']}")
    if record.get("n_core") is not None:
        parts.append(f"core {record['n_core']}")
    return parts


def progress_callback(verbose, total, *, desc="kmp", unit="basis"):
    """Return ``(callback, closer)``: what to call after each iteration and at the end."""
    callback, closer = _progress(verbose, total, desc, unit)
    return _with_listeners(callback, desc), closer


#: Seconds between two plain lines of :func:`inner_progress` (``verbose ≥ 2``).
INNER_LINE_SECONDS = 10.0


def inner_progress(bar, verbose, desc):
    """Progress of the iterations inside a step that ``bar`` counts (a CVM's or MMDA's core-set
    iterations inside its binary problems): ``verbose=1`` shows the latest record as ``bar``'s
    postfix; ``k ≥ 2`` prints a line at most every :data:`INNER_LINE_SECONDS`; the listeners
    (``--log-json``) get every record with ``desc``. None when nothing would be shown."""
    listeners = _LISTENERS.get()
    if not verbose and not listeners:
        return None
    last = [time.perf_counter()]
    t0 = last[0]

    def callback(record):
        if verbose is True or verbose == 1:
            if bar is not None and hasattr(bar, "set_postfix"):
                bar.set_postfix(dict(p.split(" ", 1) for p in _fmt(record, "iteration")), refresh=True)
        elif verbose and time.perf_counter() - last[0] >= INNER_LINE_SECONDS:
            last[0] = time.perf_counter()
            line = ", ".join(_fmt(record, "iteration") + [f"{last[0] - t0:.1f} s elapsed"])
            print(f"[{desc}] {line}", file=sys.stderr, flush=True)
        for fn in listeners:
            fn(desc, record)

    return callback


def _left(elapsed: float, n: int, total) -> str:
    """``", ~N s left"``: the time the remaining iterations take at the pace so far — an estimate,
    not a bound (a greedy iteration grows slower as the model grows, and a loop may stop early:
    a size above the rows is capped), so shown with ``~``; nothing when there is no total."""
    if not total or n >= total:
        return ""
    return f", ~{elapsed / n * (total - n):.0f} s left at this pace"


def _progress(verbose, total, desc, unit):
    if not verbose:
        return None, None
    if verbose is True or verbose == 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, leave=True)

        def callback(record):
            post = dict(p.split(" ", 1) for p in _fmt(record, unit)[1:])
            bar.set_postfix(post, refresh=False)
            bar.update(1)

        return callback, bar

    every = int(verbose)
    t0 = time.perf_counter()

    def callback(record):
        n = record["iteration"] + 1
        if n % every == 0 or n == total:
            elapsed = time.perf_counter() - t0
            line = ", ".join(_fmt(record, unit) + [f"{elapsed:.1f} s elapsed" + _left(elapsed, n, total)])
            print(f"[{desc}] {line}", file=sys.stderr, flush=True)

    class _Closer:
        def close(self):
            pass

    return callback, _Closer()
